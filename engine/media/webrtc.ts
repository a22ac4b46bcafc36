/**
 * A WebRTC media endpoint for a browser leg (docs/phones.md, "Legs"): one `RTCPeerConnection` of `@roamhq/wrtc`
 * with one audio transceiver (sendrecv) fed by an `RTCAudioSource`, and an `RTCAudioSink` on the remote track. ICE
 * uses the servers given (none: host candidates only); DTLS-SRTP and the codecs are libwebrtc's, offered in the order
 * PCMU, PCMA, Opus, telephone-event, nothing else. The answer keeps the offer's order and each side sends the first
 * codec of it, so a browser that does G.711 (RFC 7874 asks it of every WebRTC browser; Chromium answers PCMU,
 * test/engine/calls/legs/browser.test.ts) talks PCMU, which the carrier leg speaks too: no Opus encoder or decoder and no
 * resampling to and from 48 kHz in libwebrtc (see `offeredCodecs`).
 *
 * Offer/answer. The engine offers: `createOffer` waits for ICE gathering to complete (or `gatherTimeoutMs`, then
 * with the candidates found so far) so that the offer carries its candidates, since there is no trickle over the
 * offers' long-poll; with no STUN or TURN server it goes once the UDP host candidates are in (`gathered`). `acceptAnswer` takes the browser's answer once; what it cannot use is a `WebRtcAnswerError`
 * (an answer before the offer, a second answer, text that is not SDP, no usable audio stream, no DTLS fingerprint or
 * ICE credentials, or one libwebrtc refuses), never a crash, and the endpoint stays as it was.
 *
 * Audio has the shape of the carrier leg's `RtpEndpoint` (rtp.ts), so that `bridge` joins the two: `onAudio`
 * gives 8 kHz 16-bit frames of 20 ms, `send` takes 8 kHz frames (of 20 ms from a carrier leg; any length works).
 * WebRTC's side is 10 ms frames: the sink's (at whatever rate and channel count it delivers, the first channel
 * taken; 8 kHz for G.711, see `receive`) are resampled to 8 kHz when they are not at 8 kHz already
 * (stream-resample.ts, `RateFollower`) and re-framed to 20 ms; what is sent goes to the source at 8 kHz,
 * 10 ms at a time, and libwebrtc resamples it for its encoder (measured: resampling to 48 kHz here cost 99 µs per
 * 20 ms frame on the event loop, more than the two `onData` calls, about 45 µs each, at any rate). DTMF does not cross this endpoint yet (no `onDtmf` / `sendDtmf`).
 *
 * `close` stops the sink, then the track, then closes the peer connection, and is idempotent. Known weak points of
 * the binding (measured in test/engine/media/webrtc.test.ts): a process that exits by itself while an `RTCAudioSource` is
 * not yet garbage-collected crashes (SIGSEGV) in the binding's N-API cleanup, closed or not; one that ends with
 * `process.exit` (as the service does on SIGTERM) does not. A track that is never stopped keeps the process alive.
 */
import wrtc from '@roamhq/wrtc';
import ipaddr from 'ipaddr.js';
import { Reframer } from './reframe.ts';
import { RateFollower } from './stream-resample.ts';
import {
  defaultHostAddresses,
  WebRtcEndpointBase,
  type WebRtcEndpointOptions,
  type WebRtcState,
  type WebRtcStats,
} from './webrtc-endpoint.ts';

type PeerConnection = InstanceType<typeof wrtc.RTCPeerConnection>;
type AudioSource = InstanceType<typeof wrtc.nonstandard.RTCAudioSource>;
type AudioSink = InstanceType<typeof wrtc.nonstandard.RTCAudioSink>;
type Track = ReturnType<AudioSource['createTrack']>;
type CodecCapability = NonNullable<ReturnType<typeof wrtc.RTCRtpReceiver.getCapabilities>>['codecs'][number];

/**
 * What the engine offers (setCodecPreferences), in this order: G.711 first, since every browser leg is bridged to a
 * G.711 carrier leg and Opus at 48 kHz would buy no quality there while costing libwebrtc an Opus encoder, a decoder
 * and resampling to and from 48 kHz per call; Opus last, for a browser that will not do G.711.
 */
const offeredCodecs = ['audio/pcmu', 'audio/pcma', 'audio/opus'];
const rtpRate = 8000;
const rtpFrameSamples = 160; // 20 ms
/** A host-only offer goes once no new UDP candidate came for this long (they come together, within ~1 ms). */
const udpSettleMs = 20;

export class WebRtcEndpoint extends WebRtcEndpointBase {
  private readonly pc: PeerConnection;
  private readonly source: AudioSource;
  private readonly track: Track;
  private sink: AudioSink | null = null;
  private readonly gatherTimeoutMs: number;
  /** The addresses whose host candidates the offer lists (see `offeringOnly`). */
  private readonly hostAddresses: ReadonlySet<string>;
  /** No STUN or TURN server: the offer goes once the UDP host candidates are in (see `gathered`). */
  private readonly hostOnly: boolean;
  private readonly outFrames = new Reframer(rtpRate / 100);
  private readonly inRate = new RateFollower(rtpRate);
  private readonly inFrames = new Reframer(rtpFrameSamples);
  private readonly counts: WebRtcStats = { framesIn: 0, framesOut: 0 };
  /** 10 ms frames handed to the RTCAudioSource (two make a 20 ms frame of `stats`). */
  private tenMsOut = 0;

  constructor(options: WebRtcEndpointOptions = {}) {
    super(options.onError);
    this.gatherTimeoutMs = options.gatherTimeoutMs ?? 5000;
    this.hostAddresses = new Set((options.hostAddresses ?? defaultHostAddresses).map(normalAddress));
    this.hostOnly = (options.iceServers ?? []).length === 0;
    this.pc = new wrtc.RTCPeerConnection({ iceServers: [...(options.iceServers ?? [])] });
    this.source = new wrtc.nonstandard.RTCAudioSource();
    this.track = this.source.createTrack();
    try {
      const transceiver = this.pc.addTransceiver(this.track, { direction: 'sendrecv' });
      transceiver.setCodecPreferences(preferredCodecs());
      this.pc.addEventListener('track', (event) => this.attachSink(event.track));
      this.pc.addEventListener('connectionstatechange', () => this.announce(this.state));
    } catch (error) {
      this.close();
      throw error;
    }
  }

  get state(): WebRtcState {
    return this.closed ? 'closed' : (this.pc.connectionState as WebRtcState);
  }

  get stats(): WebRtcStats {
    return { framesIn: this.counts.framesIn, framesOut: Math.floor(this.tenMsOut / 2) };
  }

  protected async makeOffer(): Promise<string | undefined> {
    // Listening before gathering starts: the first candidates come within a millisecond or two.
    const gathering = this.gathered();
    await this.pc.setLocalDescription(await this.pc.createOffer());
    await gathering;
    const sdp = this.pc.localDescription?.sdp;
    return sdp === undefined ? undefined : offeringOnly(sdp, this.hostAddresses);
  }

  protected async applyAnswer(sdp: string): Promise<void> {
    await this.pc.setRemoteDescription({ type: 'answer', sdp });
  }

  /** Sends 8 kHz PCM towards the browser (dropped once closed). */
  send(frame: Int16Array): void {
    if (this.closed || frame.length === 0) return;
    for (const chunk of this.outFrames.push(frame)) {
      try {
        this.source.onData({ samples: chunk, sampleRate: rtpRate, bitsPerSample: 16, channelCount: 1 });
        this.tenMsOut += 1;
      } catch (error) {
        this.report(error);
      }
    }
  }

  /** Stops the sink, then the track, then closes the peer connection. */
  protected release(): void {
    for (const release of [() => this.sink?.stop(), () => this.track.stop(), () => this.pc.close()]) {
      try {
        release();
      } catch (error) {
        this.report(error);
      }
    }
    this.sink = null;
  }

  /**
   * Resolves once the offer has the candidates it needs: when gathering completes (or `gatherTimeoutMs` passed). With
   * no STUN or TURN server only host candidates come: libwebrtc gathers the UDP ones at once and the TCP ones a step
   * (about 100 ms, measured) later, then completes. Browsers reach the engine over UDP (ICE-TCP is for networks that
   * block UDP, where TURN is the answer), so a host-only offer goes as soon as its UDP candidates are in: at the
   * first TCP candidate, or once no UDP candidate came for `udpSettleMs`. That saves the offer those 100 ms.
   */
  private gathered(): Promise<void> {
    return new Promise((resolve) => {
      let settle: NodeJS.Timeout | undefined;
      const done = () => {
        clearTimeout(timer);
        clearTimeout(settle);
        this.pc.removeEventListener('icegatheringstatechange', check);
        this.pc.removeEventListener('icecandidate', onCandidate);
        resolve();
      };
      const check = () => {
        if (this.closed || this.pc.iceGatheringState === 'complete') done();
      };
      const onCandidate = (event: { candidate: { candidate: string } | null }) => {
        if (!this.hostOnly || event.candidate === null) return;
        const protocol = event.candidate.candidate.split(' ')[2]?.toLowerCase();
        if (protocol === 'tcp') return done();
        if (protocol !== 'udp') return;
        clearTimeout(settle);
        settle = setTimeout(done, udpSettleMs);
      };
      const timer = setTimeout(done, this.gatherTimeoutMs);
      this.pc.addEventListener('icegatheringstatechange', check);
      this.pc.addEventListener('icecandidate', onCandidate);
      check();
    });
  }

  private attachSink(track: Track): void {
    if (this.closed || this.sink !== null || track.kind !== 'audio') return;
    const sink = new wrtc.nonstandard.RTCAudioSink(track);
    this.sink = sink;
    sink.ondata = (data: { samples: Int16Array; sampleRate: number; channelCount?: number }) => {
      if (this.closed) return;
      try {
        this.receive(data.samples, data.sampleRate, data.channelCount ?? 1);
      } catch (error) {
        this.report(error);
      }
    };
  }

  private receive(samples: Int16Array, sampleRate: number, channels: number): void {
    let mono = samples;
    if (channels > 1) {
      mono = new Int16Array(Math.floor(samples.length / channels));
      for (let index = 0; index < mono.length; index += 1) mono[index] = samples[index * channels] as number;
    }
    // The sink's rate is libwebrtc's playout mixer's, one for every peer connection of the process: the highest any
    // of them wants, so 8 kHz while every call is G.711 and has had a packet, 16 kHz while one has not yet, 48 kHz
    // while one is Opus. 8 kHz passes as it is; the rate follower resamples another and keeps the audio continuous
    // across the changes.
    for (const frame of this.inFrames.push(this.inRate.push(mono, sampleRate))) {
      this.counts.framesIn += 1;
      this.hear(frame);
    }
  }
}

/** libwebrtc's audio codecs that the engine offers, in `offeredCodecs`' order, then telephone-event at 8 and 48 kHz. */
function preferredCodecs(): CodecCapability[] {
  const codecs = wrtc.RTCRtpReceiver.getCapabilities('audio')?.codecs ?? [];
  const rank = (codec: CodecCapability): number => {
    const type = codec.mimeType.toLowerCase();
    if (type === 'audio/telephone-event') {
      const at = [8000, 48000].indexOf(codec.clockRate);
      return at < 0 ? -1 : offeredCodecs.length + at;
    }
    return offeredCodecs.indexOf(type);
  };
  return codecs.filter((codec) => rank(codec) >= 0).sort((a, b) => rank(a) - rank(b));
}

/** An IP address as core/config.ts writes WEBRTC_ADDRESSES (IPv6 compressed); anything else as it is. */
function normalAddress(address: string): string {
  return ipaddr.isValid(address) ? ipaddr.parse(address).toString() : address;
}

/**
 * libwebrtc's offer with only the host candidates of `addresses` (libwebrtc gathers on every interface, and its
 * configuration cannot say which): the others are dropped, a server-reflexive or relayed candidate's `raddr` and
 * `rport` (the local address it was found from) are written `0.0.0.0 0`, and the default destination (`c=` and the
 * `m=` port, which libwebrtc sets to its first candidate) becomes the first UDP candidate kept, or `0.0.0.0` port 9.
 * An address the machine has no interface for gets no candidate: libwebrtc binds each to its interface.
 */
export function offeringOnly(sdp: string, addresses: ReadonlySet<string>): string {
  const lines = sdp.split('\r\n');
  const kept: string[] = [];
  for (const line of lines) {
    if (!line.startsWith('a=candidate:')) {
      kept.push(line);
      continue;
    }
    const fields = line.split(' ');
    const type = fields[fields.indexOf('typ') + 1];
    if (type === 'host') {
      if (addresses.has(normalAddress(fields[4] ?? ''))) kept.push(line);
      continue;
    }
    kept.push(line.replace(/ raddr \S+ rport \d+/, ' raddr 0.0.0.0 rport 0'));
  }
  // The default destination, per media section (from its m= line to the next): its first UDP candidate kept.
  const starts = kept.flatMap((line, at) => (line.startsWith('m=') ? [at] : []));
  const out = kept.slice(0, starts[0] ?? kept.length);
  starts.forEach((start, which) => {
    const section = kept.slice(start, starts[which + 1] ?? kept.length);
    const first = section
      .filter((line) => line.startsWith('a=candidate:'))
      .map((line) => line.split(' '))
      .find((fields) => fields[2]?.toLowerCase() === 'udp');
    const address = first?.[4] ?? '0.0.0.0';
    const port = first?.[5] ?? '9';
    for (const line of section) {
      if (line.startsWith('m=')) out.push(line.replace(/^(m=\S+ )\d+/, `$1${port}`));
      else if (line.startsWith('c=')) out.push(`c=IN ${address.includes(':') ? 'IP6' : 'IP4'} ${address}`);
      else out.push(line);
    }
  });
  return out.join('\r\n');
}
