/**
 * The engine's view of the carriers (core/carriers/carriers.ts holds the table): an INVITE is taken only from an
 * address a carrier names (its address, a CIDR range, or a host name resolved when the list is loaded); any other
 * source gets 403. The list is cached per engine and reloaded every few seconds, so a carrier added by the admin
 * command is taken without a restart. A carrier's call media stays in its networks (`mediaPeer`): those addresses
 * and its configured media networks.
 */
import { lookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import { type Carrier, listCarriers } from '../../core/carriers/carriers.ts';
import type { Queryable } from '../../core/database.ts';
import type { CarrierPeer } from '../media/media-peer.ts';
import { assertNotHoldingConnection } from '../../core/held-connections.ts';

/** A lookup that misses reloads the list when it is older than this. */
const missReloadMs = 1_000;

interface Matcher {
  carrier: Carrier;
  matches(address: ipaddr.IPv4 | ipaddr.IPv6): boolean;
  /** Its address as networks: the CIDR range, the IP address, or the host's addresses when the list was read. */
  networks: string[];
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

  /**
   * The peer of a call leg with `carrier` whose SIP comes from (or goes to) `signalling`: its media may be at its
   * addresses and in its media networks.
   */
  mediaPeer(carrier: Carrier, signalling: string): CarrierPeer {
    const known = this.matchers.find((matcher) => matcher.carrier.name === carrier.name);
    return {
      kind: 'carrier',
      name: `carrier ${carrier.name}`,
      signalling,
      networks: [...(known?.networks ?? [carrier.address]), ...carrier.media_networks],
    };
  }

  /**
   * Where a dial-out through `carrier` signals to: its address, or the first of its host's addresses (undefined when
   * the host resolved to none, or for a CIDR range, which cannot be dialled).
   */
  signallingAddress(carrier: Carrier): string | undefined {
    if (carrier.address.includes('/')) return undefined;
    if (ipaddr.isValid(carrier.address)) return carrier.address;
    return this.matchers.find((matcher) => matcher.carrier.name === carrier.name)?.networks[0];
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
    assertNotHoldingConnection("a lookup of the carriers' hosts");
    const matchers: Matcher[] = [];
    for (const carrier of await listCarriers(this.db)) {
      if (carrier.address.includes('/')) {
        const [range, bits] = ipaddr.parseCIDR(carrier.address);
        matchers.push({
          carrier,
          matches: (address) => address.kind() === range.kind() && address.match([range, bits] as never),
          networks: [carrier.address],
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
        networks: addresses.map((address) => address.toString()),
      });
    }
    this.matchers = matchers;
    this.loadedAt = Date.now();
  }
}
