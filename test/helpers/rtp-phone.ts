/**
 * The caller's phone's media, in the test: a UDP socket that a sipp caller's SDP names as its audio address
 * (sipp does the signalling, scenario placeholder AUDIO_PORT), so the test hears what the engine sends the caller
 * and can speak and press keys itself. G.711 is decoded and encoded here, independently of the engine's codec; keys
 * are RFC 4733 events (payload type 101, what sipp's SDP offers). It answers to where the engine's RTP comes from,
 * as a phone with symmetric RTP does.
 */
import { randomInt } from 'node:crypto';
import dgram from 'node:dgram';

export interface RtpPhone {
  port: number;
  /** Everything heard, decoded, 8 kHz. */
  heard: number[];
  packets: number;
  /** Sends a tone of `frequency` (PCMU, 20 ms frames) until `quiet`. */
  speak(frequency: number): void;
  quiet(): void;
  /** Presses a key: one RFC 4733 event of 100 ms. */
  press(digit: string): Promise<void>;
  close(): void;
}

function ulawToLinear(byte: number): number {
  const u = ~byte & 0xff;
  const exponent = (u >> 4) & 0x07;
  const magnitude = (((u & 0x0f) << 3) + 0x84) << exponent;
  return u & 0x80 ? 0x84 - magnitude : magnitude - 0x84;
}

function alawToLinear(byte: number): number {
  const a = byte ^ 0x55;
  const exponent = (a >> 4) & 0x07;
  let magnitude = (a & 0x0f) << 4;
  magnitude = exponent === 0 ? magnitude + 8 : (magnitude + 0x108) << (exponent - 1);
  return a & 0x80 ? magnitude : -magnitude;
}

function linearToUlaw(sample: number): number {
  const sign = sample < 0 ? 0x80 : 0;
  const magnitude = Math.min(32635, Math.abs(sample)) + 0x84;
  let exponent = 7;
  for (let mask = 0x4000; (magnitude & mask) === 0 && exponent > 0; mask >>= 1) exponent -= 1;
  const mantissa = (magnitude >> (exponent + 3)) & 0x0f;
  return ~(sign | (exponent << 4) | mantissa) & 0xff;
}

export async function startRtpPhone(): Promise<RtpPhone> {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  let engine: { address: string; port: number } | undefined;
  const ssrc = randomInt(1, 2 ** 31);
  let sequence = randomInt(0, 65535);
  let timestamp = randomInt(0, 2 ** 31);
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
    speak(frequency) {
      phone.quiet();
      let phase = 0;
      speaking = setInterval(() => {
        const frame = Buffer.alloc(160);
        for (let index = 0; index < 160; index += 1) {
          frame[index] = linearToUlaw(Math.round(8000 * Math.sin(phase)));
          phase += (2 * Math.PI * frequency) / 8000;
        }
        phase %= 2 * Math.PI;
        send(0, frame);
        timestamp += 160;
      }, 20);
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
      socket.close();
    },
  };
  let speaking: NodeJS.Timeout | undefined;
  socket.on('message', (data, from) => {
    if (data.length < 12 || data[0] === undefined || data[0] >> 6 !== 2) return;
    engine ??= { address: from.address, port: from.port };
    const payloadType = (data[1] as number) & 0x7f;
    const headerLength = 12 + 4 * ((data[0] as number) & 0x0f);
    if (payloadType !== 0 && payloadType !== 8) return;
    phone.packets += 1;
    for (let index = headerLength; index < data.length; index += 1) {
      const byte = data[index] as number;
      phone.heard.push(payloadType === 0 ? ulawToLinear(byte) : alawToLinear(byte));
    }
  });
  return phone;
}

/** The mean absolute level of the last `samples` heard (0 before anything came). */
export function levelOf(heard: readonly number[], samples = 4000): number {
  const recent = heard.slice(-samples);
  return recent.reduce((sum, sample) => sum + Math.abs(sample), 0) / Math.max(1, recent.length);
}
