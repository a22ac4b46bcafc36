/**
 * A SIP dialog leg: a SIP dialog (sip.js's `Session`) and its RTP endpoint, with a carrier (the caller's INVITE we
 * answered, admission.ts, or an INVITE of ours that the far end answered, dial-out.ts) or with a registered desk
 * phone (legs/sip-device.ts builds on it).
 *
 * - Our BYE on a dialog we answered waits for the caller's ACK of our 200 (RFC 3261 section 15; sip.js refuses it
 *   before), or for the 200's transaction to give up (32 s): a plan that hangs up at once would otherwise lose its BYE
 *   and leave the caller on the line.
 * - The far end's BYE is answered (200) and heard through `onHangup`.
 * - A re-INVITE from the far end (its hold, resume, a new address), on any leg, is answered with the same media (our
 *   address, port, the first G.711 codec of the new offer) in the direction it offered mirrored (sendonly gets
 *   recvonly), narrowed by our own hold (we hold it `sendonly` and it offers sendrecv: sendonly); the RTP endpoint
 *   follows the new offer. A re-INVITE we cannot use (no SDP, no common codec, a media address the far end could
 *   not receive at: engine/media/media-peer.ts) gets 488 with the reason in a Warning, and changes nothing.
 * - Our hold (`hold`, asked by the caller's connection): a re-INVITE with our last description again in the asked
 *   direction (`reoffer`: the same address, port and codecs; the o= version one greater, RFC 3264 section 8). One at
 *   a time: a hold asked while one is on its way is sent after it, and only the last direction asked for is (none
 *   when the far end has it already). A 491 (the far end's re-INVITE crossed ours) is retried once after the random
 *   delay of RFC 3261 section 14.1 (2.1 to 4 s when the Call-ID is ours, a dialled leg; up to 2 s otherwise); any
 *   other final answer of 300 or more, or none within the transaction's 32 s, is a `HoldFailure` and the dialog goes
 *   on as it was. The RTP endpoint changes only when the answer moves the far end (address, port or codec): our hold
 *   is the connection's media business, and a new remote would forget the latched source (engine/media/rtp.ts).
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { IncomingResponse, ReInviteUserAgentServer, Session, SessionDialog } from 'sip.js/lib/core/index.js';
import type { RtpEndpoint, RemoteMedia } from '../../media/rtp.ts';
import { answer as answerSdp, nextVersion, parseSdp, remoteFromAnswer, reoffer } from '../../media/sdp.ts';
import { notAcceptable } from '../invite.ts';
import { HoldFailure, type HoldDirection, type Leg, type LegCounts } from '../leg.ts';

/** How long a BYE waits for the caller's ACK: the 200's server transaction gives up after 64 × T1 (32 s). */
const ackWaitMs = 32_000;

/** The wait before a re-INVITE refused with 491 goes again (RFC 3261 section 14.1), in units of 10 ms. */
function glareDelayMs(ownsCallId: boolean): number {
  const [from, to] = ownsCallId ? [210, 400] : [0, 200];
  return 10 * (from + Math.floor(Math.random() * (to - from + 1)));
}

const sdpBody = (content: string) => ({ contentDisposition: 'session', contentType: 'application/sdp', content });

/** How one re-INVITE of ours ended. */
type Sent = { accepted: true } | { accepted: false; glare: boolean; failure: HoldFailure };

export interface SipDialogLegOptions {
  /**
   * Set for a dialog we answered (the caller's leg): our BYE waits for the ACK. (Its address is the one our SDP
   * names; every leg now reads it from its own description.) A dialled leg (we sent the ACK) leaves it out.
   */
  answered?: { advertisedHost: string };
  /** Let go of when the leg closes: what the leg's requests need until then (a carrier's digest account). */
  release?: () => void;
}

export class SipDialogLeg implements Leg {
  /** The ACK for our 200 came (or none is due): only then may our BYE go (RFC 3261 section 15). */
  private acknowledged: boolean;
  private readonly ackWaiters: Array<() => void> = [];
  private readonly hangupListeners: Array<() => void> = [];
  /** Our description as last sent in the dialog: the next one keeps its o= line (RFC 3264 section 8). */
  private ours: string | undefined;
  /** The far end's media as the RTP endpoint has it (undefined when it cannot be read from the dialog). */
  private remote: RemoteMedia | undefined;
  /** The direction our last accepted description asked for, and the one the last hold asked for. */
  private offered: HoldDirection = 'sendrecv';
  private wanted: HoldDirection = 'sendrecv';
  /** The re-INVITE of ours on its way (or done): the next waits for it. */
  private signalling: Promise<unknown> = Promise.resolve();
  /** A BYE went or came: nothing more is sent. */
  private over = false;
  /** The dialog's Call-ID is ours (a dialled leg): the longer glare delay. */
  private readonly ownsCallId: boolean;
  /** The far end's BYE came. */
  private hungUp = false;
  private release: (() => void) | undefined;

  constructor(
    readonly id: string,
    private readonly session: Session,
    readonly media: RtpEndpoint,
    options: SipDialogLegOptions = {},
  ) {
    const answered = options.answered !== undefined;
    this.release = options.release;
    this.acknowledged = !answered;
    this.ownsCallId = !answered;
    this.ours = (answered ? session.answer : session.offer)?.content;
    try {
      const theirs = parseSdp((answered ? session.offer : session.answer)?.content ?? '');
      const mine = parseSdp(this.ours ?? '');
      this.remote = answered ? answerSdp(theirs, mine).remote : remoteFromAnswer(theirs);
    } catch {
      this.remote = undefined;
    }
    const onBye: NonNullable<Session['delegate']>['onBye'] = (bye) => {
      this.over = true;
      this.hungUp = true;
      bye.accept();
      for (const listener of this.hangupListeners) listener();
    };
    const onInvite = (reinvite: ReInviteUserAgentServer) => this.answerReinvite(reinvite);
    session.delegate = answered
      ? {
          onAck: () => this.acked(),
          // The caller never acknowledged our 200: a BYE may go now (RFC 3261 section 15).
          onAckTimeout: () => this.acked(),
          onBye,
          onInvite,
        }
      : { onBye, onInvite };
  }

  onDtmf(listener: (digit: string) => void): () => void {
    return this.media.onDtmf(listener);
  }

  onHangup(listener: () => void): void {
    if (this.hungUp) queueMicrotask(listener);
    else this.hangupListeners.push(listener);
  }

  close(): LegCounts {
    this.media.close();
    const release = this.release;
    this.release = undefined;
    release?.();
    const stats = this.media.stats;
    return { in: stats.packetsIn, out: stats.packetsOut, rtp: stats };
  }

  async bye(signal?: AbortSignal): Promise<void> {
    this.over = true;
    // A plan that hangs up at once (a one-step hangup plan) can get here before the caller's ACK: sip.js then
    // refuses the BYE, which goes once the ACK comes (or the 200's transaction gives up).
    if (this.sendBye()) return;
    await this.ackOrGiveUp(signal);
    if (signal?.aborted === true) return;
    this.sendBye();
  }

  hold(direction: HoldDirection): Promise<boolean> {
    this.wanted = direction;
    const turn = this.signalling.catch(() => {}).then(() => this.reinvite());
    this.signalling = turn;
    return turn;
  }

  /** The far end's re-INVITE: our answer (same media, its direction mirrored and narrowed by our hold), or 488. */
  private answerReinvite(reinvite: ReInviteUserAgentServer): void {
    try {
      const ours = this.ours;
      if (ours === undefined) throw new Error('no description of ours in the dialog');
      const mine = parseSdp(ours);
      const again = answerSdp(parseSdp(reinvite.message.body), mine, this.offered);
      const sdp = nextVersion(ours, again.sdp);
      this.media.setRemote(again.remote);
      reinvite.accept({ statusCode: 200, body: sdpBody(sdp) });
      this.ours = sdp;
      this.remote = again.remote;
    } catch (error) {
      reinvite.reject(notAcceptable(error));
    }
  }

  /** Sends the direction last asked for, unless the far end has it already or the leg is over. */
  private async reinvite(): Promise<boolean> {
    const direction = this.wanted;
    if (this.over || direction === this.offered) return false;
    // Not before the caller acknowledged our answer (RFC 3261 section 14.1: no INVITE while one is in progress).
    await this.ackOrGiveUp(undefined);
    for (let attempt = 1; ; attempt += 1) {
      if (this.over) return false;
      const sent = await this.send(direction);
      if (sent.accepted) {
        this.offered = direction;
        return true;
      }
      if (!sent.glare || attempt > 1) throw sent.failure;
      await delay(glareDelayMs(this.ownsCallId));
    }
  }

  /** One re-INVITE offering our last description in `direction`. */
  private send(direction: HoldDirection): Promise<Sent> {
    const failed = (result: HoldFailure['result'], message: string, glare = false): Sent => ({
      accepted: false,
      glare,
      failure: new HoldFailure(result, message),
    });
    const ours = this.ours;
    // Our Contact (a re-INVITE refreshes the target, RFC 3261 section 12.2.1.1): the dialog's core's.
    const core = (this.session as Partial<Pick<SessionDialog, 'userAgentCore'>>).userAgentCore;
    if (ours === undefined || core === undefined) {
      return Promise.resolve(failed('unsent', 'no description of ours in the dialog to offer again'));
    }
    const sdp = reoffer(ours, direction);
    return new Promise((resolve) => {
      const refused = (response: IncomingResponse) => {
        const status = response.message.statusCode ?? 0;
        // sip.js makes a 408 of a transaction that timed out (and a 503 of a transport error).
        if (status === 408) resolve(failed('timeout', `no answer to the re-INVITE (${direction})`));
        else resolve(failed('refused', `the re-INVITE (${direction}) was answered ${status}`, status === 491));
      };
      try {
        this.session.invite(
          {
            onAccept: (response) => {
              response.ack();
              this.ours = sdp;
              this.follow(response.message.body);
              resolve({ accepted: true });
            },
            onRedirect: refused,
            onReject: refused,
          },
          { extraHeaders: [`Contact: ${core.configuration.contact.toString()}`], body: sdpBody(sdp) },
        );
      } catch (error) {
        // The far end's re-INVITE is in progress (or the dialog is gone): as a glare, tried once more.
        resolve(failed('unsent', `the re-INVITE (${direction}) could not go: ${(error as Error).message}`, true));
      }
    });
  }

  /** The answer to our re-INVITE: the RTP endpoint follows only a far end that moved (address, port, codec). */
  private follow(body: string): void {
    try {
      const next = remoteFromAnswer(parseSdp(body));
      const before = this.remote;
      if (
        before !== undefined &&
        next.address === before.address &&
        next.port === before.port &&
        next.payloadType === before.payloadType
      ) {
        return;
      }
      const moved = { ...next, direction: before?.direction ?? 'sendrecv' };
      this.media.setRemote(moved);
      this.remote = moved;
    } catch {
      // An answer without usable SDP leaves the media as it was.
    }
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
