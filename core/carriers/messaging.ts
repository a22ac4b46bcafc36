/**
 * A carrier's messaging settings (docs/messaging.md, "Carriers speak SMPP 3.4", "MMS"): the SMSC the engine binds a
 * transceiver session to, and optionally the carrier's HTTP media interface for MMS (`mmsUrl`), kept in
 * `carriers.messaging` with the password sealed (core/sealing.ts), set and removed by `switchboard carriers
 * messaging`. Checked here: the host, the port, SMPP 3.4's field lengths (system_id at most 15 characters, password
 * 8, system_type 12), the throughput limit and the MMS URL (https, as a webhook URL is, but on any host: an
 * administrator names it, and a carrier's adapter may well sit on a private network).
 */
import type { Queryable } from '../database.ts';
import { openSecret, sealSecret } from '../sealing.ts';
import ipaddr from 'ipaddr.js';
import { checkWebhookUrl } from '../webhooks/url.ts';
import { CarrierInputError, hostPattern, writeCarrierMessaging } from './carriers.ts';

export interface MessagingSettings {
  host: string;
  port: number;
  systemId: string;
  systemType: string;
  tls: boolean;
  /** Parts per second the carrier takes. */
  throughput: number;
  /** The carrier's HTTP media interface (docs/messaging.md, "MMS"); absent: the carrier takes no MMS. */
  mmsUrl?: string;
}

/** The settings as stored: the password sealed. */
interface StoredSettings extends MessagingSettings {
  password: string;
}

export interface MessagingInput {
  host: string;
  port?: number;
  systemId: string;
  password: string;
  systemType?: string;
  tls?: boolean;
  throughput?: number;
  mmsUrl?: string;
}

/** SMPP 3.4 C-Octet Strings: printable ASCII within the field's length (section 5.2). */
const printable = (value: string, most: number) => value.length <= most && /^[\x20-\x7e]*$/.test(value);

function check(input: MessagingInput): Omit<Required<MessagingInput>, 'mmsUrl'> & { mmsUrl?: string } {
  if (!ipaddr.isValid(input.host) && !hostPattern.test(input.host))
    throw new CarrierInputError(`--smpp-host ${input.host} is not a host or address`);
  const port = input.port ?? (input.tls === true ? 3550 : 2775);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new CarrierInputError('--smpp-port must be 1-65535');
  if (input.systemId === '' || !printable(input.systemId, 15)) {
    throw new CarrierInputError('--system-id must be 1-15 printable ASCII characters (SMPP 3.4)');
  }
  if (!printable(input.password, 8))
    throw new CarrierInputError('--password must be at most 8 printable ASCII characters (SMPP 3.4)');
  const systemType = input.systemType ?? '';
  if (!printable(systemType, 12))
    throw new CarrierInputError('--system-type must be at most 12 printable ASCII characters');
  const throughput = input.throughput ?? 10;
  if (!Number.isInteger(throughput) || throughput < 1 || throughput > 10_000) {
    throw new CarrierInputError('--throughput must be 1-10000 parts a second');
  }
  let mmsUrl: string | undefined;
  if (input.mmsUrl !== undefined) {
    const url = checkWebhookUrl(input.mmsUrl, { allowPrivateNetworks: true });
    if (!url.ok) throw new CarrierInputError(`--mms-url ${url.problem}`);
    mmsUrl = url.url;
  }
  const { mmsUrl: _given, ...rest } = input;
  return {
    ...rest,
    port,
    systemType,
    tls: input.tls === true,
    throughput,
    ...(mmsUrl === undefined ? {} : { mmsUrl }),
  };
}

/**
 * Sets (or, with null, removes) the carrier's messaging settings; what is shown back has no password, only whether
 * there is one. A carrier that does not exist is an input error.
 */
export async function setCarrierMessaging(
  db: Queryable,
  secretsKey: Uint8Array,
  name: string,
  input: MessagingInput | null,
): Promise<{ name: string; messaging: (MessagingSettings & { hasPassword: boolean }) | null }> {
  let stored: StoredSettings | null = null;
  if (input !== null) {
    const checked = check(input);
    stored = { ...checked, password: sealSecret(secretsKey, checked.password, `smpp:${name}`) };
  }
  const found = await writeCarrierMessaging(db, name, stored === null ? null : JSON.stringify(stored));
  if (!found) throw new CarrierInputError(`there is no carrier "${name}" (add it first)`);
  if (stored === null) return { name, messaging: null };
  const { password, ...shown } = stored;
  return { name, messaging: { ...shown, hasPassword: password !== '' } };
}

/** The carriers with messaging settings, their passwords opened: what the engine binds with. */
export async function messagingCarriers(
  db: Queryable,
  secretsKey: Uint8Array,
): Promise<Array<{ name: string; settings: MessagingSettings & { password: string } }>> {
  const result = await db.query<{ name: string; messaging: StoredSettings }>(
    'SELECT name, messaging FROM carriers WHERE messaging IS NOT NULL ORDER BY name',
  );
  return result.rows.map(({ name, messaging }) => ({
    name,
    settings: { ...messaging, password: openSecret(secretsKey, messaging.password, `smpp:${name}`) },
  }));
}

/** Where and as whom MMS go to a carrier (docs/messaging.md, "MMS"): its media interface, with its SMPP account. */
export interface MmsAccount {
  url: string;
  systemId: string;
  password: string;
}

/**
 * The carrier's MMS account, its password opened; undefined when the carrier has no messaging settings or no MMS
 * URL. The engine posts outbound MMS with it, and the API checks inbound MMS' HTTP Basic credentials against it.
 */
export async function mmsAccount(
  db: Queryable,
  secretsKey: Uint8Array,
  carrier: string,
): Promise<MmsAccount | undefined> {
  const result = await db.query<{ messaging: StoredSettings | null }>(
    'SELECT messaging FROM carriers WHERE name = $1',
    [carrier],
  );
  const messaging = result.rows[0]?.messaging;
  if (messaging?.mmsUrl === undefined) return undefined;
  return {
    url: messaging.mmsUrl,
    systemId: messaging.systemId,
    password: openSecret(secretsKey, messaging.password, `smpp:${carrier}`),
  };
}

/** Whether the carrier has an MMS URL (no secret opened: what operation 67 asks before taking media). */
export async function carrierTakesMms(db: Queryable, carrier: string): Promise<boolean> {
  const result = await db.query("SELECT 1 FROM carriers WHERE name = $1 AND messaging ? 'mmsUrl'", [carrier]);
  return result.rowCount !== 0;
}
