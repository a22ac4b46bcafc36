/**
 * Transfers of a connected call (operation 53, docs/contact-center.md "Transfer"), driven by the call's commands
 * (commands.ts). The caller's connection (connection.ts) is what moves:
 *
 * - Blind: the request is taken up, `call.transferred` written, the party released (our BYE; a queue's agent goes to
 *   wrap-up). The step that connected the call then finds the move waiting (`Call.afterConnection`): the caller is
 *   rung through to the target (`{memberId}`: a ring round of their devices; `{e164}`: dialled out through the
 *   called number's carrier; `{queueId}`: a wait in that queue), `call.connected` again when the target answers.
 * - Warm: the caller is held apart (hold music) and the agent rings the target with ringback, in a round beside the
 *   call's connection (an aside round: the call stays `connected` to the agent). The target answers: agent and target
 *   talk. `complete` (or the agent hanging up) bridges the caller to the target and releases the agent
 *   (`call.transferred`, then `call.connected` with the target's leg); `cancel`, the target not answering or hanging
 *   up brings the caller back to the agent.
 *
 * A transfer whose target does not answer (`transferRingMs`) or overflows leaves the caller with an apology and the
 * call ends `transfer_failed`.
 */
import { changeState, type ConnectedLeg } from '../../core/calls/calls.ts';
import {
  type FinishTransferCommand,
  recordTransferred,
  setConsulting,
  takeTransferRequest,
  type TransferCommand,
} from '../../core/calls/commands.ts';
import type { Transfer, TransferTarget } from '../../core/calls/transfers.ts';
import type { BridgeEndpoint } from '../media/bridge.ts';
import { frameAt, frameCount, pace } from '../media/player.ts';
import { holdMusicLoop } from '../media/hold-music.ts';
import { ringbackCadence } from '../media/ringback.ts';
import { type AsideRound, type CallerMedia, type Connection, connectionOf } from './connection.ts';
import { connectParty } from './connect-party.ts';
import { hangUpDialled } from './dial-out.ts';
import { playLooped } from '../media/looped-audio.ts';
import type { QueueStepRequest, TransferCall } from './control.ts';
import type { CallServices } from './services.ts';

/** How long a transfer's target rings. */
export const transferRingMs = 30_000;
/** How long a caller moved to a queue may wait there before the transfer fails. */
export const transferQueueWaitMs = 30 * 60_000;
/** A caller moved to a queue waits there as a `queue` step's caller would, without a callback, at priority 0. */
export function transferQueueRequest(queueId: string): QueueStepRequest {
  return { queueId, maxWaitMs: transferQueueWaitMs, offerCallback: false, priority: 0 };
}
export const transferFailedPrompt = 'Sorry, the transfer could not be completed. Goodbye.';

/** A warm transfer's consultation in progress. */
interface Consultation {
  transfer: Transfer;
  /** The caller's connection to the agent, held apart meanwhile. */
  connection: Connection;
  /** Ends the consultation's round (the target's ringing or leg). */
  cancel: AbortController;
  /** The target's leg once it answered, and its connection to the agent. */
  answered?: { leg: ConnectedLeg; connection: Connection };
  /** Settles when the target's round is over (its leg ended, or it never answered). */
  done: Promise<void>;
  /** Settles with the target's answer, or undefined once the round is over without one. */
  reached: Promise<{ leg: ConnectedLeg; connection: Connection } | undefined>;
  finish?: 'complete' | 'cancel';
  /** The caller took the agent's place (once). */
  joined?: boolean;
}

export class Transfers {
  /** What the caller moves to once the step's connection is over (a blind transfer, or a warm one completed). */
  private move: (() => Promise<void>) | undefined;
  private consultation: Consultation | undefined;

  constructor(
    private readonly services: CallServices,
    private readonly host: TransferCall,
  ) {}

  /** Acts on a recorded transfer (the notice or the re-read; a request is taken up once). */
  async start(command: TransferCommand): Promise<void> {
    const caller = this.host.callerMedia();
    const connection = caller === undefined ? undefined : connectionOf(caller);
    // Between parties (or consulting already) there is nothing to transfer now; the re-read tries again.
    if (connection === undefined || this.consultation !== undefined || this.move !== undefined) return;
    if (!(await takeTransferRequest(this.services.pool, this.host.callId, command.id))) return;
    const transfer: Transfer = { target: command.target, warm: command.warm, actor: command.actor };
    if (!command.warm || 'queueId' in command.target) {
      if (!(await recordTransferred(this.services.pool, this.host.callId, { ...transfer, warm: false }))) return;
      const target = command.target;
      this.move = () => this.moveTo(target);
      connection.release();
      return;
    }
    await this.consult(connection, transfer);
  }

  /** `complete` or `cancel` of the warm transfer consulted now. */
  async finish(command: FinishTransferCommand): Promise<void> {
    const consultation = this.consultation;
    if (consultation === undefined || consultation.finish !== undefined) return;
    if (!(await takeTransferRequest(this.services.pool, this.host.callId, command.id))) return;
    if (command.finish === 'cancel') {
      consultation.finish = 'cancel';
      consultation.cancel.abort();
      return;
    }
    await this.complete(consultation);
  }

  /**
   * After the step's connection is over: the caller moves on as a transfer asked (again for each transfer of the
   * new party), or a warm transfer completes because the agent hung up. Resolves when there is nothing more to do.
   */
  async afterConnection(): Promise<void> {
    for (;;) {
      const consultation = this.consultation;
      // The agent hung up while consulting: the transfer completes (the caller goes to the target).
      if (consultation !== undefined && this.move === undefined && consultation.finish === undefined) {
        await this.complete(consultation);
      }
      const move = this.move;
      if (move === undefined || this.host.over.aborted) return;
      this.move = undefined;
      await move();
    }
  }

  private async consult(connection: Connection, transfer: Transfer): Promise<void> {
    const { pool, log } = this.services;
    const cancel = new AbortController();
    const stop = AbortSignal.any([this.host.over, cancel.signal]);
    await setConsulting(pool, this.host.callId, transfer);
    connection.consult(true);
    const agent = withPlay(connection.party);
    let reach: (answer: Consultation['answered']) => void = () => {};
    const consultation: Consultation = {
      transfer,
      connection,
      cancel,
      done: Promise.resolve(),
      reached: new Promise((resolve) => (reach = resolve)),
    };
    const aside: AsideRound = {
      connected: (leg, targetConnection) => {
        consultation.answered = { leg, connection: targetConnection };
        reach(consultation.answered);
      },
    };
    this.consultation = consultation;
    const target = transfer.target;
    consultation.done = (async () => {
      try {
        if ('memberId' in target) await this.host.ringMember(target.memberId, { caller: agent, aside, stop });
        else if ('e164' in target) await this.dialNumber(target.e164, { caller: agent, aside, stop });
      } catch (error) {
        log.warn({ err: error, callId: this.host.callId }, 'a warm transfer could not reach its target');
      } finally {
        agent.stop();
        reach(consultation.answered);
      }
      // The target's round is over: unless the transfer completed, the caller goes back to the agent.
      if (this.consultation === consultation && consultation.finish !== 'complete') {
        this.consultation = undefined;
        connection.consult(false);
        await setConsulting(pool, this.host.callId, null).catch(() => {});
      }
    })();
  }

  /** The caller bridged to the consulted target, the agent released; a target still ringing is waited for. */
  private async complete(consultation: Consultation): Promise<void> {
    consultation.finish = 'complete';
    const caller = this.host.callerMedia();
    const answered = consultation.answered;
    if (answered !== undefined && caller !== undefined) {
      // Joined at once; the agent's BYE follows, and the call goes on while the target's leg lasts.
      consultation.connection.end();
      await this.join(consultation, answered, caller);
      this.move = () => consultation.done;
    } else {
      this.move = async () => {
        // The agent is gone: the caller hears the music until the target answers (or gives up).
        const waiting = new AbortController();
        if (caller !== undefined) playLooped(caller, holdMusicLoop(), waiting.signal);
        const late = await consultation.reached;
        waiting.abort();
        if (late === undefined || caller === undefined || this.host.over.aborted) {
          if (this.consultation === consultation) this.consultation = undefined;
          await this.failed();
          return;
        }
        await this.join(consultation, late, caller);
        await consultation.done;
      };
    }
    consultation.connection.release();
  }

  /** The caller takes the agent's place in the consultation's connection; `call.transferred`, `call.connected`. */
  private async join(
    consultation: Consultation,
    answered: { leg: ConnectedLeg; connection: Connection },
    caller: CallerMedia,
  ): Promise<void> {
    if (consultation.joined === true) return;
    consultation.joined = true;
    // Over as a consultation: a new transfer may now move the caller on from the target.
    if (this.consultation === consultation) this.consultation = undefined;
    answered.connection.moveCaller(caller);
    const { pool } = this.services;
    if (await recordTransferred(pool, this.host.callId, consultation.transfer)) {
      await changeState(pool, this.host.callId, 'connected', { connectedLeg: answered.leg });
    }
  }

  /** Moves the caller to a blind transfer's target; not answered, the call ends with an apology. */
  private async moveTo(target: TransferTarget): Promise<void> {
    let answered: boolean;
    if ('memberId' in target) answered = (await this.host.ringMember(target.memberId, {})) === 'answered';
    else if ('e164' in target) answered = await this.dialNumber(target.e164, {});
    else answered = await this.host.transferToQueue(target.queueId);
    if (!answered) await this.failed();
  }

  /**
   * A `{e164}` target dialled out, `caller` (the caller's media, or the agent's in a warm transfer's consultation)
   * hearing ringback; answered, bridged to it until either side goes (true).
   */
  private async dialNumber(
    e164: string,
    options: { caller?: CallerMedia; aside?: AsideRound; stop?: AbortSignal },
  ): Promise<boolean> {
    const caller = options.caller ?? this.host.callerMedia();
    const stop = options.stop ?? this.host.over;
    if (stop.aborted || caller === undefined) return false;
    if (options.aside === undefined) await this.host.offering();
    const ringing = new AbortController();
    playLooped(caller, ringbackCadence(), ringing.signal);
    const leg = await this.host.dialTransfer(e164, stop).finally(() => ringing.abort());
    if (leg === undefined) return false;
    if (stop.aborted) {
      await hangUpDialled(this.services, leg);
      return false;
    }
    const { ended } = await connectParty(
      this.services,
      { callId: this.host.callId, caller, stop, aside: options.aside },
      { leg, who: { role: 'transfer', memberId: null, externalUserId: null } },
    );
    await ended;
    return true;
  }

  private async failed(): Promise<void> {
    if (this.host.over.aborted) return;
    await this.host.say(transferFailedPrompt);
    await this.host.hangup('transfer_failed');
  }
}

/** A party that may lack `play` (a browser) given one: frames paced at 20 ms through `send`. */
function withPlay(party: BridgeEndpoint): CallerMedia & { stop(): void } {
  const own = party as Partial<CallerMedia>;
  let playing: AbortController | undefined;
  const play: CallerMedia['play'] =
    own.play?.bind(party) ??
    ((pcm, signal) => {
      playing?.abort();
      const controller = new AbortController();
      playing = controller;
      const both = signal === undefined ? controller.signal : AbortSignal.any([signal, controller.signal]);
      return pace(frameCount(pcm), (index) => party.send(frameAt(pcm, index)), both);
    });
  return {
    onAudio: (listener) => party.onAudio(listener),
    send: (frame) => party.send(frame),
    ...(party.onDtmf === undefined ? {} : { onDtmf: party.onDtmf.bind(party) }),
    ...(party.sendDtmf === undefined ? {} : { sendDtmf: party.sendDtmf.bind(party) }),
    play,
    stop: () => playing?.abort(),
  };
}
