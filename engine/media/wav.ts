/**
 * WAV (RIFF WAVE) files: the 44-byte header of 16-bit mono PCM that recordings and the prompt cache write, and a
 * reader for the files prompts come in.
 *
 * The reader takes PCM (format 1, or WAVE_FORMAT_EXTENSIBLE with a PCM subformat) at 8 or 16 bits, and G.711 A-law
 * and mu-law (formats 6 and 7), at any rate from 1 kHz to 384 kHz, mono or stereo (averaged to mono). It walks the
 * chunks without trusting their sizes: a data chunk that claims more than the file holds (as a streamed WAV does,
 * espeak-ng's `--stdout` among them) is read up to the end of the file. Anything else is a `WavError` saying what
 * is wrong; it never throws anything else.
 */
import { decode as decodeG711 } from './g711.ts';

export class WavError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WavError';
  }
}

export const wavHeaderBytes = 44;

/** The header of a 16-bit mono PCM WAV file holding `dataBytes` of samples at `sampleRate`. */
export function wavHeader(dataBytes: number, sampleRate = 8000): Buffer {
  const header = Buffer.alloc(wavHeaderBytes);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + dataBytes, 4);
  header.write('WAVE', 8, 'ascii');
  header.write('fmt ', 12, 'ascii');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(sampleRate, 24);
  header.writeUInt32LE(sampleRate * 2, 28); // byte rate
  header.writeUInt16LE(2, 32); // block align
  header.writeUInt16LE(16, 34); // bits per sample
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(dataBytes, 40);
  return header;
}

/** A whole 16-bit mono WAV file of `pcm`. */
export function wavFile(pcm: Int16Array, sampleRate = 8000): Buffer {
  const data = Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);
  return Buffer.concat([wavHeader(data.length, sampleRate), littleEndian(data)]);
}

/** `data` (native 16-bit samples) in little-endian order. */
function littleEndian(data: Buffer): Buffer {
  if (new Uint8Array(Uint16Array.of(1).buffer)[0] === 1) return data;
  return Buffer.from(data).swap16();
}

export interface DecodedWav {
  sampleRate: number;
  /** Mono 16-bit samples. */
  pcm: Int16Array;
}

const formatPcm = 1;
const formatAlaw = 6;
const formatMulaw = 7;
const formatExtensible = 0xfffe;

interface Format {
  format: number;
  channels: number;
  sampleRate: number;
  bits: number;
}

function readFormat(chunk: Buffer): Format {
  if (chunk.length < 16) throw new WavError('the WAV fmt chunk is too short');
  let format = chunk.readUInt16LE(0);
  if (format === formatExtensible) {
    if (chunk.length < 40) throw new WavError('the WAV fmt chunk is too short for WAVE_FORMAT_EXTENSIBLE');
    format = chunk.readUInt16LE(24); // the first two bytes of the subformat GUID are the format code
  }
  return { format, channels: chunk.readUInt16LE(2), sampleRate: chunk.readUInt32LE(4), bits: chunk.readUInt16LE(14) };
}

function checkFormat({ format, channels, sampleRate, bits }: Format): void {
  if (format === formatPcm) {
    if (bits !== 8 && bits !== 16) throw new WavError(`${bits}-bit PCM WAV is not supported (8 or 16 bits)`);
  } else if (format === formatAlaw || format === formatMulaw) {
    if (bits !== 8) throw new WavError(`G.711 WAV with ${bits} bits per sample`);
  } else {
    throw new WavError(`WAV format ${format} is not supported (PCM, A-law or mu-law only)`);
  }
  if (channels !== 1 && channels !== 2) throw new WavError(`WAV with ${channels} channels (mono or stereo only)`);
  if (sampleRate < 1000 || sampleRate > 384000) throw new WavError(`WAV sample rate ${sampleRate} Hz is not supported`);
}

function samples(data: Buffer, { format, channels, bits }: Format): Int16Array {
  const bytesPerSample = bits / 8;
  const frames = Math.floor(data.length / (bytesPerSample * channels));
  const count = frames * channels;
  const raw = new Int16Array(count);
  if (format === formatAlaw || format === formatMulaw) {
    raw.set(decodeG711(format === formatAlaw ? 'PCMA' : 'PCMU', data.subarray(0, count)));
  } else if (bits === 8) {
    for (let index = 0; index < count; index += 1) raw[index] = ((data[index] as number) - 128) << 8;
  } else {
    for (let index = 0; index < count; index += 1) raw[index] = data.readInt16LE(index * 2);
  }
  if (channels === 1) return raw;
  const mono = new Int16Array(frames);
  for (let frame = 0; frame < frames; frame += 1) {
    mono[frame] = Math.round(((raw[2 * frame] as number) + (raw[2 * frame + 1] as number)) / 2);
  }
  return mono;
}

/** The samples of a WAV file, as mono 16-bit. Throws `WavError` when `file` is not a WAV file this can read. */
export function decodeWav(file: Buffer): DecodedWav {
  if (file.length < 12 || file.toString('ascii', 0, 4) !== 'RIFF' || file.toString('ascii', 8, 12) !== 'WAVE') {
    throw new WavError('not a WAV file (no RIFF/WAVE header)');
  }
  let format: Format | undefined;
  let offset = 12;
  while (offset + 8 <= file.length) {
    const id = file.toString('ascii', offset, offset + 4);
    const size = file.readUInt32LE(offset + 4);
    const body = offset + 8;
    const end = Math.min(file.length, body + size);
    if (id === 'fmt ') {
      format = readFormat(file.subarray(body, end));
      checkFormat(format);
    } else if (id === 'data') {
      if (format === undefined) throw new WavError('the WAV data chunk comes before its fmt chunk');
      return { sampleRate: format.sampleRate, pcm: samples(file.subarray(body, end), format) };
    }
    offset = body + size + (size % 2); // chunks are padded to an even size
  }
  throw new WavError(format === undefined ? 'the WAV file has no fmt chunk' : 'the WAV file has no data chunk');
}
