/**
 * A leg of a call: one party's connection to it (docs/architecture.md, "A call, its legs and its steps"). The call
 * drives its legs through this interface and never sees how a leg is signalled: today a carrier's SIP dialog
 * (`legs/sip-dialog.ts`, inbound or dialled out) or a browser's WebRTC peer connection (`legs/browser.ts`, a device that
 * accepted a `ring` step's offer) or a registered SIP device's dialog (`legs/sip-device.ts`, a desk phone that
 * answered a `ring` step's INVITE).
 *
 * - answer: a leg that arrived is answered when it is made (the inbound carrier leg is our 200 with the SDP
 *   answer); a dialled leg exists only once the far end answered.
 * - media: its endpoint, where audio and DTMF come and go (prompts, recording, bridging): an RTP endpoint by default,
 *   a WebRTC endpoint for a browser leg (audio only; the two have the audio shape `bridge` joins).
 * - hold: the far end's hold, resume or new address is the leg's own business (a SIP leg answers the re-INVITE with
 *   the same media); the call goes on. Ours, where the leg's signalling has one (`hold`: a SIP dialog's re-INVITE; a
 *   browser leg has none), is asked by the caller's connection (connection.ts, hold-signal.ts).
 * - bye: our side ends the leg; `onHangup` hears the far end's (a listener added after it hears it at once).
 * - close: the leg's media closes and what it holds goes (a carrier's account, a desk phone's pinned flow); it tells
 *   what went through it, for the leg's record.
 */
import type { BridgeEndpoint } from '../media/bridge.ts';
import type { MediaStats, RtpEndpoint } from '../media/rtp.ts';

/** What went through a leg's media: RTP packets (with RTP's own figures) or a browser's audio frames. */
export interface LegCounts {
  in: number;
  out: number;
  /** An RTP leg's figures, for the engine's RTP metrics. */
  rtp?: MediaStats;
}

/**
 * What our re-INVITE asks of a far end we hold (RFC 3264 section 8.4): `sendonly` (we go on sending, the hold music;
 * it need not send), `inactive` (neither sends), or `sendrecv` to resume.
 */
export type HoldDirection = 'sendonly' | 'inactive' | 'sendrecv';

/** A hold or resume the far end did not take: refused (a final answer of 300 or more), no answer, or not sent. */
export class HoldFailure extends Error {
  constructor(
    readonly result: 'refused' | 'timeout' | 'unsent',
    message: string,
  ) {
    super(message);
    this.name = 'HoldFailure';
  }
}

export interface Leg<Media extends BridgeEndpoint = RtpEndpoint> {
  /** Its record (call_legs). */
  readonly id: string;
  /** Where its audio and DTMF come and go. */
  readonly media: Media;
  /** Keys the far end presses (RFC 4733 or in-band); returns the unsubscribe. */
  onDtmf(listener: (digit: string) => void): () => void;
  /** The far end hung up (its BYE was answered); a listener added after that is called at once. */
  onHangup(listener: () => void): void;
  /**
   * Hangs the leg up from our side. Resolves once the BYE went, or without one when `signal` aborts first (the call
   * ended otherwise while the BYE had to wait).
   */
  bye(signal?: AbortSignal): Promise<void>;
  /**
   * Tells the far end of our hold or resume (`direction`). Resolves true once it accepted, false when nothing had to
   * be sent (it knows already, or the leg is over); rejects with a `HoldFailure`. The media is not this method's:
   * the connection holds it whatever the far end answers.
   */
  hold?(direction: HoldDirection): Promise<boolean>;
  /** Closes the media and lets go of what the leg holds; again, it changes nothing and counts the same. */
  close(): LegCounts;
}

/**
 * Resolves once the far end hangs up (true) or `stop` aborts first (false): how long a bridged leg stays bridged.
 * Our BYE, if due, is the caller's to send.
 */
export function farEndHungUp(leg: Pick<Leg, 'onHangup'>, stop: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    leg.onHangup(() => resolve(true));
    if (stop.aborted) resolve(false);
    else stop.addEventListener('abort', () => resolve(false), { once: true });
  });
}
