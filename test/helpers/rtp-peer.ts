/**
 * A caller's media in a test: one UDP socket that a sipp scenario names in its SDP (sipp does the signalling; it
 * cannot record what it hears). It sends a PCMU tone, paced at 20 ms without drift, to the address and port the
 * engine's SDP named, and decodes the PCMU packets that come to it. The G.711 tables are `alawmulaw`'s, not the
 * engine's: what the engine encodes is measured with another codec than its own.
 */
import dgram from 'node:dgram';
import alawmulaw from 'alawmulaw';
import { sine } from './webrtc-browser.ts';

export interface Source {
  address: string;
  port: number;
}

export class RtpPeer {
  /** Decoded samples of every PCMU packet received, in arrival order (8 kHz). */
  readonly heard: number[] = [];
  /** Where the packets received came from (`address:port`). */
  readonly sources = new Set<string>();
  private readonly listeners = new Set<() => void>();
  private sender: ReturnType<typeof setInterval> | undefined;

  private constructor(private readonly socket: dgram.Socket) {
    socket.on('message', (datagram, source) => {
      if (datagram.length < 12 || datagram[0]! >> 6 !== 2) return;
      this.sources.add(`${source.address}:${source.port}`);
      const csrcs = datagram[0]! & 0x0f;
      let offset = 12 + 4 * csrcs;
      if ((datagram[0]! & 0x10) !== 0) offset += 4 + 4 * datagram.readUInt16BE(offset + 2);
      let end = datagram.length;
      if ((datagram[0]! & 0x20) !== 0) end -= datagram[end - 1]!;
      if ((datagram[1]! & 0x7f) === 0) {
        for (let index = offset; index < end; index += 1)
          this.heard.push(alawmulaw.mulaw.decodeSample(datagram[index]!));
      }
      for (const listener of [...this.listeners]) listener();
    });
  }

  /** A socket on 127.0.0.1, on a port the system picks. */
  static async open(): Promise<RtpPeer> {
    const socket = dgram.createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    return new RtpPeer(socket);
  }

  get port(): number {
    return this.socket.address().port;
  }

  /** Resolves once a packet came from somewhere (the engine's ringback, before anything was sent to it). */
  firstPacket(): Promise<void> {
    return new Promise((resolve) => {
      if (this.sources.size > 0) return resolve();
      const listener = () => {
        this.listeners.delete(listener);
        resolve();
      };
      this.listeners.add(listener);
    });
  }

  /** The next `samples` decoded samples received after skipping `skip` of those still to come. */
  hear(skip: number, samples: number): Promise<number[]> {
    const from = this.heard.length + skip;
    return new Promise((resolve) => {
      const listener = () => {
        if (this.heard.length < from + samples) return;
        this.listeners.delete(listener);
        resolve(this.heard.slice(from, from + samples));
      };
      this.listeners.add(listener);
    });
  }

  /** Sends `frequency` (PCMU, payload type 0, 20 ms a packet) to `to` until `close`. */
  sendTone(to: Source, frequency: number): void {
    const tone = sine(frequency, 8000);
    const ssrc = Math.floor(Math.random() * 2 ** 32);
    let sent = 0;
    const started = Date.now();
    const send = () => {
      // As many 20 ms frames as are due: a late timer does not stretch the tone.
      while (sent * 20 <= Date.now() - started) {
        const header = Buffer.alloc(12);
        header[0] = 0x80;
        header[1] = sent === 0 ? 0x80 : 0x00; // PCMU; the marker on the first packet
        header.writeUInt16BE(sent & 0xffff, 2);
        header.writeUInt32BE((sent * 160) >>> 0, 4);
        header.writeUInt32BE(ssrc, 8);
        const payload = Buffer.from(Array.from(tone(160), (sample) => alawmulaw.mulaw.encodeSample(sample)));
        this.socket.send(Buffer.concat([header, payload]), to.port, to.address);
        sent += 1;
      }
    };
    send();
    this.sender = setInterval(send, 20);
  }

  close(): void {
    clearInterval(this.sender);
    this.listeners.clear();
    this.socket.close();
  }
}
