/**
 * Carriers: the SIP peers the service takes calls from and places calls through (`switchboard carriers add`). An
 * INVITE is taken only from an address a carrier names (its address, a CIDR range, or a host name resolved when the
 * list is loaded); any other source gets 403. The list is cached per engine and reloaded every few seconds, so a
 * carrier added by the admin command is taken without a restart.
 */
import { lookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import type { Queryable } from '../../core/database.ts';
import { sealSecret } from '../../core/sealing.ts';
import type { Protocol } from './transport.ts';

export interface Carrier {
  name: string;
  address: string;
  port: number;
  transport: Protocol;
  username: string | null;
  /** Sealed (AES-256-GCM); opened only to answer a digest challenge. */
  password: string | null;
}

export class CarrierInputError extends Error {}

const namePattern = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const hostPattern =
  /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

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
    /** The Engine resource (`namespace/name`) declaring the carrier; none when added by hand. */
    engine?: string;
  },
): Promise<Omit<Carrier, 'password'> & { hasPassword: boolean }> {
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
  const result = await db.query<Omit<Carrier, 'password'> & { password: string | null }>(
    `INSERT INTO carriers (name, address, port, transport, username, password, engine)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (name) DO UPDATE SET address = excluded.address, port = excluded.port,
       transport = excluded.transport, username = excluded.username, password = excluded.password
     -- A carrier declared by an Engine resource changes only there (and one added by hand only by hand).
     WHERE carriers.engine IS NOT DISTINCT FROM excluded.engine
     RETURNING name, address, port, transport, username, password`,
    [
      input.name,
      input.address,
      port,
      transport,
      input.username ?? null,
      input.password === undefined ? null : sealSecret(secretsKey, input.password),
      input.engine ?? null,
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
        : `carrier "${input.name}" is declared by the Engine resource ${engine}; change it there`,
    );
  }
  return {
    name: row.name,
    address: row.address,
    port: row.port,
    transport: row.transport,
    username: row.username,
    hasPassword: row.password !== null,
  };
}

/** A lookup that misses reloads the list when it is older than this. */
const missReloadMs = 1_000;

interface Matcher {
  carrier: Carrier;
  matches(address: ipaddr.IPv4 | ipaddr.IPv6): boolean;
}

function normalize(address: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const parsed = ipaddr.parse(address);
  return parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()
    ? (parsed as ipaddr.IPv6).toIPv4Address()
    : parsed;
}

/** The carriers of the database, cached; `carrierFor(address)` tells which one a source address belongs to. */
export class CarrierDirectory {
  private matchers: Matcher[] = [];
  private loadedAt = 0;
  private loading: Promise<void> | undefined;

  constructor(
    private readonly db: Queryable,
    private readonly refreshMs = 5_000,
  ) {}

  async all(): Promise<Carrier[]> {
    await this.fresh();
    return this.matchers.map((matcher) => matcher.carrier);
  }

  /** A carrier by name; one not in the list read so far is looked for again in the database at once. */
  async byName(name: string): Promise<Carrier | undefined> {
    const find = () => this.matchers.find((matcher) => matcher.carrier.name === name)?.carrier;
    await this.fresh();
    const found = find();
    if (found !== undefined) return found;
    // A load under way may have read the table before the carrier was added: wait for it, then read again.
    await this.loading;
    await this.load();
    return find();
  }

  async carrierFor(address: string): Promise<Carrier | undefined> {
    let source: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      source = normalize(address);
    } catch {
      return undefined;
    }
    const find = () => this.matchers.find((matcher) => matcher.matches(source))?.carrier;
    await this.fresh();
    return find() ?? ((await this.fresh(missReloadMs)) ? find() : undefined);
  }

  /**
   * Reloads the list when it is older than `maxAgeMs` (by default the refresh period); a miss asks again with a
   * shorter age, so a carrier just added is found at once while unknown sources cost at most one query a second.
   * Returns whether it reloaded.
   */
  private async fresh(maxAgeMs = this.refreshMs): Promise<boolean> {
    if (Date.now() - this.loadedAt < maxAgeMs) return false;
    this.loading ??= this.load().finally(() => {
      this.loading = undefined;
    });
    await this.loading;
    return true;
  }

  private async load(): Promise<void> {
    const result = await this.db.query<Carrier>(
      'SELECT name, address, port, transport, username, password FROM carriers ORDER BY name',
    );
    const matchers: Matcher[] = [];
    for (const carrier of result.rows) {
      if (carrier.address.includes('/')) {
        const [range, bits] = ipaddr.parseCIDR(carrier.address);
        matchers.push({
          carrier,
          matches: (address) => address.kind() === range.kind() && address.match([range, bits] as never),
        });
        continue;
      }
      let resolved: string[];
      try {
        resolved = ipaddr.isValid(carrier.address)
          ? [carrier.address]
          : (await lookup(carrier.address, { all: true })).map((entry) => entry.address);
      } catch {
        resolved = [];
      }
      const addresses = resolved.map(normalize);
      matchers.push({
        carrier,
        matches: (address) => addresses.some((candidate) => candidate.toString() === address.toString()),
      });
    }
    this.matchers = matchers;
    this.loadedAt = Date.now();
  }
}
