/**
 * G.711 (PCMU and PCMA, RFC 3551 payload types 0 and 8) between 16-bit linear PCM and RTP payloads, with the
 * `alawmulaw` codecs. Both directions go through lookup tables built once from `alawmulaw`'s per-sample functions
 * (256 entries to decode, 65,536 to encode), so a 20 ms frame costs 160 array reads.
 *
 * `alawmulaw` is a UMD bundle: under Node's ESM loader only its default export (the CommonJS `module.exports`) is
 * there, so it is imported whole rather than by name.
 */
import alawmulaw from 'alawmulaw';

export type Codec = 'PCMU' | 'PCMA';

/** The static RTP payload type of each codec (RFC 3551). */
export const staticPayloadType: Readonly<Record<Codec, number>> = { PCMU: 0, PCMA: 8 };

/** The codec a static payload type stands for, or undefined. */
export function codecOfStaticPayloadType(payloadType: number): Codec | undefined {
  if (payloadType === 0) return 'PCMU';
  if (payloadType === 8) return 'PCMA';
  return undefined;
}

/** The codec an SDP rtpmap encoding name stands for (case-insensitive), or undefined. */
export function codecOfName(name: string): Codec | undefined {
  const upper = name.toUpperCase();
  return upper === 'PCMU' || upper === 'PCMA' ? upper : undefined;
}

interface Tables {
  decode: Int16Array;
  encode: Uint8Array;
}

function tables(codec: { decodeSample(sample: number): number; encodeSample(sample: number): number }): Tables {
  const decode = new Int16Array(256);
  for (let byte = 0; byte < 256; byte += 1) decode[byte] = codec.decodeSample(byte);
  const encode = new Uint8Array(65536);
  for (let sample = -32768; sample < 32768; sample += 1) encode[sample & 0xffff] = codec.encodeSample(sample);
  return { decode, encode };
}

const codecTables: Record<Codec, Tables> = {
  PCMU: tables(alawmulaw.mulaw),
  PCMA: tables(alawmulaw.alaw),
};

/** Encodes linear samples into one G.711 byte each. */
export function encode(codec: Codec, pcm: Int16Array): Uint8Array {
  const table = codecTables[codec].encode;
  const out = new Uint8Array(pcm.length);
  for (let index = 0; index < pcm.length; index += 1) out[index] = table[(pcm[index] as number) & 0xffff] as number;
  return out;
}

/** Decodes G.711 bytes into linear samples. */
export function decode(codec: Codec, payload: Uint8Array): Int16Array {
  const table = codecTables[codec].decode;
  const out = new Int16Array(payload.length);
  for (let index = 0; index < payload.length; index += 1) out[index] = table[payload[index] as number] as number;
  return out;
}
