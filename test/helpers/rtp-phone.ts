/**
 * The caller's phone's media, in the test: a UDP socket that a sipp caller's SDP names as its audio address (sipp
 * does the signalling; it cannot record what it hears), so the test hears what the engine sends the caller and can
 * speak and press keys itself. G.711 is decoded and encoded with `alawmulaw`'s tables, not the engine's: what the
 * engine encodes is measured with another codec than its own. Keys are RFC 4733 events (payload type 101, what
 * sipp's SDP offers). It speaks to the address it is given (the engine's SDP's), else to where the engine's RTP comes
 * from, as a phone with symmetric RTP does.
 */
import { randomInt } from 'node:crypto';
import dgram from 'node:dgram';
import alawmulaw from 'alawmulaw';
import { sine } from './webrtc-browser.ts';

export interface Source {
  address: string;
  port: number;
}

export interface RtpPhone {
  port: number;
  /** Everything heard (PCMU and PCMA packets), decoded, 8 kHz, in arrival order. */
  heard: number[];
  packets: number;
  /** Samples of tone sent so far (`speak`), in all. */
  spoken: number;
  /** Where the packets received came from (`address:port`). */
  sources: Set<string>;
  /** Resolves once a packet came from somewhere (the engine's ringback, before anything was sent to it). */
  firstPacket(): Promise<void>;
  /** The next `samples` decoded samples received after skipping `skip` of those still to come. */
  hear(skip: number, samples: number): Promise<number[]>;
  /** Sends a tone of `frequency` (PCMU, 20 ms frames, paced without drift) to `to`, or the engine, until `quiet`. */
  speak(frequency: number, to?: Source): void;
  quiet(): void;
  /** Presses a key: one RFC 4733 event of 100 ms. */
  press(digit: string): Promise<void>;
  close(): void;
}

export async function startRtpPhone(): Promise<RtpPhone> {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  let engine: Source | undefined;
  const listeners = new Set<() => void>();
  const ssrc = randomInt(1, 2 ** 31);
  let sequence = randomInt(0, 65535);
  let timestamp = randomInt(0, 2 ** 31);
  let speaking: NodeJS.Timeout | undefined;
  const send = (payloadType: number, payload: Buffer, marker = false, at = timestamp) => {
    if (engine === undefined) return;
    const header = Buffer.alloc(12);
    header[0] = 0x80;
    header[1] = (marker ? 0x80 : 0) | payloadType;
    header.writeUInt16BE(sequence, 2);
    header.writeUInt32BE(at >>> 0, 4);
    header.writeUInt32BE(ssrc, 8);
    sequence = (sequence + 1) & 0xffff;
    socket.send(Buffer.concat([header, payload]), engine.port, engine.address);
  };
  const phone: RtpPhone = {
    port: socket.address().port,
    heard: [],
    packets: 0,
    spoken: 0,
    sources: new Set(),
    firstPacket() {
      return new Promise((resolve) => {
        if (phone.sources.size > 0) return resolve();
        const listener = () => {
          listeners.delete(listener);
          resolve();
        };
        listeners.add(listener);
      });
    },
    hear(skip, samples) {
      const from = phone.heard.length + skip;
      return new Promise((resolve) => {
        const listener = () => {
          if (phone.heard.length < from + samples) return;
          listeners.delete(listener);
          resolve(phone.heard.slice(from, from + samples));
        };
        listeners.add(listener);
      });
    },
    speak(frequency, to) {
      phone.quiet();
      if (to !== undefined) engine = to;
      const tone = sine(frequency, 8000);
      const started = Date.now();
      let sent = 0;
      const frames = () => {
        // As many 20 ms frames as are due: a late timer does not stretch the tone.
        for (; sent * 20 <= Date.now() - started; sent += 1) {
          send(0, Buffer.from(Array.from(tone(160), (sample) => alawmulaw.mulaw.encodeSample(sample))), sent === 0);
          timestamp += 160;
          phone.spoken += 160;
        }
      };
      frames();
      speaking = setInterval(frames, 20);
    },
    quiet() {
      clearInterval(speaking);
      speaking = undefined;
    },
    async press(digit) {
      const event = '0123456789*#'.indexOf(digit);
      if (event < 0) throw new RangeError(`not a key: ${digit}`);
      const at = timestamp;
      for (let packet = 1; packet <= 8; packet += 1) {
        const end = packet >= 6;
        const payload = Buffer.from([event, (end ? 0x80 : 0) | 10, 0, 0]);
        payload.writeUInt16BE(Math.min(5, packet) * 160, 2);
        send(101, payload, packet === 1, at);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      timestamp += 800;
    },
    close() {
      phone.quiet();
      listeners.clear();
      socket.close();
    },
  };
  socket.on('message', (data, from) => {
    if (data.length < 12 || data[0]! >> 6 !== 2) return;
    engine ??= { address: from.address, port: from.port };
    phone.sources.add(`${from.address}:${from.port}`);
    const payloadType = data[1]! & 0x7f;
    let offset = 12 + 4 * (data[0]! & 0x0f);
    if ((data[0]! & 0x10) !== 0) offset += 4 + 4 * data.readUInt16BE(offset + 2);
    let end = data.length;
    if ((data[0]! & 0x20) !== 0) end -= data[end - 1]!;
    if (payloadType === 0 || payloadType === 8) {
      phone.packets += 1;
      const decode = payloadType === 0 ? alawmulaw.mulaw.decodeSample : alawmulaw.alaw.decodeSample;
      for (let index = offset; index < end; index += 1) phone.heard.push(decode(data[index]!));
    }
    for (const listener of [...listeners]) listener();
  });
  return phone;
}

/** The mean absolute level of the last `samples` heard (0 before anything came). */
export function levelOf(heard: readonly number[], samples = 4000): number {
  const recent = heard.slice(-samples);
  return recent.reduce((sum, sample) => sum + Math.abs(sample), 0) / Math.max(1, recent.length);
}
