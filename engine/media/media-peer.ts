/**
 * Who a leg's RTP belongs to, and the two rules that keep its media between the call's parties (docs/calls.md,
 * Media addresses):
 *
 * - Where audio goes (`mediaAddress`): the address an SDP names only when the peer could receive there. A carrier's
 *   media stays in its networks (its signalling address, CIDR range or host's addresses, and the media networks
 *   configured for it); a desk phone's goes to the address its REGISTER and INVITE came from. An inside address of a
 *   NAT (private, CGNAT, unique local, loopback) means the peer sits behind one: its media goes to its signalling
 *   address instead, at the SDP's port until its first packet shows the real one (symmetric RTP). Multicast,
 *   broadcast, link-local and reserved addresses are refused, as is an address that is not an IP; so is the
 *   unspecified address (0.0.0.0, the old way of holding a call) in a leg's first description, where it cannot be a
 *   hold. A refusal is a `MediaAddressError` saying why; the leg that got it ends (or its re-INVITE gets 488).
 * - Where audio is taken from (`sendsMedia`): the address media goes to, and the peer's signalling address (symmetric
 *   RTP behind a NAT), on any port. A host that sprays RTP at the port range from elsewhere is never heard, so never
 *   latched onto (engine/media/rtp.ts): plain RTP legs trust the same source addresses as their signalling does.
 */
import ipaddr from 'ipaddr.js';
import { SdpError } from './sdp.ts';

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** A carrier: its media may be at any address of its networks (CIDR ranges or single addresses). */
export interface CarrierPeer {
  kind: 'carrier';
  /** In refusals: `carrier acme`. */
  name: string;
  /** Where the leg's SIP comes from, or goes to (a NAT's outside address). */
  signalling: string;
  networks: readonly string[];
}

/** A registered desk phone: its media is at its signalling address, whatever its description says. */
export interface PhonePeer {
  kind: 'phone';
  name: string;
  signalling: string;
}

export type MediaPeer = CarrierPeer | PhonePeer;

export class MediaAddressError extends SdpError {
  constructor(message: string) {
    super(message);
    this.name = 'MediaAddressError';
  }
}

/** An address as one form (IPv4-mapped IPv6 as IPv4); undefined when it is not an IP address. */
function parsed(address: string): Address | undefined {
  return ipaddr.isValid(address) ? ipaddr.process(address) : undefined;
}

/** Address ranges a peer's media is at only when they are its own (its signalling address, its networks). */
const refusedRanges = new Set(['linkLocal', 'reserved']);
/** The inside of a NAT, or this host: the peer's media really comes from its signalling address. */
const insideRanges = new Set(['private', 'carrierGradeNat', 'uniqueLocal', 'loopback']);

function inNetwork(address: Address, network: string): boolean {
  try {
    if (network.includes('/')) {
      const [range, bits] = ipaddr.parseCIDR(network);
      return address.kind() === range.kind() && address.match([range, bits] as never);
    }
    return same(address, network);
  } catch {
    return false;
  }
}

function same(address: Address, other: string): boolean {
  const candidate = parsed(other);
  return candidate !== undefined && candidate.toNormalizedString() === address.toNormalizedString();
}

/**
 * Where audio to `peer` goes when its description names `sdpAddress` (see the file's comment). `first`: the leg's
 * first description (an offer or answer that sets it up), where the unspecified address is refused; later, it is a
 * hold and is kept (nothing is sent to it). Throws `MediaAddressError`.
 */
export function mediaAddress(peer: MediaPeer, sdpAddress: string, first: boolean): string {
  const address = parsed(sdpAddress);
  if (address === undefined) {
    throw new MediaAddressError(`the media address ${JSON.stringify(sdpAddress)} is not an IP address`);
  }
  const range = address.range();
  if (range === 'unspecified') {
    if (first) throw new MediaAddressError(`the media address ${sdpAddress} is unspecified: there is nowhere to send`);
    return address.toString();
  }
  if (range === 'multicast' || range === 'broadcast') {
    throw new MediaAddressError(`the media address ${sdpAddress} is ${range}, not one host's`);
  }
  const networks = peer.kind === 'carrier' ? peer.networks : [];
  if (same(address, peer.signalling) || networks.some((network) => inNetwork(address, network))) {
    return address.toString();
  }
  if (refusedRanges.has(range)) {
    throw new MediaAddressError(`the media address ${sdpAddress} is ${range}, not one a peer receives at`);
  }
  const signalling = parsed(peer.signalling);
  if (signalling === undefined) {
    throw new MediaAddressError(`${peer.name} signals from ${peer.signalling}, which is not an IP address`);
  }
  // A NAT's inside address (or any address, for a desk phone): the packets really come from the signalling address.
  if (insideRanges.has(range) || peer.kind === 'phone') return signalling.toString();
  throw new MediaAddressError(
    `the media address ${sdpAddress} is outside ${peer.name}'s networks (give them as its media networks)`,
  );
}

/** Whether a datagram from `source` may be `peer`'s media, which goes to `target` (from `mediaAddress`). */
export function sendsMedia(peer: MediaPeer, target: string, source: string): boolean {
  const address = parsed(source);
  return address !== undefined && (same(address, target) || same(address, peer.signalling));
}
