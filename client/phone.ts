/**
 * A phone in the browser (docs/phones.md, "The phone in the browser"), published as `switchboard/phone`: it registers
 * the tab as a `browser` device of the token's person, renews its presence every 20 s, long-polls its offers, and
 * answers one with the browser's own `RTCPeerConnection` (the engine offers, the browser answers; no trickle ICE: the
 * answer is sent once its candidates are gathered). No framework and no Node API: `fetch`, `RTCPeerConnection` and
 * `getUserMedia` only.
 *
 * ```ts
 * const phone = createPhone({ baseUrl: 'https://switchboard.example.com', fetchToken: () => myBackend.token() });
 * phone.on('incoming', (call) => call.accept());
 * phone.on('connected', ({ stream }) => (audioElement.srcObject = stream));
 * await phone.start();
 * ```
 *
 * `fetchToken` is the application's: it returns a user or member token with `devices:*` (operation 7 of the
 * specification, made by the application's backend). It is called at start and again when the API answers 401, and
 * the request is retried once with the new token.
 */

import type { CallState, EndReason, Phone, PhoneCall, PhoneEvents, PhoneOptions, RingMode } from './phone-types.js';

export type { CallState, EndReason, Phone, PhoneCall, PhoneEvents, PhoneOptions, RingMode } from './phone-types.js';

/** A failure: an API error (its `status` and the envelope's `code`) or a browser one (status 0). */
export class PhoneError extends Error {
  constructor(
    message: string,
    readonly status = 0,
    readonly code = 'phone_error',
  ) {
    super(message);
    this.name = 'PhoneError';
  }
}

const presenceEveryMs = 20_000;
const waitSeconds = 10;
const retryAfterMs = 2_000;
/** The longest the hangup request is waited for before the connection closes anyway (the API answers within ~5 s). */
const hangupWaitMs = 10_000;

interface OfferJson {
  id: string;
  callId: string;
  from: string;
  to: string;
  sdp: string;
  expiresAt: string;
  /** Missing from older services: `ring`. */
  mode?: RingMode;
  /** The service's STUN and TURN servers (ICE_SERVERS); empty or missing: this phone's `iceServers` option. */
  iceServers?: RTCIceServer[];
}

interface Call extends PhoneCall {
  state: CallState;
  sdp: string;
  iceServers: RTCIceServer[];
  pc?: RTCPeerConnection;
  microphone?: MediaStream;
  /** The accept went through: the call is this device's to hang up. */
  accepted?: boolean;
  muted: boolean;
}

export function createPhone(options: PhoneOptions): Phone {
  const base = options.baseUrl.replace(/\/+$/, '') + '/api/v1';
  const listeners = new Map<keyof PhoneEvents, Set<(detail: never) => void>>();
  const shown = new Map<string, Call>();
  let token: string | undefined;
  let deviceId: string | undefined;
  let current: Call | undefined;
  let running = false;
  let stopping = new AbortController();
  let presenceTimer: ReturnType<typeof setInterval> | undefined;

  function emit<E extends keyof PhoneEvents>(event: E, detail: PhoneEvents[E]): void {
    for (const listener of [...(listeners.get(event) ?? [])]) {
      try {
        (listener as (detail: PhoneEvents[E]) => void)(detail);
      } catch (error) {
        // A listener's failure is the page's; it must not stop the phone.
        setTimeout(() => {
          throw error;
        });
      }
    }
  }

  function fail(error: unknown): PhoneError {
    const failure = error instanceof PhoneError ? error : new PhoneError(String((error as Error)?.message ?? error));
    emit('error', failure);
    return failure;
  }

  /** One API request; a 401 fetches a new token and tries once more. Answers the JSON body, or throws a PhoneError. */
  async function api(
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    retried = false,
    signal: AbortSignal = stopping.signal,
  ): Promise<unknown> {
    token ??= await options.fetchToken();
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (options.workspaceId !== undefined) headers['x-service-workspace-id'] = options.workspaceId;
    if (method === 'POST') {
      headers['idempotency-key'] = crypto.randomUUID();
      headers['content-type'] = 'application/json';
    }
    const response = await fetch(base + path, {
      method,
      headers,
      ...(method === 'POST' ? { body: JSON.stringify(body ?? {}) } : {}),
      signal,
    });
    if (response.status === 401 && !retried) {
      token = await options.fetchToken();
      return api(method, path, body, true, signal);
    }
    const text = await response.text();
    const json = parsed(text) as { error?: { code?: string; message?: string } } | undefined;
    if (!response.ok) {
      throw new PhoneError(json?.error?.message ?? `HTTP ${response.status}`, response.status, json?.error?.code);
    }
    if (json === undefined && text !== '') throw new PhoneError('the answer is not JSON', response.status);
    return json;
  }

  /** Ends the call here: `ended`, the microphone stopped, the peer connection closed (unless `keepConnection`). */
  function end(call: Call, reason: EndReason, keepConnection = false): void {
    if (call.state === 'ended') return;
    call.state = 'ended';
    shown.delete(call.id);
    if (current === call) current = undefined;
    call.microphone?.getTracks().forEach((track) => track.stop());
    if (!keepConnection) close(call);
    emit('ended', { call, reason });
  }

  function close(call: Call): void {
    if (call.pc !== undefined && call.pc.signalingState !== 'closed') call.pc.close();
  }

  /**
   * Asks the service to hang the call up (operation 52), so that the engine ends it at once whatever its media stack
   * (with `WEBRTC_MEDIA=libwebrtc` it would hear the closed connection only when ICE consent lapses). A token without
   * `calls:*` (403) or a call already over (409 call_ended) is no error: the connection's close does the rest.
   */
  async function requestHangup(call: Call): Promise<void> {
    try {
      await api('POST', `/calls/${call.callId}/hangup`, undefined, false, AbortSignal.timeout(hangupWaitMs));
    } catch (error) {
      const expected = error instanceof PhoneError && (error.status === 403 || error.code === 'call_ended');
      if (!expected) fail(error);
    }
  }

  async function accept(call: Call): Promise<void> {
    if (call.state !== 'ringing') throw fail(new PhoneError(`the call is ${call.state}, not ringing`));
    if (current !== undefined) throw fail(new PhoneError('this phone is on a call already: hang up first'));
    current = call;
    call.state = 'answering';
    shown.delete(call.id); // It leaves the waiting offers: that is not a withdrawal.
    try {
      const pc = new RTCPeerConnection({ iceServers: call.iceServers });
      call.pc = pc;
      pc.addEventListener('track', (event) => {
        const stream = event.streams[0] ?? new MediaStream([event.track]);
        const connected = () => {
          if (pc.connectionState !== 'connected' || call.state !== 'answering') return;
          call.state = 'connected';
          emit('connected', { call, stream });
        };
        pc.addEventListener('connectionstatechange', connected);
        connected();
      });
      pc.addEventListener('connectionstatechange', () => {
        if (pc.connectionState === 'failed' || pc.connectionState === 'closed') end(call, 'disconnected');
      });
      await pc.setRemoteDescription({ type: 'offer', sdp: call.sdp });
      call.microphone = await navigator.mediaDevices.getUserMedia({ audio: options.microphone ?? true });
      for (const track of call.microphone.getAudioTracks()) {
        track.enabled = !call.muted;
        pc.addTrack(track, call.microphone);
      }
      await pc.setLocalDescription(await pc.createAnswer());
      await gathered(pc);
      if (call.state !== 'answering') return; // Hung up meanwhile.
      await api('POST', `/offers/${call.id}/accept`, { sdp: pc.localDescription?.sdp });
      call.accepted = true;
      // Hung up while the accept was on its way: the call is this device's now, so it is hung up through the API.
      if ((call.state as CallState) === 'ended') await requestHangup(call);
    } catch (error) {
      const failure = fail(error);
      end(call, 'failed');
      throw failure;
    }
  }

  async function decline(call: Call): Promise<void> {
    if (call.state !== 'ringing') return;
    end(call, 'declined');
    try {
      await api('POST', `/offers/${call.id}/decline`);
    } catch (error) {
      throw fail(error);
    }
  }

  function toCall(offer: OfferJson): Call {
    const call: Call = {
      id: offer.id,
      callId: offer.callId,
      from: offer.from,
      to: offer.to,
      expiresAt: offer.expiresAt,
      mode: offer.mode ?? 'ring',
      muted: offer.mode === 'muted',
      sdp: offer.sdp,
      // The offer's servers, else the phone's own.
      iceServers:
        offer.iceServers !== undefined && offer.iceServers.length > 0 ? offer.iceServers : (options.iceServers ?? []),
      state: 'ringing',
      accept: () => accept(call),
      decline: () => decline(call),
    };
    return call;
  }

  /** The long-poll: new offers are `incoming`, offers gone while ringing are `ended` (withdrawn). */
  async function poll(): Promise<void> {
    while (running) {
      const known = [...shown.keys()].join(',');
      const query = `wait=${waitSeconds}${known === '' ? '' : `&known=${known}`}`;
      try {
        const page = (await api('GET', `/devices/${deviceId}/offers?${query}`)) as { data: OfferJson[] };
        if (!running) return;
        const waiting = new Set(page.data.map((offer) => offer.id));
        for (const call of [...shown.values()]) if (!waiting.has(call.id)) end(call, 'withdrawn');
        for (const offer of page.data) {
          if (shown.has(offer.id) || current?.id === offer.id) continue;
          const call = toCall(offer);
          shown.set(call.id, call);
          emit('incoming', call);
        }
      } catch (error) {
        if (!running) return;
        fail(error);
        await new Promise((resolve) => setTimeout(resolve, retryAfterMs));
      }
    }
  }

  async function renew(): Promise<void> {
    try {
      await api('POST', `/devices/${deviceId}/presence`);
    } catch (error) {
      if (running) fail(error);
    }
  }

  async function hangUp(): Promise<void> {
    const call = current;
    if (call === undefined) return;
    end(call, 'hangup', true);
    try {
      if (call.accepted === true) await requestHangup(call);
    } finally {
      close(call);
    }
  }

  return {
    on(event, listener) {
      const set = listeners.get(event) ?? new Set();
      listeners.set(event, set);
      set.add(listener as (detail: never) => void);
      return () => set.delete(listener as (detail: never) => void);
    },
    async start() {
      if (running) return;
      running = true;
      stopping = new AbortController();
      try {
        token = await options.fetchToken();
        const { kind, name, clientId } = options.device;
        const device = (await api('POST', '/devices', { kind, name, clientId })) as { id: string };
        deviceId = device.id;
      } catch (error) {
        running = false;
        throw fail(error);
      }
      emit('registered', { deviceId });
      presenceTimer = setInterval(() => void renew(), presenceEveryMs);
      void poll();
    },
    get deviceId() {
      return deviceId;
    },
    get call() {
      return current;
    },
    mute(muted) {
      if (current === undefined) return;
      current.muted = muted;
      current.microphone?.getAudioTracks().forEach((track) => (track.enabled = !muted));
    },
    get muted() {
      return current?.muted ?? false;
    },
    hangUp,
    stop() {
      running = false;
      clearInterval(presenceTimer);
      stopping.abort();
      void hangUp();
      for (const call of [...shown.values()]) end(call, 'hangup');
    },
  };
}

/**
 * A body's JSON, or undefined for an empty or non-JSON one (a proxy's HTML error page, a cut-off body): such an
 * error answer fails with its HTTP status rather than a SyntaxError.
 */
function parsed(text: string): unknown {
  try {
    return text === '' ? undefined : (JSON.parse(text) as unknown);
  } catch {
    return undefined;
  }
}

/** Resolves once the peer connection gathered its ICE candidates (the answer then carries them all). */
function gathered(pc: RTCPeerConnection): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (pc.iceGatheringState !== 'complete') return;
      pc.removeEventListener('icegatheringstatechange', check);
      resolve();
    };
    pc.addEventListener('icegatheringstatechange', check);
    check();
  });
}
