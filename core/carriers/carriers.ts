/**
 * Carriers: the SIP peers the service takes calls from and places calls through, kept in the `carriers` table, added
 * by hand (`switchboard carriers add`) or declared by an EnginePool resource (operator/engines.ts). This module holds the
 * table's SQL: adding (with the input's checks and the password sealed, core/sealing.ts), listing and removing. The
 * engine's cached lookup of a call's carrier by source address is engine/sip/carriers.ts.
 */
import ipaddr from 'ipaddr.js';
import type { Queryable } from '../database.ts';
import { sealSecret } from '../sealing.ts';

/** How SIP reaches a carrier (engine/sip/transport.ts's `Protocol`). */
export type CarrierTransport = 'udp' | 'tcp';

export interface Carrier {
  name: string;
  address: string;
  port: number;
  transport: CarrierTransport;
  username: string | null;
  /** Sealed (AES-256-GCM); opened only to answer a digest challenge. */
  password: string | null;
  /** Where its media may be besides its address: CIDR ranges or addresses (docs/calls.md, Media addresses). */
  media_networks: string[];
}

export class CarrierInputError extends Error {}

const namePattern = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
/** A DNS host name (an IP address is checked with ipaddr.js). */
export const hostPattern =
  /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** The most media networks a carrier lists. */
export const maxMediaNetworks = 32;

/** Checks media networks: each an IP address or a CIDR range, at most `maxMediaNetworks`. */
function checkMediaNetworks(networks: readonly string[]): void {
  if (networks.length > maxMediaNetworks) {
    throw new CarrierInputError(`--media-networks lists at most ${maxMediaNetworks} networks`);
  }
  for (const network of networks) {
    if (ipaddr.isValid(network)) continue;
    try {
      ipaddr.parseCIDR(network);
    } catch {
      throw new CarrierInputError(`--media-networks: ${network} is not an IP address or a CIDR range`);
    }
  }
}

/** Checks an address: an IP, a CIDR range or a host name. */
function checkAddress(address: string): void {
  if (ipaddr.isValid(address)) return;
  if (address.includes('/')) {
    try {
      ipaddr.parseCIDR(address);
      return;
    } catch {
      throw new CarrierInputError(`--address ${address} is not a valid CIDR range`);
    }
  }
  if (!hostPattern.test(address)) throw new CarrierInputError(`--address ${address} is not an address, CIDR or host`);
}

export async function addCarrier(
  db: Queryable,
  secretsKey: Uint8Array,
  input: {
    name: string;
    address: string;
    port?: number;
    transport?: string;
    username?: string;
    password?: string;
    /** CIDR ranges or addresses of its media servers, when they are not at its address. */
    mediaNetworks?: readonly string[];
    /** The EnginePool resource (`namespace/name`) declaring the carrier; none when added by hand. */
    engine?: string;
  },
): Promise<Omit<Carrier, 'password' | 'media_networks'> & { mediaNetworks: string[]; hasPassword: boolean }> {
  if (!namePattern.test(input.name)) {
    throw new CarrierInputError(`carrier name "${input.name}" must be 1-63 letters, digits, '.', '_' or '-'`);
  }
  checkAddress(input.address);
  const port = input.port ?? 5060;
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new CarrierInputError('--port must be 1-65535');
  const transport = input.transport ?? 'udp';
  if (transport !== 'udp' && transport !== 'tcp') throw new CarrierInputError('--transport must be udp or tcp');
  if ((input.username === undefined) !== (input.password === undefined)) {
    throw new CarrierInputError('--username and --password go together');
  }
  const mediaNetworks = [...(input.mediaNetworks ?? [])];
  checkMediaNetworks(mediaNetworks);
  const result = await db.query<Carrier>(
    `INSERT INTO carriers (name, address, port, transport, username, password, engine, media_networks)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (name) DO UPDATE SET address = excluded.address, port = excluded.port,
       transport = excluded.transport, username = excluded.username, password = excluded.password,
       media_networks = excluded.media_networks
     -- A carrier declared by an EnginePool resource changes only there (and one added by hand only by hand).
     WHERE carriers.engine IS NOT DISTINCT FROM excluded.engine
     RETURNING name, address, port, transport, username, password, media_networks`,
    [
      input.name,
      input.address,
      port,
      transport,
      input.username ?? null,
      input.password === undefined ? null : sealSecret(secretsKey, input.password),
      input.engine ?? null,
      mediaNetworks,
    ],
  );
  const row = result.rows[0] as Carrier | undefined;
  if (row === undefined) {
    const owner = await db.query<{ engine: string | null }>('SELECT engine FROM carriers WHERE name = $1', [
      input.name,
    ]);
    const engine = owner.rows[0]?.engine;
    throw new CarrierInputError(
      engine === null || engine === undefined
        ? `carrier "${input.name}" was added with \`switchboard carriers add\`; change it there or remove it first`
        : `carrier "${input.name}" is declared by the EnginePool resource ${engine}; change it there`,
    );
  }
  return {
    name: row.name,
    address: row.address,
    port: row.port,
    transport: row.transport,
    username: row.username,
    mediaNetworks: row.media_networks,
    hasPassword: row.password !== null,
  };
}

/** Every carrier, by name, its password still sealed. */
export async function listCarriers(db: Queryable): Promise<Carrier[]> {
  const result = await db.query<Carrier>(
    'SELECT name, address, port, transport, username, password, media_networks FROM carriers ORDER BY name',
  );
  return result.rows;
}

/** Removes the carriers an EnginePool resource (`namespace/name`) declared, except those named in `keep`. */
export async function removeEngineCarriers(db: Queryable, engine: string, keep: readonly string[]): Promise<void> {
  await db.query('DELETE FROM carriers WHERE engine = $1 AND NOT (name = ANY($2::text[]))', [engine, keep]);
}

/** Removes every carrier an EnginePool resource (`namespace/name`) declared (the EnginePool is gone). */
export async function removeAllEngineCarriers(db: Queryable, engine: string): Promise<void> {
  await db.query('DELETE FROM carriers WHERE engine = $1', [engine]);
}

/**
 * Sets a carrier's messaging settings (`settings` as stored JSON, core/carriers/messaging.ts), or removes them with
 * null. False when there is no such carrier.
 */
export async function writeCarrierMessaging(db: Queryable, name: string, settings: string | null): Promise<boolean> {
  const result = await db.query('UPDATE carriers SET messaging = $2 WHERE name = $1', [name, settings]);
  return result.rowCount !== 0;
}
