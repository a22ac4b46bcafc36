/**
 * The `sip_credentials` table: the username and password a sip device registers with (operation 66). The password
 * is shown once and kept sealed (core/sealing.ts) under the SIP passwords key, bound to its device and username, since
 * digest authentication needs it back; issuing again replaces both at once. Deleted with the device (and so with
 * the device's person), and with them the device's registration bindings (core/devices/sip-bindings.ts).
 */
import { randomBytes } from 'node:crypto';
import type { Queryable } from '../database.ts';
import { openSecret, sealSecret } from '../sealing.ts';
import { unbindDevice } from './sip-bindings.ts';

export interface IssuedSipCredentials {
  deviceId: string;
  username: string;
  /** In clear, for the answer that shows it once; stored only sealed. */
  password: string;
  issuedAt: Date;
}

/** What a sealed password is bound to: opened with anything else (another device or username), it fails. */
const associatedData = (deviceId: string, username: string) => `sip-credentials:${deviceId}:${username}`;

/** New credentials for a device, replacing any it had: a fresh username (`sb` + 24 hex) and a 192-bit password. */
export async function issueSipCredentials(
  db: Queryable,
  key: Uint8Array,
  deviceId: string,
): Promise<IssuedSipCredentials> {
  const username = `sb${randomBytes(12).toString('hex')}`;
  const password = randomBytes(24).toString('base64url');
  const sealed = sealSecret(key, password, associatedData(deviceId, username));
  // The old credentials' bindings go in the same transaction (the caller's): a phone registered with the old
  // password is never rung.
  await unbindDevice(db, deviceId);
  const result = await db.query<{ issued_at: Date }>(
    `INSERT INTO sip_credentials (device_id, username, password_sealed) VALUES ($1, $2, $3)
       ON CONFLICT (device_id) DO UPDATE
         SET username = EXCLUDED.username, password_sealed = EXCLUDED.password_sealed, issued_at = clock_timestamp()
       RETURNING issued_at`,
    [deviceId, username, sealed],
  );
  return { deviceId, username, password, issuedAt: (result.rows[0] as { issued_at: Date }).issued_at };
}

/** The device and password of a username, for the registrar's digest check; undefined for an unknown username. */
export async function sipCredentialsOf(
  db: Queryable,
  key: Uint8Array,
  username: string,
): Promise<{ deviceId: string; password: string } | undefined> {
  const result = await db.query<{ device_id: string; password_sealed: string }>(
    'SELECT device_id, password_sealed FROM sip_credentials WHERE username = $1',
    [username],
  );
  const row = result.rows[0];
  if (row === undefined) return undefined;
  return {
    deviceId: row.device_id,
    password: openSecret(key, row.password_sealed, associatedData(row.device_id, username)),
  };
}

/** Removes a device's credentials (it is no longer a SIP device). */
export async function removeSipCredentials(db: Queryable, deviceId: string): Promise<void> {
  await db.query('DELETE FROM sip_credentials WHERE device_id = $1', [deviceId]);
}
