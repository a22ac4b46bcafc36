/**
 * What a browser leg's WebRTC media endpoint is, whichever stack carries it (docs/phones.md, "Legs"): the engine makes
 * the SDP offer (`createOffer`, with its candidates: there is no trickle over the offers' long-poll), takes the
 * browser's answer once (`acceptAnswer`; an answer it cannot use is a `WebRtcAnswerError`, never a crash, and the
 * endpoint stays as it was), and carries audio in the carrier leg's shape so that `bridge` joins the two: `onAudio`
 * gives 8 kHz 16-bit frames of 20 ms, `send` takes 8 kHz frames of any length.
 *
 * Two stacks implement it (`WEBRTC_MEDIA`): `g711` (webrtc-g711.ts, the default: werift, PCMU or PCMA forwarded as
 * G.711, no codec work beyond G.711's table lookups) and `libwebrtc` (webrtc.ts: `@roamhq/wrtc`, which also speaks
 * Opus to a browser that will not do G.711).
 */
import sdpTransform from 'sdp-transform';
import type { IceServer } from '../../core/config.ts';
import { assertNotHoldingConnection } from '../../core/held-connections.ts';
import { emit, errorReporter } from './listeners.ts';

export interface WebRtcEndpointOptions {
  /** STUN and TURN servers; none (the default): host candidates only. */
  iceServers?: readonly IceServer[];
  /**
   * The addresses the offer lists as host candidates (WEBRTC_ADDRESSES, IP literals as core/config.ts normalizes
   * them); default 127.0.0.1. No other address of the machine is offered.
   */
  hostAddresses?: readonly string[];
  /** How long `createOffer` waits for ICE gathering to complete; default 5000 ms. */
  gatherTimeoutMs?: number;
  /** Errors that would otherwise be lost (a listener that threw); default: a process warning. */
  onError?: (error: unknown) => void;
}

export type WebRtcAnswerProblem = 'no_offer' | 'answered' | 'closed' | 'malformed' | 'no_audio' | 'refused';

/** An answer the endpoint cannot take; `problem` says why. The endpoint is unchanged. */
export class WebRtcAnswerError extends Error {
  constructor(
    readonly problem: WebRtcAnswerProblem,
    message: string,
  ) {
    super(message);
    this.name = 'WebRtcAnswerError';
  }
}

export type WebRtcState = 'new' | 'connecting' | 'connected' | 'disconnected' | 'failed' | 'closed';

export interface WebRtcStats {
  /** 20 ms frames of 8 kHz audio given to `onAudio` listeners. */
  framesIn: number;
  /** 20 ms frames of audio sent towards the browser (G.711: RTP packets; libwebrtc: two 10 ms source frames each). */
  framesOut: number;
}

/** A browser leg's media: one peer connection with one audio stream (sendrecv). */
export interface WebRtcMedia {
  readonly closed: boolean;
  readonly state: WebRtcState;
  readonly stats: WebRtcStats;
  /** The engine's SDP offer, with its ICE candidates; once per endpoint (a second call gives the same offer). */
  createOffer(): Promise<string>;
  /** Takes the browser's SDP answer to the offer; a `WebRtcAnswerError` for one it cannot use. */
  acceptAnswer(sdp: unknown): Promise<void>;
  /** Resolves once ICE and DTLS are up; rejects when the connection fails or closes first, or after `timeoutMs`. */
  connected(timeoutMs?: number): Promise<void>;
  /** Listens for connection state changes (and 'closed' on `close`); returns the function that stops listening. */
  onState(listener: (state: WebRtcState) => void): () => void;
  /** Listens for the browser's audio, as 20 ms frames of 8 kHz PCM; returns the function that stops listening. */
  onAudio(listener: (frame: Int16Array) => void): () => void;
  /** Sends 8 kHz PCM towards the browser (dropped once closed). */
  send(frame: Int16Array): void;
  /** Closes the peer connection; calling it again is fine. */
  close(): void;
}

/** Makes a browser leg's endpoint: the stack `WEBRTC_MEDIA` names. */
export type WebRtcMediaFactory = (options: WebRtcEndpointOptions) => WebRtcMedia;

export const maxSdpLength = 65536;

/** The host candidates' addresses when none are given: loopback, what a laptop's browser reaches. */
export const defaultHostAddresses: readonly string[] = ['127.0.0.1'];

/**
 * What both stacks share: the offer made once, the answer checked and taken once, the listeners, and `close` once.
 * A stack makes its offer (`makeOffer`), applies an answer already checked (`applyAnswer`), releases its peer
 * connection (`release`), and hands the browser's audio to `hear`.
 */
export abstract class WebRtcEndpointBase implements WebRtcMedia {
  protected readonly report: (error: unknown) => void;
  private readonly audioListeners = new Set<(frame: Int16Array) => void>();
  private readonly stateListeners = new Set<(state: WebRtcState) => void>();
  private offerSdp: string | null = null;
  private offering = false;
  private answered = false;
  private isClosed = false;

  constructor(onError: ((error: unknown) => void) | undefined) {
    this.report = errorReporter(onError);
  }

  abstract get state(): WebRtcState;
  abstract get stats(): WebRtcStats;
  abstract send(frame: Int16Array): void;
  /** Makes the local offer and waits for its candidates; its SDP. */
  protected abstract makeOffer(): Promise<string | undefined>;
  /** Applies the browser's answer, checked already; throws what the stack refuses. */
  protected abstract applyAnswer(sdp: string): Promise<void>;
  /** Releases the peer connection and what feeds it; called once, by `close`. */
  protected abstract release(): void;

  get closed(): boolean {
    return this.isClosed;
  }

  async createOffer(): Promise<string> {
    if (this.offerSdp !== null) return this.offerSdp;
    if (this.isClosed) throw new Error('the WebRTC endpoint is closed');
    if (this.offering) throw new Error('an offer is being made already');
    // Gathering asks STUN and TURN servers, and waits for them.
    assertNotHoldingConnection('a WebRTC offer (ICE gathering)');
    this.offering = true;
    try {
      const sdp = await this.makeOffer();
      if (this.isClosed) throw new Error('the WebRTC endpoint closed while making its offer');
      if (sdp === undefined) throw new Error('no local description after the offer');
      this.offerSdp = sdp;
      return sdp;
    } finally {
      this.offering = false;
    }
  }

  async acceptAnswer(sdp: unknown): Promise<void> {
    if (this.isClosed) throw new WebRtcAnswerError('closed', 'the call leg is closed');
    if (this.offerSdp === null) throw new WebRtcAnswerError('no_offer', 'there is no offer to answer yet');
    if (this.answered) throw new WebRtcAnswerError('answered', 'the offer is answered already');
    checkAnswer(sdp, this.offerSdp);
    this.answered = true;
    try {
      await this.applyAnswer(sdp as string);
    } catch (error) {
      this.answered = false;
      throw new WebRtcAnswerError('refused', `the SDP answer was refused: ${(error as Error).message}`);
    }
    if (this.isClosed) throw new WebRtcAnswerError('closed', 'the call leg closed while taking the answer');
  }

  connected(timeoutMs = 10000): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = (state: WebRtcState) => {
        if (state === 'connected') done();
        else if (state === 'failed' || state === 'closed') done(new Error(`the WebRTC connection is ${state}`));
      };
      const timer = setTimeout(() => done(new Error(`not connected within ${timeoutMs} ms`)), timeoutMs);
      const stop = this.onState(check);
      const done = (error?: Error) => {
        clearTimeout(timer);
        stop();
        if (error === undefined) resolve();
        else reject(error);
      };
      check(this.state);
    });
  }

  onState(listener: (state: WebRtcState) => void): () => void {
    this.stateListeners.add(listener);
    return () => this.stateListeners.delete(listener);
  }

  onAudio(listener: (frame: Int16Array) => void): () => void {
    this.audioListeners.add(listener);
    return () => this.audioListeners.delete(listener);
  }

  close(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.audioListeners.clear();
    this.release();
    emit(this.stateListeners, 'closed', this.report);
    this.stateListeners.clear();
  }

  /** Tells the state listeners of `state` (nothing once closed: `close` told them). */
  protected announce(state: WebRtcState): void {
    if (!this.isClosed) emit(this.stateListeners, state, this.report);
  }

  /** Hands a 20 ms frame of the browser's audio to the listeners. */
  protected hear(frame: Int16Array): void {
    emit(this.audioListeners, frame, this.report);
  }
}

/** Throws a `WebRtcAnswerError` for an answer to `offer` that cannot be used. */
export function checkAnswer(sdp: unknown, offer: string): void {
  if (typeof sdp !== 'string' || sdp.trim() === '') throw new WebRtcAnswerError('malformed', 'the SDP answer is empty');
  if (sdp.length > maxSdpLength) {
    throw new WebRtcAnswerError('malformed', `the SDP answer is over ${maxSdpLength} characters`);
  }
  if (!/^v=0\s*$/.test(sdp.split(/\r?\n/, 1)[0] ?? '')) {
    throw new WebRtcAnswerError('malformed', 'not SDP: the answer does not start with v=0');
  }
  let session: sdpTransform.SessionDescription;
  try {
    session = sdpTransform.parse(sdp);
  } catch (error) {
    throw new WebRtcAnswerError('malformed', `unreadable SDP answer: ${(error as Error).message}`);
  }
  if (session.origin === undefined) throw new WebRtcAnswerError('malformed', 'the SDP answer has no o= line');
  const offered = sdpTransform.parse(offer).media.find((media) => media.type === 'audio');
  const audio = session.media.find(
    (media) => media.type === 'audio' && (offered?.mid === undefined || String(media.mid) === String(offered.mid)),
  );
  if (audio === undefined) throw new WebRtcAnswerError('no_audio', 'the SDP answer has no audio stream for the offer');
  if (audio.port === 0) throw new WebRtcAnswerError('no_audio', 'the SDP answer refuses the audio stream (port 0)');
  if (audio.direction === 'inactive') throw new WebRtcAnswerError('no_audio', 'the SDP answer sets audio inactive');
  const offeredPayloads = new Set(String(offered?.payloads ?? '').split(' '));
  if (
    !String(audio.payloads ?? '')
      .split(' ')
      .some((payload) => offeredPayloads.has(payload))
  ) {
    throw new WebRtcAnswerError('no_audio', 'the SDP answer has none of the offered codecs');
  }
  if ((audio.fingerprint ?? session.fingerprint) === undefined) {
    throw new WebRtcAnswerError('malformed', 'the SDP answer has no DTLS fingerprint');
  }
  if ((audio.iceUfrag ?? session.iceUfrag) === undefined || (audio.icePwd ?? session.icePwd) === undefined) {
    throw new WebRtcAnswerError('malformed', 'the SDP answer has no ICE credentials');
  }
}
