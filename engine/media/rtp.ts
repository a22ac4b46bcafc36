/**
 * An RTP endpoint for one call leg: a UDP socket from the `PortPool`, G.711 audio in and out, RFC 4733 DTMF in and
 * out, and prompt playback paced at 20 ms.
 *
 * Whose media. The endpoint belongs to one peer (a carrier, a desk phone: `MediaPeer`, engine/media/media-peer.ts):
 * each `setRemote` puts the SDP's address through the peer's rules (`mediaAddress`: a NAT's inside address becomes
 * the signalling address, an address the peer could not receive at is refused with a `MediaAddressError` and
 * changes nothing), and only datagrams from the peer's media or signalling address are ever taken (`sendsMedia`).
 *
 * Receiving. Nothing is accepted before `setRemote`. Then, by default, the endpoint latches (symmetric RTP, as
 * behind NAT the packets seldom come from the port in the SDP): the first well-formed RTP packet from the peer fixes
 * the source; later packets from anywhere else are ignored, and outgoing packets go to the latched source rather than
 * the SDP address. Each `setRemote` (a re-INVITE, hold, resume) forgets the latch. With `{ latch: false }` only
 * packets from exactly the SDP address and port are accepted and sending always goes there.
 * Audio comes out decoded, frame by frame as it arrives (no jitter buffer): the payload type of the remote's codec
 * and the static types 0 (PCMU) and 8 (PCMA) are decoded, telephone-event packets become one `onDtmf` call per event,
 * RTCP and other payload types (comfort noise, ...) are ignored. A datagram that is not well-formed RTP, or a
 * telephone-event payload too short to be one, is counted in `stats.malformed`; nothing received ever throws.
 * Every datagram counts once: `packetsIn` (used), `ignored` or `malformed`.
 *
 * Sending. One SSRC, sequence number and timestamp per endpoint, starting at random values (RFC 3550) and kept
 * across `setRemote` calls. The timestamp advances by the samples sent; after a pause of more than 200 ms it jumps
 * by the time that passed and the next packet carries the marker bit (a new talkspurt, RFC 3551). Nothing is sent
 * while the negotiated direction does not allow it (`recvonly`, `inactive`) or the remote address is unspecified
 * (`0.0.0.0`, the old way of holding a call). While an RFC 4733 event is being sent, audio frames are dropped (the
 * event replaces the audio, section 2.5.1.1 of the RFC); events queue one after the other. A remote that did not
 * offer telephone-event gets the digit as an in-band tone instead.
 *
 * `play` replaces a `play` in progress (which resolves 'aborted'); frames given to `send` during a `play` go out as
 * well, so one or the other should feed a leg at a time.
 */
import { randomBytes } from 'node:crypto';
import type dgram from 'node:dgram';
import ipaddr from 'ipaddr.js';
import { type Codec, codecOfStaticPayloadType, decode, encode } from './g711.ts';
import {
  buildTelephoneEvent,
  DtmfDetector,
  dtmfTone,
  eventOfDigit,
  eventPackets,
  parseTelephoneEvent,
} from './dtmf.ts';
import { emit, errorReporter } from './listeners.ts';
import { type MediaPeer, mediaAddress, sendsMedia } from './media-peer.ts';
import { buildRtp, isRtcp, parseRtp } from './packet.ts';
import { frameAt, frameCount, frameMs, frameSamples, pace, wait } from './player.ts';
import type { PortPool } from './ports.ts';
import { LossCounter } from './sequence.ts';

export type { Codec } from './g711.ts';
export { PortPool, PortPoolExhaustedError } from './ports.ts';

export type MediaDirection = 'sendrecv' | 'sendonly' | 'recvonly' | 'inactive';

export interface RemoteMedia {
  address: string;
  port: number;
  codec: Codec;
  /** The payload type the remote uses for `codec`. */
  payloadType: number;
  telephoneEventPt: number | null;
  /**
   * What this endpoint may do as negotiated (the local side's direction): 'sendrecv' (the default), 'sendonly'
   * (incoming media is ignored), 'recvonly' (nothing is sent, e.g. the remote put the call on hold), 'inactive'.
   */
  direction?: MediaDirection;
}

export interface EndpointOptions {
  /** Whose media this is: where it may go and come from. */
  peer: MediaPeer;
  /** Symmetric RTP latching (see the top of this file); default true. */
  latch?: boolean;
  /** Errors that would otherwise be lost: a listener that threw, a socket error. Default: a process warning. */
  onError?: (error: unknown) => void;
}

export interface MediaStats {
  /** Datagrams received and used (audio or DTMF). */
  packetsIn: number;
  packetsOut: number;
  /** Packets lost, from the gaps in the remote's sequence numbers. */
  lost: number;
  /** Datagrams that were not well-formed RTP (or carried a broken telephone-event payload). */
  malformed: number;
  /** Datagrams before `setRemote`, from another of the peer's sources than the latched one, RTCP, unknown types. */
  ignored: number;
  /** Datagrams from an address that is not the peer's (someone spraying the port range): never read. */
  foreign: number;
  /** Sends that the socket refused. */
  sendErrors: number;
}

const pauseMs = 200;
const minDtmfMs = 40;
const maxDtmfMs = 5000;

interface Address {
  address: string;
  port: number;
}

function normalized(address: string): string {
  return ipaddr.isValid(address) ? ipaddr.process(address).toNormalizedString() : address.toLowerCase();
}

function unspecified(address: string): boolean {
  return ipaddr.isValid(address) && ipaddr.process(address).range() === 'unspecified';
}

function checkRemote(remote: RemoteMedia): void {
  const payloadType = (value: number | null) =>
    value === null || (Number.isInteger(value) && value >= 0 && value < 128);
  if (typeof remote.address !== 'string' || remote.address === '') throw new TypeError('remote media: no address');
  if (!Number.isInteger(remote.port) || remote.port < 0 || remote.port > 65535) {
    throw new TypeError(`remote media: invalid port ${remote.port}`);
  }
  if (remote.codec !== 'PCMU' && remote.codec !== 'PCMA') {
    throw new TypeError(`remote media: unsupported codec ${String(remote.codec)}`);
  }
  if (!payloadType(remote.payloadType) || !payloadType(remote.telephoneEventPt)) {
    throw new TypeError('remote media: payload types must be integers 0-127');
  }
}

export class RtpEndpoint {
  readonly localPort: number;
  private remote: RemoteMedia | null = null;
  private latched: Address | null = null;
  private readonly latchEnabled: boolean;
  private readonly peer: MediaPeer;
  private readonly report: (error: unknown) => void;
  private readonly audioListeners = new Set<(frame: Int16Array) => void>();
  private readonly dtmfListeners = new Set<(digit: string) => void>();
  private readonly detector = new DtmfDetector();
  private readonly loss = new LossCounter();
  private readonly counts = { packetsIn: 0, packetsOut: 0, malformed: 0, ignored: 0, foreign: 0, sendErrors: 0 };
  private readonly ssrc: number;
  private sequence: number;
  /** The timestamp of the next packet of audio. */
  private timestamp: number;
  private lastSentAt: number | undefined;
  private lastSentSamples = 0;
  private marker = true;
  private eventInProgress = false;
  private dtmfQueue: Promise<void> = Promise.resolve();
  private playing: AbortController | null = null;
  private readonly closing = new AbortController();
  private sendErrorReported = false;

  private constructor(
    private readonly pool: PortPool,
    private readonly socket: dgram.Socket,
    options: EndpointOptions,
  ) {
    this.localPort = socket.address().port;
    this.latchEnabled = options.latch ?? true;
    this.peer = options.peer;
    this.report = errorReporter(options.onError);
    const random = randomBytes(10);
    this.ssrc = random.readUInt32BE(0);
    this.sequence = random.readUInt16BE(4);
    this.timestamp = random.readUInt32BE(6);
    socket.on('message', (datagram, source) => this.receive(datagram, source));
    socket.on('error', (error) => this.report(error));
  }

  /** An endpoint on a port of `pool`, bound on `host`. */
  static async open(pool: PortPool, host: string, options: EndpointOptions): Promise<RtpEndpoint> {
    return new RtpEndpoint(pool, await pool.allocate(host), options);
  }

  get closed(): boolean {
    return this.closing.signal.aborted;
  }

  get stats(): MediaStats {
    return { ...this.counts, lost: this.loss.lost };
  }

  /** Where packets go now: the latched source, else the remote's SDP address; null before `setRemote`. */
  get target(): Address | null {
    if (this.latched !== null) return { ...this.latched };
    return this.remote === null ? null : { address: this.remote.address, port: this.remote.port };
  }

  /**
   * Sets (or changes, on a re-INVITE) the remote media, its address put through the peer's rules; forgets the latched
   * source. Throws on invalid values (a `MediaAddressError` for an address the peer could not receive at), changing
   * nothing.
   */
  setRemote(remote: RemoteMedia): void {
    checkRemote(remote);
    const address = mediaAddress(this.peer, remote.address, this.remote === null);
    this.remote = { ...remote, address };
    this.latched = null;
    this.sendErrorReported = false;
  }

  onAudio(listener: (frame: Int16Array) => void): () => void {
    this.audioListeners.add(listener);
    return () => this.audioListeners.delete(listener);
  }

  onDtmf(listener: (digit: string) => void): () => void {
    this.dtmfListeners.add(listener);
    return () => this.dtmfListeners.delete(listener);
  }

  /** Sends one frame of 8 kHz audio now, in the remote's codec (dropped when sending is not possible). */
  send(frame: Int16Array): void {
    if (frame.length === 0 || this.eventInProgress) return;
    const remote = this.sendable();
    if (remote === null) return;
    const marker = this.startPacket();
    this.transmit(remote.payloadType, encode(remote.codec, frame), this.timestamp, marker);
    this.endPacket(frame.length);
  }

  /** Plays `pcm` (8 kHz) in 20 ms frames on a drift-free schedule; 'aborted' on `signal`, a newer `play` or close. */
  async play(pcm: Int16Array, signal?: AbortSignal): Promise<'done' | 'aborted'> {
    if (this.closed || signal?.aborted) return 'aborted';
    this.playing?.abort();
    const controller = new AbortController();
    this.playing = controller;
    const stop = () => controller.abort();
    signal?.addEventListener('abort', stop, { once: true });
    try {
      return await pace(frameCount(pcm), (index) => this.send(frameAt(pcm, index)), controller.signal);
    } finally {
      signal?.removeEventListener('abort', stop);
      if (this.playing === controller) this.playing = null;
    }
  }

  /**
   * Sends `digit` (0-9, *, #, A-D) as one RFC 4733 event of `durationMs` (40-5000, default 100), after any events
   * still being sent; resolves when its end packets are out (at once when sending is not possible). A remote without
   * telephone-event gets the in-band tone. Rejects with a RangeError for anything that is not a DTMF digit.
   */
  sendDtmf(digit: string, durationMs = 100): Promise<void> {
    const code = eventOfDigit(digit);
    if (code === undefined) return Promise.reject(new RangeError(`not a DTMF digit: ${JSON.stringify(digit)}`));
    const duration = Math.min(maxDtmfMs, Math.max(minDtmfMs, Number.isFinite(durationMs) ? durationMs : 100));
    const run = this.dtmfQueue.then(() => this.sendEvent(code, digit, duration));
    this.dtmfQueue = run.catch(() => {});
    return run;
  }

  /** Stops everything and gives the port back; a `play` in progress resolves 'aborted'. Calling it again is fine. */
  close(): void {
    if (this.closed) return;
    this.closing.abort();
    this.playing?.abort();
    this.audioListeners.clear();
    this.dtmfListeners.clear();
    this.pool.release(this.socket);
  }

  private async sendEvent(code: number, digit: string, durationMs: number): Promise<void> {
    const remote = this.sendable();
    if (remote === null) return;
    if (remote.telephoneEventPt === null) {
      const tone = dtmfTone(digit, durationMs);
      await pace(frameCount(tone), (index) => this.send(frameAt(tone, index)), this.closing.signal);
      return;
    }
    const payloadType = remote.telephoneEventPt;
    this.startPacket();
    const eventTimestamp = this.timestamp;
    this.eventInProgress = true;
    try {
      const start = performance.now();
      for (const packet of eventPackets(code, durationMs, frameMs)) {
        if (!(await wait(start + packet.atMs - performance.now(), this.closing.signal))) return;
        this.transmit(payloadType, buildTelephoneEvent(packet.event), eventTimestamp, packet.marker);
      }
      // The event's last 20 ms, before audio (or the next event) may follow.
      await wait(frameMs, this.closing.signal);
    } finally {
      this.eventInProgress = false;
      this.timestamp = (eventTimestamp + Math.round(durationMs * 8)) >>> 0;
      this.lastSentAt = performance.now();
      this.lastSentSamples = frameSamples;
    }
  }

  /** The remote when sending is possible now. */
  private sendable(): RemoteMedia | null {
    const remote = this.remote;
    if (this.closed || remote === null || remote.port === 0 || unspecified(remote.address)) return null;
    const direction = remote.direction ?? 'sendrecv';
    return direction === 'sendrecv' || direction === 'sendonly' ? remote : null;
  }

  /** Before a packet: moves the timestamp over a pause; whether the packet gets the marker bit. */
  private startPacket(): boolean {
    const now = performance.now();
    if (this.lastSentAt !== undefined) {
      const elapsed = Math.round((now - this.lastSentAt) * 8);
      if (elapsed - this.lastSentSamples > pauseMs * 8) {
        this.timestamp = (this.timestamp + elapsed - this.lastSentSamples) >>> 0;
        this.marker = true;
      }
    }
    const marker = this.marker;
    this.marker = false;
    return marker;
  }

  private endPacket(samples: number): void {
    this.timestamp = (this.timestamp + samples) >>> 0;
    this.lastSentAt = performance.now();
    this.lastSentSamples = samples;
  }

  private transmit(payloadType: number, payload: Uint8Array, timestamp: number, marker: boolean): void {
    const target = this.target;
    if (target === null || this.closed) return;
    const datagram = buildRtp({ marker, payloadType, sequence: this.sequence, timestamp, ssrc: this.ssrc }, payload);
    this.sequence = (this.sequence + 1) & 0xffff;
    this.counts.packetsOut += 1;
    try {
      this.socket.send(datagram, target.port, target.address, (error) => {
        if (error) this.sendFailed(error);
      });
    } catch (error) {
      this.sendFailed(error);
    }
  }

  private sendFailed(error: unknown): void {
    this.counts.sendErrors += 1;
    if (this.sendErrorReported || this.closed) return;
    this.sendErrorReported = true; // once per remote: a dead remote would otherwise report 50 times a second
    this.report(error);
  }

  private accepts(source: dgram.RemoteInfo, remote: RemoteMedia): boolean {
    const expected = this.latched ?? (this.latchEnabled ? null : remote);
    if (expected === null) return true;
    return source.port === expected.port && normalized(source.address) === normalized(expected.address);
  }

  private receive(datagram: Buffer, source: dgram.RemoteInfo): void {
    try {
      const remote = this.remote;
      const direction = remote?.direction ?? 'sendrecv';
      if (this.closed || remote === null || direction === 'sendonly' || direction === 'inactive') {
        this.counts.ignored += 1;
        return;
      }
      if (!sendsMedia(this.peer, remote.address, source.address)) {
        this.counts.foreign += 1;
        return;
      }
      if (!this.accepts(source, remote) || isRtcp(datagram)) {
        this.counts.ignored += 1;
        return;
      }
      const packet = parseRtp(datagram);
      if (packet === null) {
        this.counts.malformed += 1;
        return;
      }
      if (this.latched === null && this.latchEnabled) this.latched = { address: source.address, port: source.port };
      this.loss.packet(packet.ssrc, packet.sequence);
      if (remote.telephoneEventPt !== null && packet.payloadType === remote.telephoneEventPt) {
        const event = parseTelephoneEvent(packet.payload);
        if (event === null) {
          this.counts.malformed += 1;
          return;
        }
        this.counts.packetsIn += 1;
        const digit = this.detector.packet(packet.ssrc, packet.timestamp, event);
        if (digit !== undefined) emit(this.dtmfListeners, digit, this.report);
        return;
      }
      const codec =
        packet.payloadType === remote.payloadType ? remote.codec : codecOfStaticPayloadType(packet.payloadType);
      if (codec === undefined) {
        this.counts.ignored += 1;
        return;
      }
      if (packet.payload.length === 0) {
        this.counts.malformed += 1;
        return;
      }
      this.counts.packetsIn += 1;
      emit(this.audioListeners, decode(codec, packet.payload), this.report);
    } catch (error) {
      // Not expected (the parsers do not throw), but a datagram must never take the process down.
      this.counts.malformed += 1;
      this.report(error);
    }
  }
}
