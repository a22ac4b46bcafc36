/**
 * The types of `switchboard/phone` (client/phone.ts re-exports them): the phone's options, its calls, its events
 * and the phone itself.
 */
import type { PhoneError } from './phone.js';

export interface PhoneOptions {
  /** Where the service's API is, e.g. `https://switchboard.example.com` (without `/api/v1`). */
  baseUrl: string;
  /** Returns a user or member token with `devices:*`; called at start and again after a 401. */
  fetchToken: () => Promise<string>;
  /** Sent as `x-service-workspace-id`; a token names its workspace already. */
  workspaceId?: string;
  device: { kind: 'browser'; name?: string; clientId?: string };
  /**
   * STUN and TURN servers for the peer connection when an offer names none (the service hands its own, ICE_SERVERS,
   * with each offer); none: host candidates only.
   */
  iceServers?: RTCIceServer[];
  /** The microphone constraints given to getUserMedia; default `true`. */
  microphone?: boolean | MediaTrackConstraints;
}

export type CallState = 'ringing' | 'answering' | 'connected' | 'ended';

/** Why a call ended (`ended`). */
export type EndReason =
  /** This phone hung up (`hangUp`, or `stop`). */
  | 'hangup'
  /** This phone declined the offer. */
  | 'declined'
  /** The offer is gone: answered on another device, the caller hung up, or it expired. */
  | 'withdrawn'
  /** The peer connection closed or failed (the engine ended the leg, or the network is gone). */
  | 'disconnected'
  /** Answering failed (`error` says why). */
  | 'failed';

/**
 * How the call rings on this phone (the ring step's `mode`, docs/phones.md "Ring modes"): `ring` out loud, `silent`
 * (show it without a sound), or `muted` (ring; the call is answered with the microphone muted).
 */
export type RingMode = 'ring' | 'silent' | 'muted';

/** An offered call (`incoming`): the caller (`from`), the number called (`to`), and the means to take it. */
export interface PhoneCall {
  /** The offer's id. */
  readonly id: string;
  readonly callId: string;
  readonly from: string;
  readonly to: string;
  readonly expiresAt: string;
  readonly state: CallState;
  /** How to alert the person: play a ringtone for `ring` only. A `muted` call is answered muted. */
  readonly mode: RingMode;
  /** Answers the call: microphone, SDP answer, `POST /offers/{id}/accept`. Resolves once accepted. */
  accept(): Promise<void>;
  /** Declines this phone's offer; other devices keep ringing. */
  decline(): Promise<void>;
}

export interface PhoneEvents {
  /** The device is registered (and re-registered, with the same id, by its clientId). */
  registered: { deviceId: string };
  incoming: PhoneCall;
  /** Media flows: `stream` is the engine's audio (play it in an `<audio>` element). */
  connected: { call: PhoneCall; stream: MediaStream };
  ended: { call: PhoneCall; reason: EndReason };
  error: PhoneError;
}

export interface Phone {
  on<E extends keyof PhoneEvents>(event: E, listener: (detail: PhoneEvents[E]) => void): () => void;
  /** Registers the device and starts renewing its presence and polling its offers. */
  start(): Promise<void>;
  /** The registered device's id (undefined before `start`). */
  readonly deviceId: string | undefined;
  /** The call answered (or being answered), if any. */
  readonly call: PhoneCall | undefined;
  /** Mutes or unmutes the microphone of the call. */
  mute(muted: boolean): void;
  /** Whether the call's microphone is muted (a `muted` call starts so). False without a call. */
  readonly muted: boolean;
  /**
   * Ends the call: `ended` at once and the microphone stops; an answered call is hung up through the API
   * (`POST /calls/{id}/hangup`, which needs `calls:*` in the token), so the engine ends it at once; then the peer
   * connection closes. Without `calls:*` (403) the engine notices the closed connection instead, about 15 s later.
   * Resolves once the connection is closed.
   */
  hangUp(): Promise<void>;
  /** Stops polling and renewing (the presence lease then lapses) and hangs up. The device stays registered. */
  stop(): void;
}
