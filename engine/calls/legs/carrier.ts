/**
 * A carrier leg: a SIP dialog with a carrier (sip.js's `Session`) and its RTP endpoint, either the caller's INVITE we
 * answered (admission.ts) or a forward's INVITE that the far end answered (dial-out.ts).
 *
 * - Our BYE on a dialog we answered waits for the caller's ACK of our 200 (RFC 3261 section 15; sip.js refuses it
 *   before), or for the 200's transaction to give up (32 s): a plan that hangs up at once would otherwise lose its BYE
 *   and leave the caller on the line.
 * - The far end's BYE is answered (200) and heard through `onHangup`.
 * - A re-INVITE on a dialog we answered (hold, resume, a new address) is answered with the same media, following the
 *   new offer. A dialled leg leaves re-INVITEs to sip.js (488), as before legs existed.
 */
import type { Session } from 'sip.js/lib/core/index.js';
import type { MediaEndpoint } from '../../media/rtp.ts';
import { answer as answerSdp, parseSdp } from '../../media/sdp.ts';
import type { Leg } from '../leg.ts';

/** How long a BYE waits for the caller's ACK: the 200's server transaction gives up after 64 × T1 (32 s). */
const ackWaitMs = 32_000;

export interface CarrierLegOptions {
  /**
   * Set for a dialog we answered (the caller's leg): our BYE waits for the ACK, and re-INVITEs are answered with our
   * media at this address (the one our SDP names). A dialled leg (we sent the ACK) leaves it out.
   */
  answered?: { advertisedHost: string };
}

export class CarrierLeg implements Leg {
  /** The ACK for our 200 came (or none is due): only then may our BYE go (RFC 3261 section 15). */
  private acknowledged: boolean;
  private readonly ackWaiters: Array<() => void> = [];
  private readonly hangupListeners: Array<() => void> = [];

  constructor(
    readonly id: string,
    private readonly session: Session,
    readonly media: MediaEndpoint,
    options: CarrierLegOptions = {},
  ) {
    this.acknowledged = options.answered === undefined;
    const onBye: NonNullable<Session['delegate']>['onBye'] = (bye) => {
      bye.accept();
      for (const listener of this.hangupListeners) listener();
    };
    const answered = options.answered;
    session.delegate =
      answered === undefined
        ? { onBye }
        : {
            onAck: () => this.acked(),
            // The caller never acknowledged our 200: a BYE may go now (RFC 3261 section 15).
            onAckTimeout: () => this.acked(),
            onBye,
            onInvite: (reinvite) => {
              // A re-INVITE (hold, resume, a new address): answer with the same media, following the new offer.
              try {
                const next = parseSdp(reinvite.message.body);
                const again = answerSdp(next, { address: answered.advertisedHost, port: media.localPort });
                media.setRemote(again.remote);
                reinvite.accept({
                  statusCode: 200,
                  body: { contentDisposition: 'session', contentType: 'application/sdp', content: again.sdp },
                });
              } catch {
                reinvite.reject({ statusCode: 488 });
              }
            },
          };
  }

  onDtmf(listener: (digit: string) => void): () => void {
    return this.media.onDtmf(listener);
  }

  onHangup(listener: () => void): void {
    this.hangupListeners.push(listener);
  }

  async bye(signal?: AbortSignal): Promise<void> {
    // A plan that hangs up at once (a one-step hangup plan) can get here before the caller's ACK: sip.js then
    // refuses the BYE, which goes once the ACK comes (or the 200's transaction gives up).
    if (this.sendBye()) return;
    await this.ackOrGiveUp(signal);
    if (signal?.aborted === true) return;
    this.sendBye();
  }

  /** The far end acknowledged our 200 (or its transaction gave up waiting). */
  private acked(): void {
    this.acknowledged = true;
    for (const wake of this.ackWaiters.splice(0)) wake();
  }

  /** Resolves once the caller's ACK came, `signal` aborted, or the 200's transaction gave up on the ACK. */
  private ackOrGiveUp(signal: AbortSignal | undefined): Promise<void> {
    if (this.acknowledged || signal?.aborted === true) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ackWaitMs);
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      this.ackWaiters.push(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** False only when sip.js refused the BYE for want of the caller's ACK. */
  private sendBye(): boolean {
    try {
      this.session.bye();
      return true;
    } catch (error) {
      // Otherwise the dialog may be gone already (the caller's BYE crossed ours).
      return !(error instanceof Error && error.message.includes('until it has received an ACK'));
    }
  }
}
