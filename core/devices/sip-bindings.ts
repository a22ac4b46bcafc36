/**
 * The `sip_bindings` table: where a registered SIP device is reached (docs/phones.md, "SIP devices and the
 * registrar"). One row per contact a device registered, with the source the REGISTER came from (address, port,
 * transport: where INVITEs go, never the Contact's host), its Call-ID and CSeq (RFC 3261 section 10.3), its expiry,
 * and the engine that holds its flow. Every time is the caller's (`now`), so the engine's clock decides expiry.
 */
import type pg from 'pg';
import { inTransaction, type Queryable } from '../database.ts';

export interface BindingSource {
  protocol: 'udp' | 'tcp';
  address: string;
  port: number;
}

export interface SipBinding {
  deviceId: string;
  contactUri: string;
  source: BindingSource;
  callId: string;
  cseq: number;
  expiresAt: Date;
  engineOwner: string;
  updatedAt: Date;
}

export interface Registration {
  deviceId: string;
  /** The credentials' username the REGISTER was signed with (a binding dies with them). */
  username: string;
  callId: string;
  cseq: number;
  source: BindingSource;
  engineOwner: string;
  now: Date;
  /** Contacts to add or refresh (`expiresSecs` > 0) or remove (0); `all` removes every binding (`Contact: *`). */
  contacts: { uri: string; expiresSecs: number }[] | 'all';
  /** Bindings a device keeps at most: past it, the least recently refreshed go. */
  maxBindings: number;
}

export type RegistrationResult =
  | { outcome: 'registered'; bindings: SipBinding[] }
  /** A binding of the same Call-ID already has this CSeq or a higher one: the request is out of order. */
  | { outcome: 'out_of_order' }
  /** The credentials are gone (deleted or issued again since the REGISTER was checked). */
  | { outcome: 'no_credentials' };

interface BindingRow {
  device_id: string;
  contact_uri: string;
  source_protocol: 'udp' | 'tcp';
  source_address: string;
  source_port: number;
  call_id: string;
  cseq: string;
  expires_at: Date;
  engine_owner: string;
  updated_at: Date;
}

const columns =
  'device_id, contact_uri, source_protocol, source_address, source_port, call_id, cseq, expires_at, engine_owner, updated_at';

function binding(row: BindingRow): SipBinding {
  return {
    deviceId: row.device_id,
    contactUri: row.contact_uri,
    source: { protocol: row.source_protocol, address: row.source_address, port: row.source_port },
    callId: row.call_id,
    cseq: Number(row.cseq),
    expiresAt: row.expires_at,
    engineOwner: row.engine_owner,
    updatedAt: row.updated_at,
  };
}

/** A binding as `liveBindingsJson` gives it: the row's columns, its times as JSON text. */
export type BindingJson = Omit<BindingRow, 'expires_at' | 'updated_at'> & { expires_at: string; updated_at: string };

/**
 * An SQL expression: the bindings live at the SQL parameter `now` of the device whose id is the SQL expression
 * `deviceId`, as a JSON array in `liveSipBindings`' order (read them with `bindingsFromJson`). For a query of devices
 * that reads their bindings with them in one statement (devices.ts `ringableDevicesOf`); the table stays this
 * module's.
 */
export function liveBindingsJson(deviceId: string, now: string): string {
  const fields = columns.split(', ').map((column) => `'${column}', ${column}`);
  return `(SELECT coalesce(json_agg(json_build_object(${fields.join(', ')}) ORDER BY expires_at DESC, contact_uri), '[]')
             FROM sip_bindings WHERE device_id = ${deviceId} AND expires_at > ${now})`;
}

/** The bindings of a `liveBindingsJson` array. */
export function bindingsFromJson(rows: readonly BindingJson[]): SipBinding[] {
  return rows.map((row) =>
    binding({ ...row, expires_at: new Date(row.expires_at), updated_at: new Date(row.updated_at) }),
  );
}

/** The device's bindings live at `now`, soonest to expire last (the freshest first). */
export async function liveSipBindings(db: Queryable, deviceId: string, now: Date): Promise<SipBinding[]> {
  const result = await db.query<BindingRow>(
    `SELECT ${columns} FROM sip_bindings WHERE device_id = $1 AND expires_at > $2
       ORDER BY expires_at DESC, contact_uri`,
    [deviceId, now],
  );
  return result.rows.map(binding);
}

/**
 * Applies one REGISTER (RFC 3261 section 10.3, steps 6 to 8) in one transaction: the credentials' row is locked so
 * the REGISTERs of one device take turns and none slips in beside new credentials; a contact already bound under the
 * same Call-ID with a CSeq at least as high makes the whole request out of order (nothing changes); otherwise each
 * contact is added, refreshed or removed. Answers the device's live bindings after it.
 */
export async function applyRegistration(pool: pg.Pool, registration: Registration): Promise<RegistrationResult> {
  const { deviceId, username, callId, cseq, source, engineOwner, now, contacts, maxBindings } = registration;
  return inTransaction(pool, async (db) => {
    const owner = await db.query('SELECT 1 FROM sip_credentials WHERE device_id = $1 AND username = $2 FOR UPDATE', [
      deviceId,
      username,
    ]);
    if (owner.rowCount === 0) return { outcome: 'no_credentials' as const };
    // Expired rows say nothing about order: a REGISTER after its binding expired starts afresh.
    await db.query('DELETE FROM sip_bindings WHERE device_id = $1 AND expires_at <= $2', [deviceId, now]);
    const uris = contacts === 'all' ? null : contacts.map((contact) => contact.uri);
    const stale = await db.query(
      `SELECT 1 FROM sip_bindings
         WHERE device_id = $1 AND call_id = $2 AND cseq >= $3 AND ($4::text[] IS NULL OR contact_uri = ANY ($4))
         LIMIT 1`,
      [deviceId, callId, cseq, uris],
    );
    if ((stale.rowCount ?? 0) > 0) return { outcome: 'out_of_order' as const };
    if (contacts === 'all') {
      await db.query('DELETE FROM sip_bindings WHERE device_id = $1', [deviceId]);
    } else {
      for (const contact of contacts) {
        if (contact.expiresSecs === 0) {
          await db.query('DELETE FROM sip_bindings WHERE device_id = $1 AND contact_uri = $2', [deviceId, contact.uri]);
          continue;
        }
        await db.query(
          `INSERT INTO sip_bindings (device_id, username, contact_uri, source_protocol, source_address, source_port,
               call_id, cseq, expires_at, engine_owner)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::timestamptz + make_interval(secs => $10), $11)
             ON CONFLICT (device_id, contact_uri) DO UPDATE
               SET username = EXCLUDED.username, source_protocol = EXCLUDED.source_protocol,
                   source_address = EXCLUDED.source_address, source_port = EXCLUDED.source_port,
                   call_id = EXCLUDED.call_id, cseq = EXCLUDED.cseq, expires_at = EXCLUDED.expires_at,
                   engine_owner = EXCLUDED.engine_owner, updated_at = clock_timestamp()`,
          [
            deviceId,
            username,
            contact.uri,
            source.protocol,
            source.address,
            source.port,
            callId,
            cseq,
            now,
            contact.expiresSecs,
            engineOwner,
          ],
        );
      }
    }
    await db.query(
      `DELETE FROM sip_bindings WHERE device_id = $1 AND id NOT IN (
         SELECT id FROM sip_bindings WHERE device_id = $1 ORDER BY updated_at DESC, id LIMIT $2)`,
      [deviceId, maxBindings],
    );
    return { outcome: 'registered' as const, bindings: await liveSipBindings(db, deviceId, now) };
  });
}

/** Deletes the bindings expired at `now` (at most `limit` a call); answers how many. */
export async function sweepExpiredSipBindings(db: Queryable, now: Date, limit = 1000): Promise<number> {
  const result = await db.query(
    `DELETE FROM sip_bindings WHERE id IN (
       SELECT id FROM sip_bindings WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
    [now, limit],
  );
  return result.rowCount ?? 0;
}

/** Removes every binding of a device (its credentials were replaced: a phone registered with the old ones is never rung). */
export async function unbindDevice(db: Queryable, deviceId: string): Promise<void> {
  await db.query('DELETE FROM sip_bindings WHERE device_id = $1', [deviceId]);
}
