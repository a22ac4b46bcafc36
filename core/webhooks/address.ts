/**
 * Which IP addresses a webhook may reach (docs/events.md, SSRF). One classification, used both when an endpoint's
 * URL is an IP literal (core/webhooks/url.ts) and for every address its host resolves to at delivery time.
 *
 * Public means globally routable unicast, as classified by ipaddr.js: loopback, private (RFC 1918), link-local
 * (169.254/16, where cloud metadata services live, and fe80::/10), carrier-grade NAT (100.64/10), multicast,
 * broadcast, unspecified, reserved and documentation ranges, IPv6 unique-local (fc00::/7) and the other special
 * ranges are not. IPv6 forms that carry an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated, NAT64
 * `64:ff9b::/96`, 6to4 `2002::/16`) are judged by the IPv4 address they lead to.
 */
import ipaddr from 'ipaddr.js';

/** IPv6 ranges whose packets reach the IPv4 address held in the low 32 bits. */
const lowIpv4Ranges = new Set<string>(['ipv4Mapped', 'rfc6145']);

function ipv4FromBytes(bytes: number[]): ipaddr.IPv4 {
  return new ipaddr.IPv4(bytes);
}

function isPublicIpv4(address: ipaddr.IPv4): boolean {
  return address.range() === 'unicast';
}

/** True when `ip` (an IPv4 or IPv6 address, without brackets) is a public unicast address; false for anything else. */
export function isPublicAddress(ip: string): boolean {
  if (!ipaddr.isValid(ip)) return false;
  const address = ipaddr.parse(ip);
  if (address.kind() === 'ipv4') return isPublicIpv4(address as ipaddr.IPv4);
  const ipv6 = address as ipaddr.IPv6;
  const range = ipv6.range();
  const bytes = ipv6.toByteArray();
  if (lowIpv4Ranges.has(range)) return isPublicIpv4(ipv4FromBytes(bytes.slice(12, 16)));
  if (range === 'rfc6052') {
    // The well-known NAT64 prefix 64:ff9b::/96 carries the IPv4 address in its low 32 bits; the local-use prefix
    // 64:ff9b:1::/48 (RFC 8215) leads wherever a local translator says, so it is never public.
    const wellKnown = bytes.slice(4, 12).every((byte) => byte === 0);
    return wellKnown && isPublicIpv4(ipv4FromBytes(bytes.slice(12, 16)));
  }
  // 6to4: 2002:AABB:CCDD::/48 carries the IPv4 address AA.BB.CC.DD.
  if (range === '6to4') return isPublicIpv4(ipv4FromBytes(bytes.slice(2, 6)));
  // Only 2000::/3 is allocated as global unicast; this also refuses the deprecated IPv4-compatible ::a.b.c.d.
  return range === 'unicast' && ipv6.match(globalUnicast);
}

const globalUnicast = ipaddr.parseCIDR('2000::/3') as [ipaddr.IPv6, number];

const rangeWords: Record<string, string> = {
  loopback: 'a loopback',
  private: 'a private',
  linkLocal: 'a link-local',
  carrierGradeNat: 'a carrier-grade NAT',
  multicast: 'a multicast',
  unspecified: 'an unspecified',
  broadcast: 'a broadcast',
  reserved: 'a reserved',
  uniqueLocal: 'a unique-local',
};

/**
 * What kind of address `ip` is, for messages such as "webhook.example resolves to 10.0.0.5, a private address":
 * "a public address", "a loopback address", "a private address", ... or "a non-public address" for the rarer ranges.
 * IPv6 forms that lead to an IPv4 address are described by that IPv4 address.
 */
export function describeAddress(ip: string): string {
  if (isPublicAddress(ip)) return 'a public address';
  if (!ipaddr.isValid(ip)) return 'not an IP address';
  let address = ipaddr.parse(ip);
  if (address.kind() === 'ipv6' && lowIpv4Ranges.has(address.range())) {
    address = ipv4FromBytes((address as ipaddr.IPv6).toByteArray().slice(12, 16));
  }
  return `${rangeWords[address.range()] ?? 'a non-public'} address`;
}

/**
 * Why a host's resolved addresses may not be connected to (`refused: ...`), or undefined when every one is public:
 * the SSRF rule of webhook attempts and prompt downloads alike.
 */
export function refusedAddresses(host: string, addresses: readonly { address: string }[]): string | undefined {
  const refused = addresses.find((address) => !isPublicAddress(address.address));
  if (refused === undefined) return undefined;
  const subject = host === refused.address ? `${host} is` : `${host} resolves to ${refused.address},`;
  return `refused: ${subject} ${describeAddress(refused.address)}`;
}
