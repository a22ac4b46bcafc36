/**
 * The RTP fixed header (RFC 3550 section 5.1): parsing an incoming datagram without trusting any of its lengths, and
 * building an outgoing one (no CSRCs, no extension, no padding).
 *
 * `parseRtp` never throws: anything that is not a well-formed version 2 RTP packet is `null`, for the caller to
 * count as malformed. RTCP sent to the RTP port (payload types 72-76 once the marker bit is folded in, that is RTCP
 * packet types 200-204) is recognised by `isRtcp` so it can be ignored rather than counted as garbage.
 */

export interface RtpPacket {
  marker: boolean;
  payloadType: number;
  sequence: number;
  timestamp: number;
  ssrc: number;
  /** The payload, without padding; a view into the datagram. */
  payload: Uint8Array;
}

export const rtpHeaderBytes = 12;

/** True for a datagram that looks like RTCP (version 2, packet type 200-204) rather than RTP. */
export function isRtcp(datagram: Uint8Array): boolean {
  if (datagram.length < 8) return false;
  const first = datagram[0] as number;
  const type = datagram[1] as number;
  return first >> 6 === 2 && type >= 200 && type <= 204;
}

/** The packet in `datagram`, or null when it is not a well-formed RTP version 2 packet. */
export function parseRtp(datagram: Uint8Array): RtpPacket | null {
  if (datagram.length < rtpHeaderBytes) return null;
  const view = new DataView(datagram.buffer, datagram.byteOffset, datagram.byteLength);
  const first = view.getUint8(0);
  if (first >> 6 !== 2) return null;
  const padding = (first & 0x20) !== 0;
  const extension = (first & 0x10) !== 0;
  const csrcCount = first & 0x0f;
  const second = view.getUint8(1);
  let offset = rtpHeaderBytes + 4 * csrcCount;
  if (extension) {
    if (datagram.length < offset + 4) return null;
    offset += 4 + 4 * view.getUint16(offset + 2);
  }
  let end = datagram.length;
  if (padding) {
    const count = view.getUint8(end - 1);
    if (count === 0) return null;
    end -= count;
  }
  if (offset > end) return null;
  return {
    marker: (second & 0x80) !== 0,
    payloadType: second & 0x7f,
    sequence: view.getUint16(2),
    timestamp: view.getUint32(4),
    ssrc: view.getUint32(8),
    payload: datagram.subarray(offset, end),
  };
}

/** A datagram carrying `payload` with the given header fields (numbers are wrapped to their field sizes). */
export function buildRtp(header: Omit<RtpPacket, 'payload'>, payload: Uint8Array): Buffer {
  const datagram = Buffer.alloc(rtpHeaderBytes + payload.length);
  datagram[0] = 0x80;
  datagram[1] = (header.marker ? 0x80 : 0) | (header.payloadType & 0x7f);
  datagram.writeUInt16BE(header.sequence & 0xffff, 2);
  datagram.writeUInt32BE(header.timestamp >>> 0, 4);
  datagram.writeUInt32BE(header.ssrc >>> 0, 8);
  datagram.set(payload, rtpHeaderBytes);
  return datagram;
}
