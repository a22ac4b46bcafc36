/**
 * SDP offer/answer (RFC 3264) for audio legs, with `sdp-transform`: PCMU (0), PCMA (8) and telephone-event.
 *
 * `parseSdp` reads the first audio stream: its connection address (media level, else session level), port, codecs
 * in the offer's order (static payload types need no rtpmap), the telephone-event/8000 payload type and the
 * direction (media level, else session level, else sendrecv). It throws `SdpError` on anything it cannot use: text
 * that is not SDP, no audio stream, an audio stream that is disabled (port 0) or secured (RTP/SAVP, DTLS, which this
 * engine does not speak), no connection address. The other streams are kept (`streams`), so an answer can refuse
 * them in place.
 *
 * `answer` takes the first of PCMU and PCMA in the offer's order (RFC 3264 section 6.1: the offerer lists its
 * preference first), echoes the offer's telephone-event payload type when there is one, refuses other streams with
 * port 0, and answers the offer's direction (sendonly gets recvonly, and so on; an offer whose address is 0.0.0.0 is
 * a hold, so nothing will be sent to it). No common codec is an `SdpError` (the caller answers 488); a local address
 * that is not an IP address (a configuration mistake, not the peer's) is a RangeError.
 *
 * Later in a dialog (RFC 3264 section 8): `reoffer` is our previous description again with another direction (a
 * hold, a resume: the same address, port and codecs), and `nextVersion` gives any description of ours the o= line
 * of the previous one: the same session id, the version one greater when anything else changed, the same otherwise.
 */
import { randomInt } from 'node:crypto';
import { isIP } from 'node:net';
import sdpTransform from 'sdp-transform';
import { type Codec, codecOfName, staticPayloadType } from './g711.ts';
import type { MediaDirection, RemoteMedia } from './rtp.ts';

export class SdpError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SdpError';
  }
}

export interface OfferedCodec {
  payloadType: number;
  name: string;
  rate: number;
}

/** An m-line of the session description, as it must be echoed (refused) in an answer. */
export interface MediaStream {
  type: string;
  protocol: string;
  payloads: string;
}

export interface MediaOffer {
  address: string;
  port: number;
  codecs: OfferedCodec[];
  telephoneEventPt: number | null;
  direction: MediaDirection;
  /** Every m-line in order, and which one is the audio stream described above (absent: the audio stream alone). */
  streams?: MediaStream[];
  audioIndex?: number;
}

/** Static payload types an rtpmap may leave out (RFC 3551 table 4, audio). */
const staticCodecs: Record<number, { name: string; rate: number }> = {
  0: { name: 'PCMU', rate: 8000 },
  3: { name: 'GSM', rate: 8000 },
  4: { name: 'G723', rate: 8000 },
  8: { name: 'PCMA', rate: 8000 },
  9: { name: 'G722', rate: 8000 },
  13: { name: 'CN', rate: 8000 },
  18: { name: 'G729', rate: 8000 },
};

const directions = new Set<string>(['sendrecv', 'sendonly', 'recvonly', 'inactive']);
const maxSdpLength = 65536;

function isDirection(value: unknown): value is MediaDirection {
  return typeof value === 'string' && directions.has(value);
}

export function parseSdp(sdp: string): MediaOffer {
  if (typeof sdp !== 'string' || sdp.trim() === '') throw new SdpError('the SDP body is empty');
  if (sdp.length > maxSdpLength) throw new SdpError(`the SDP body is over ${maxSdpLength} characters`);
  if (!/^v=0\s*$/m.test(sdp.split(/\r?\n/, 1)[0] ?? '')) throw new SdpError('not SDP: it does not start with v=0');
  let session: sdpTransform.SessionDescription;
  try {
    session = sdpTransform.parse(sdp);
  } catch (error) {
    throw new SdpError(`unreadable SDP: ${(error as Error).message}`);
  }
  const media = Array.isArray(session.media) ? session.media : [];
  const audioLines = media.map((line, index) => ({ line, index })).filter(({ line }) => line.type === 'audio');
  if (audioLines.length === 0) throw new SdpError('the SDP has no audio stream (m=audio)');
  const plain = audioLines.filter(({ line }) => line.protocol === 'RTP/AVP' || line.protocol === 'RTP/AVPF');
  if (plain.length === 0) {
    const protocol = audioLines[0]?.line.protocol ?? '';
    throw new SdpError(`the audio stream uses ${protocol}; only plain RTP/AVP is supported`);
  }
  const chosen = plain.find(({ line }) => line.port !== 0);
  if (chosen === undefined) throw new SdpError('the audio stream is disabled (port 0)');
  const { line, index } = chosen;
  if (!Number.isInteger(line.port) || line.port < 1 || line.port > 65535) {
    throw new SdpError(`the audio port ${String(line.port)} is not a valid port`);
  }
  const address = line.connection?.ip ?? session.connection?.ip;
  if (typeof address !== 'string' || address === '') throw new SdpError('the SDP has no connection address (c=)');
  // "IN IP4 224.2.1.1/127" carries a TTL (and address count) after the address.
  const host = address.split('/')[0] as string;

  const payloadTypes = String(line.payloads ?? '')
    .trim()
    .split(/\s+/)
    .filter((token) => token !== '');
  if (payloadTypes.length === 0) throw new SdpError('the audio stream lists no payload types');
  const codecs: OfferedCodec[] = [];
  for (const token of payloadTypes) {
    const payloadType = Number(token);
    if (!/^\d{1,3}$/.test(token) || payloadType > 127) {
      throw new SdpError(`the audio stream has an invalid payload type ${JSON.stringify(token)}`);
    }
    const mapped = line.rtp.find((entry) => entry.payload === payloadType);
    const known = mapped === undefined ? staticCodecs[payloadType] : { name: mapped.codec, rate: mapped.rate ?? 0 };
    if (known !== undefined) codecs.push({ payloadType, ...known });
  }
  const telephoneEvent = codecs.find((codec) => codec.name.toLowerCase() === 'telephone-event' && codec.rate === 8000);
  const direction = isDirection(line.direction)
    ? line.direction
    : isDirection(session.direction)
      ? session.direction
      : 'sendrecv';
  return {
    address: host,
    port: line.port,
    codecs,
    telephoneEventPt: telephoneEvent?.payloadType ?? null,
    direction,
    streams: media.map((entry) => ({
      type: String(entry.type),
      protocol: String(entry.protocol),
      payloads: String(entry.payloads ?? ''),
    })),
    audioIndex: index,
  };
}

/** The first G.711 codec of the list, in its order. */
function firstG711(codecs: readonly OfferedCodec[]): { codec: Codec; payloadType: number } | undefined {
  for (const offered of codecs) {
    const codec = codecOfName(offered.name);
    if (codec !== undefined && offered.rate === 8000) return { codec, payloadType: offered.payloadType };
  }
  return undefined;
}

const answeredDirection: Record<MediaDirection, MediaDirection> = {
  sendrecv: 'sendrecv',
  sendonly: 'recvonly',
  recvonly: 'sendonly',
  inactive: 'inactive',
};

function holdAddress(address: string): boolean {
  return address === '0.0.0.0' || address === '::';
}

/** What the local side may do towards a remote that declared `direction` at `address`. */
function localDirection(direction: MediaDirection, address: string): MediaDirection {
  const local = answeredDirection[direction];
  if (!holdAddress(address)) return local;
  return local === 'sendrecv' ? 'recvonly' : local === 'sendonly' ? 'inactive' : local;
}

interface Local {
  address: string;
  port: number;
}

function checkLocal(local: Local): void {
  if (isIP(local.address) === 0) throw new RangeError(`the local media address ${local.address} is not an IP address`);
  if (!Number.isInteger(local.port) || local.port < 1 || local.port > 65535) {
    throw new RangeError(`the local media port ${local.port} is not a valid port`);
  }
}

function sessionDescription(local: Local, media: sdpTransform.MediaDescription[]): string {
  const ipVer = isIP(local.address) === 6 ? 6 : 4;
  return sdpTransform.write({
    version: 0,
    origin: {
      username: 'switchboard',
      sessionId: randomInt(1, 2 ** 47),
      sessionVersion: 1,
      netType: 'IN',
      ipVer,
      address: local.address,
    },
    name: 'switchboard',
    connection: { version: ipVer, ip: local.address },
    timing: { start: 0, stop: 0 },
    media,
  });
}

function audioMedia(
  port: number,
  codecs: readonly { payloadType: number; name: string }[],
  telephoneEventPt: number | null,
  direction: MediaDirection,
): sdpTransform.MediaDescription {
  const rtp = codecs.map((codec) => ({ payload: codec.payloadType, codec: codec.name, rate: 8000 }));
  const fmtp: { payload: number; config: string }[] = [];
  if (telephoneEventPt !== null) {
    rtp.push({ payload: telephoneEventPt, codec: 'telephone-event', rate: 8000 });
    fmtp.push({ payload: telephoneEventPt, config: '0-16' });
  }
  return {
    type: 'audio',
    port,
    protocol: 'RTP/AVP',
    payloads: rtp.map((entry) => entry.payload).join(' '),
    rtp,
    fmtp,
    ptime: 20,
    direction,
  };
}

/** The directions both allow: what each may send and receive, and-ed. */
function narrowed(direction: MediaDirection, limit: MediaDirection): MediaDirection {
  const sends = direction.startsWith('send') && limit.startsWith('send');
  const receives =
    (direction === 'sendrecv' || direction === 'recvonly') && (limit === 'sendrecv' || limit === 'recvonly');
  return sends ? (receives ? 'sendrecv' : 'sendonly') : receives ? 'recvonly' : 'inactive';
}

/**
 * The answer to `offer` from `local`, and the remote media it sets up. `ours` is what this side allows now (our own
 * hold: `sendonly`, `inactive`); the answer's direction is the offer's mirrored and narrowed to it (RFC 3264
 * section 6.1), while the remote media follows the offer alone (our hold is the call's media business).
 */
export function answer(
  offer: MediaOffer,
  local: Local,
  ours: MediaDirection = 'sendrecv',
): { sdp: string; remote: RemoteMedia } {
  checkLocal(local);
  const chosen = firstG711(offer.codecs);
  if (chosen === undefined) {
    const offered = offer.codecs.map((codec) => `${codec.name}/${codec.rate}`).join(', ') || 'none';
    throw new SdpError(`no common codec: the offer has ${offered}; this side speaks PCMU and PCMA`);
  }
  const direction = localDirection(offer.direction, offer.address);
  const audio = audioMedia(
    local.port,
    [{ payloadType: chosen.payloadType, name: chosen.codec }],
    offer.telephoneEventPt,
    narrowed(answeredDirection[offer.direction], ours),
  );
  const streams = offer.streams ?? [];
  const audioIndex = offer.audioIndex ?? 0;
  const media: sdpTransform.MediaDescription[] =
    streams.length === 0
      ? [audio]
      : streams.map((stream, index) =>
          index === audioIndex
            ? audio
            : // RFC 3264 section 6: a stream that is not accepted is answered in place with port 0.
              { type: stream.type, port: 0, protocol: stream.protocol, payloads: stream.payloads, rtp: [], fmtp: [] },
        );
  return {
    sdp: sessionDescription(local, media),
    remote: {
      address: offer.address,
      port: offer.port,
      codec: chosen.codec,
      payloadType: chosen.payloadType,
      telephoneEventPt: offer.telephoneEventPt,
      direction,
    },
  };
}

export const telephoneEventPayloadType = 101;

/** An offer from `local`: PCMU, PCMA and telephone-event/8000 (events 0-16, payload type 101), sendrecv. */
export function offer(local: Local): string {
  checkLocal(local);
  const codecs = (['PCMU', 'PCMA'] as const).map((name) => ({ payloadType: staticPayloadType[name], name }));
  return sessionDescription(local, [audioMedia(local.port, codecs, telephoneEventPayloadType, 'sendrecv')]);
}

/** The remote media of an answer to our offer (its first G.711 codec). */
export function remoteFromAnswer(answerOffer: MediaOffer): RemoteMedia {
  const chosen = firstG711(answerOffer.codecs);
  if (chosen === undefined) throw new SdpError('the answer has neither PCMU nor PCMA');
  return {
    address: answerOffer.address,
    port: answerOffer.port,
    codec: chosen.codec,
    payloadType: chosen.payloadType,
    telephoneEventPt: answerOffer.telephoneEventPt,
    direction: localDirection(answerOffer.direction, answerOffer.address),
  };
}

/** Our previous description `previous` offered again with the audio stream's direction set to `direction`. */
export function reoffer(previous: string, direction: MediaDirection): string {
  const session = sdpTransform.parse(previous);
  const audio = (session.media ?? []).find((line) => line.type === 'audio' && line.port !== 0);
  if (audio === undefined) throw new SdpError('our previous description has no audio stream');
  audio.direction = direction;
  delete session.direction;
  return nextVersion(previous, sdpTransform.write(session));
}

/**
 * `next` (a description of ours) with the o= line of `previous` (the last one we sent in the dialog): the same
 * session id, and the version one greater when anything else changed, the same when nothing did (RFC 3264 section
 * 8).
 */
export function nextVersion(previous: string, next: string): string {
  const before = sdpTransform.parse(previous);
  const after = sdpTransform.parse(next);
  if (before.origin === undefined) throw new SdpError('our previous description has no o= line');
  after.origin = { ...before.origin };
  if (sdpTransform.write(after) === sdpTransform.write(before)) return sdpTransform.write(before);
  after.origin.sessionVersion = before.origin.sessionVersion + 1;
  return sdpTransform.write(after);
}
