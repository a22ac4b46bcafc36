/**
 * A browser leg's WebRTC media carried as G.711 (docs/phones.md, "Legs"; `WEBRTC_MEDIA=g711`, the default): one
 * peer connection of werift, a WebRTC stack in TypeScript (ICE, DTLS-SRTP, RTP and RTCP; no codecs of its own). The
 * engine offers PCMU and PCMA only, which every WebRTC browser must take (RFC 7874; Chromium answers PCMU,
 * test/engine/media/webrtc-g711.test.ts), so audio crosses the leg as the carrier leg's own G.711: each 20 ms frame the bridge
 * sends is encoded (a table lookup per sample) and written as one RTP packet; each packet from the browser is decoded
 * and re-framed to 20 ms. No jitter buffer, no resampling, no encoder: the libwebrtc stack (webrtc.ts) spends most of
 * a call's CPU in those (docs/benchmarks.md, "phones").
 *
 * Offer/answer and ICE. `createOffer` waits for ICE gathering to complete (werift bounds it: 5 s for a STUN server
 * that does not answer; `gatherTimeoutMs` is libwebrtc's), so the offer carries its candidates: a host candidate for
 * each of `hostAddresses` (WEBRTC_ADDRESSES) on a socket of every address, so that an address no interface has (a
 * 1:1 NAT's) works too, and none for the machine's other interfaces; plus a server-reflexive one from the first
 * `stun:` server of `iceServers` and a relayed one from the first `turn:` server (UDP, or TCP when its URL says
 * `?transport=tcp`); werift takes one of each, and no `stuns:` or `turns:` (the browser still gets them all with the
 * offer and gathers its own). With no STUN server werift would ask stun.l.google.com; the endpoint clears that, so a
 * host-only engine sends nothing anywhere. `acceptAnswer` checks the answer as the other stack does (`checkAnswer`).
 *
 * Sending: one sequence and timestamp per endpoint from random starts (werift adds its own offsets and its SSRC); the
 * timestamp advances by the samples sent, and after a pause of more than 200 ms jumps by the time that passed, with
 * the marker bit, so the browser's jitter buffer sees a talk spurt, not a clock that stopped. Packets are dropped
 * until DTLS is up. Receiving: packets of another payload type (comfort noise, telephone-event) are not carried, a
 * duplicate or late packet is dropped, and a new SSRC starts over.
 *
 * Safety. werift (0.25; it checks SRTP's authentication tags, which 0.22 did not) hands up any datagram that is not
 * STUN from whatever address sent it, and acts on a DTLS alert without authenticating it: a close_notify anyone could
 * send would end the call. `guardSockets` passes on only what comes from the browser's ICE-checked address; a
 * sender that forges that address (on the path) could still end the call with an alert, as werift stands.
 *
 * `close` closes the peer connection (DTLS close_notify, so the browser hears it at once) and is idempotent.
 */
import { randomBytes } from 'node:crypto';
import { MediaStreamTrack, RTCPeerConnection, RTCRtpCodecParameters, RtpHeader, RtpPacket } from 'werift';
import { type Codec, codecOfName, codecOfStaticPayloadType, decode, encode, staticPayloadType } from './g711.ts';
import type { IceServer } from '../../core/config.ts';
import { Reframer } from './reframe.ts';
import {
  defaultHostAddresses,
  WebRtcEndpointBase,
  type WebRtcEndpointOptions,
  type WebRtcState,
  type WebRtcStats,
} from './webrtc-endpoint.ts';

/** What the engine offers, in this order. */
const offeredCodecs: readonly Codec[] = ['PCMU', 'PCMA'];
const rate = 8000;
const frameSamples = 160; // 20 ms
/** A longer gap between packets sent is a pause: the timestamp jumps over it. */
const pauseMs = 200;

/** The parts of werift's ICE agent `guardSockets` works on (not werift's typed API). */
interface IceAgent {
  protocols: Array<{ type: string; transport?: { onData?: (data: Buffer, from: [string, number]) => void } }>;
  checkList?: IcePair[];
  nominated?: IcePair;
}

interface IcePair {
  protocol: unknown;
  remoteAddr: [string, number];
  state: number;
}

/** werift's CandidatePairState.SUCCEEDED. */
const succeeded = 3;

/** Sockets already guarded (the agent's list holds each once; this keeps a second guard off). */
const guarded = new WeakSet<object>();

interface WeriftIceServers {
  servers: Array<{ urls: string; username?: string; credential?: string }>;
  stun: boolean;
  turnOverTcp: boolean;
}

export class G711WebRtcEndpoint extends WebRtcEndpointBase {
  private readonly pc: RTCPeerConnection;
  private readonly track: MediaStreamTrack;
  private readonly outFrames = new Reframer(frameSamples);
  private readonly inFrames = new Reframer(frameSamples);
  private readonly counts: WebRtcStats = { framesIn: 0, framesOut: 0 };
  private sequence: number;
  private timestamp: number;
  private lastSentAt: number | undefined;
  private inSsrc: number | undefined;
  private inSequence = 0;
  private lastState: WebRtcState = 'new';
  private strays = 0;
  /** What the browser's answer settled on (werift sends the first codec of it); nothing goes before it. */
  private codec: Codec | undefined;

  constructor(options: WebRtcEndpointOptions = {}) {
    super(options.onError);
    const start = randomBytes(6);
    this.sequence = start.readUInt16BE(0);
    this.timestamp = start.readUInt32BE(2);
    const ice = weriftIceServers(options.iceServers ?? []);
    this.pc = new RTCPeerConnection({
      codecs: {
        audio: offeredCodecs.map(
          (codec) =>
            new RTCRtpCodecParameters({
              mimeType: `audio/${codec}`,
              clockRate: rate,
              channels: 1,
              payloadType: staticPayloadType[codec],
            }),
        ),
        video: [],
      },
      iceServers: ice.servers,
      ...(ice.turnOverTcp ? { forceTurnTCP: true } : {}),
      // Host candidates for the configured addresses alone: werift's own list is every interface's.
      iceUseIpv4: false,
      iceUseIpv6: false,
      iceAdditionalHostAddresses: [...(options.hostAddresses ?? defaultHostAddresses)],
    });
    this.track = new MediaStreamTrack({ kind: 'audio' });
    try {
      const transceiver = this.pc.addTransceiver(this.track, { direction: 'sendrecv' });
      if (!ice.stun) {
        // werift's ICE agent falls back to stun.l.google.com when given no STUN server; none was configured.
        for (const transport of this.pc.iceTransports) {
          (transport.connection as unknown as { stunServer?: unknown }).stunServer = undefined;
        }
      }
      transceiver.onTrack.subscribe((remote) => {
        remote.onReceiveRtp.subscribe((packet) => this.receive(packet));
      });
      // werift's connection state says nothing after `connected`: the transports' states do (see `state`).
      this.pc.connectionStateChange.subscribe(() => this.stateChanged());
      for (const dtls of this.pc.dtlsTransports) {
        dtls.onStateChange.subscribe(() => this.stateChanged());
        dtls.iceTransport.onStateChange.subscribe(() => this.stateChanged());
      }
    } catch (error) {
      this.close();
      throw error;
    }
  }

  /**
   * werift's connection state until connected; then its transports': the browser closing DTLS (close_notify, what a
   * browser's `close()` sends) is `closed`, DTLS or ICE failing, or ICE consent lapsing (werift's ICE agent closes
   * after 6 checks unanswered, about 30 s), is `failed`, and ICE without answers for a while is `disconnected`.
   */
  get state(): WebRtcState {
    if (this.closed) return 'closed';
    const base = this.pc.connectionState as WebRtcState;
    if (base !== 'connected') return base;
    let state: WebRtcState = 'connected';
    for (const dtls of this.pc.dtlsTransports) {
      const ice = dtls.iceTransport.state;
      if (dtls.state === 'closed') return 'closed';
      if (dtls.state === 'failed' || ice === 'failed' || ice === 'closed') return 'failed';
      if (ice === 'disconnected') state = 'disconnected';
    }
    return state;
  }

  get stats(): WebRtcStats {
    return { ...this.counts };
  }

  /** The STUN server werift's ICE agent asks (`host:port`), if any: none unless `iceServers` has one. */
  get stunServer(): string | undefined {
    const agent = this.pc.iceTransports[0]?.connection as unknown as { stunServer?: [string, number] } | undefined;
    return agent?.stunServer === undefined ? undefined : agent.stunServer.join(':');
  }

  protected async makeOffer(): Promise<string | undefined> {
    // werift's setLocalDescription returns once gathering completed (bounded by werift: 5 s for a STUN server).
    await this.pc.setLocalDescription(await this.pc.createOffer());
    this.guardSockets();
    return this.pc.localDescription?.sdp;
  }

  /** Datagrams dropped for coming from elsewhere than the browser's ICE-checked address (see `guardSockets`). */
  get strayDatagrams(): number {
    return this.strays;
  }

  /**
   * werift hands up every datagram that is not STUN, from whatever address it came, and acts on an unauthenticated
   * DTLS alert (a close_notify anyone could send would end the call). So each of the endpoint's UDP sockets passes
   * on only STUN (ICE's own checks, which carry their credentials) and what comes from the remote address of a pair
   * ICE checked on that socket (succeeded or nominated); the rest is dropped and counted (`strayDatagrams`). TURN-relayed sockets are
   * left as werift has them.
   */
  private guardSockets(): void {
    const agent = this.pc.iceTransports[0]?.connection as unknown as IceAgent | undefined;
    for (const protocol of agent?.protocols ?? []) {
      const transport = protocol.transport;
      if (protocol.type !== 'stun' || transport?.onData === undefined || guarded.has(transport)) continue;
      guarded.add(transport);
      const deliver = transport.onData.bind(transport);
      // A pair ICE checked on this socket: the browser starts DTLS once a check of its own succeeded, before the
      // engine (the controlling side) has nominated.
      const checked = (pair: IcePair, from: [string, number]) =>
        pair.protocol === protocol &&
        pair.remoteAddr[0] === from[0] &&
        pair.remoteAddr[1] === from[1] &&
        (pair === agent?.nominated || pair.state === succeeded);
      transport.onData = (data, from) => {
        const stun = data.length > 0 && (data[0] as number) < 4; // RFC 7983: 0-3 is STUN
        if (stun || (agent?.checkList ?? []).some((pair) => checked(pair, from))) deliver(data, from);
        else this.strays += 1;
      };
    }
  }

  protected async applyAnswer(sdp: string): Promise<void> {
    await this.pc.setRemoteDescription({ type: 'answer', sdp });
    const mimeType = this.pc.getTransceivers()[0]?.sender.codec?.mimeType;
    this.codec = mimeType === undefined ? undefined : codecOfName(mimeType.replace(/^audio\//i, ''));
  }

  send(frame: Int16Array): void {
    const codec = this.codec;
    if (this.closed || frame.length === 0 || codec === undefined) return; // before the answer nothing would go
    for (const chunk of this.outFrames.push(frame)) {
      try {
        const marker = this.advance();
        const header = new RtpHeader({
          payloadType: staticPayloadType[codec],
          sequenceNumber: this.sequence,
          timestamp: this.timestamp,
          marker,
        });
        this.track.writeRtp(new RtpPacket(header, Buffer.from(encode(codec, chunk))));
        this.sequence = (this.sequence + 1) & 0xffff;
        this.timestamp = (this.timestamp + frameSamples) >>> 0;
        this.counts.framesOut += 1;
      } catch (error) {
        this.report(error);
      }
    }
  }

  /** Closes the peer connection (its DTLS close_notify tells the browser at once). */
  protected release(): void {
    try {
      this.track.stop();
      this.pc.close().catch((error: unknown) => this.report(error));
    } catch (error) {
      this.report(error);
    }
  }

  private stateChanged(): void {
    const state = this.state;
    if (state === this.lastState) return;
    this.lastState = state;
    this.announce(state);
  }

  /** Before a packet: moves the timestamp over a pause; whether the packet gets the marker bit. */
  private advance(): boolean {
    const now = performance.now();
    const last = this.lastSentAt;
    this.lastSentAt = now;
    if (last === undefined) return true;
    const elapsed = now - last;
    if (elapsed <= pauseMs) return false;
    this.timestamp = (this.timestamp + Math.round(elapsed * (rate / 1000)) - frameSamples) >>> 0;
    return true;
  }

  private receive(packet: RtpPacket): void {
    if (this.closed) return;
    try {
      const { payloadType, ssrc, sequenceNumber } = packet.header;
      const codec = codecOfStaticPayloadType(payloadType);
      if (codec === undefined) return;
      if (ssrc !== this.inSsrc) {
        this.inSsrc = ssrc;
      } else {
        const delta = (sequenceNumber - this.inSequence) & 0xffff;
        if (delta === 0 || delta >= 0x8000) return; // a duplicate, or later than what was carried already
      }
      this.inSequence = sequenceNumber;
      for (const frame of this.inFrames.push(decode(codec, packet.payload))) {
        this.counts.framesIn += 1;
        this.hear(frame);
      }
    } catch (error) {
      this.report(error);
    }
  }
}

/**
 * `ICE_SERVERS` as werift takes it: the first `stun:` URL and the first `turn:` URL with its credentials, each as
 * `<scheme>:<host>:<port>` (3478 when the URL names none). werift takes no `stuns:`, `turns:` or IPv6 literal; a URL
 * whose port is past 65535 is skipped as well.
 */
export function weriftIceServers(servers: readonly IceServer[]): WeriftIceServers {
  let stun: string | undefined;
  let turn: { urls: string; username?: string; credential?: string } | undefined;
  let turnOverTcp = false;
  for (const server of servers) {
    for (const url of typeof server.urls === 'string' ? [server.urls] : server.urls) {
      const match = /^(stun|turn):([^:/?[\]]+)(?::(\d{1,5}))?(?:\?transport=(udp|tcp))?$/i.exec(url.trim());
      if (match === null || Number(match[3] ?? 3478) > 65535) continue;
      const scheme = (match[1] as string).toLowerCase();
      const address = `${scheme}:${match[2]}:${match[3] ?? '3478'}`;
      if (scheme === 'stun' && stun === undefined) stun = address;
      if (scheme === 'turn' && turn === undefined && server.username !== undefined && server.credential !== undefined) {
        turn = { urls: address, username: server.username, credential: server.credential };
        turnOverTcp = match[4]?.toLowerCase() === 'tcp';
      }
    }
  }
  return {
    servers: [...(stun === undefined ? [] : [{ urls: stun }]), ...(turn === undefined ? [] : [turn])],
    stun: stun !== undefined,
    turnOverTcp,
  };
}
