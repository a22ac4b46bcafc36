/**
 * A call in progress on this engine (docs/architecture.md, "A call, its legs and its steps"): its record, its state,
 * its legs (the caller's, and a forward's while bridged), and its end, which happens once whatever asks for it (the
 * caller's BYE, the plan, a call command from the API, shutdown). It is the `CallControl` the routing steps drive:
 * prompts and keys on the caller's leg, voicemail, a forward dialled out and bridged, hangup. How a call arrives is
 * not its business (admission.ts for an INVITE from a carrier).
 */
import { type CallRow, changeState, endCall, setLegState } from '../../core/calls/calls.ts';
import type { RingTarget, RoutingPlanDefinition } from '../../core/routing/definition.ts';
import { scheduleHours } from '../../core/routing/schedules.ts';
import type { CallControl, Prompt, RingOutcome } from './control.ts';
import { bridgeDialled, dialOut } from './dial-out.ts';
import type { Leg } from './leg.ts';
import { ringRound } from './ringing.ts';
import { runPlan } from './runner.ts';
import type { CallServices } from './services.ts';
import { recordVoicemail } from './voicemail-recording.ts';

export class Call implements CallControl {
  ended = false;
  private readonly gone = new AbortController();
  /** The answer's records (caller leg answered, state routing), once `run` started writing them. */
  private answerRecorded: Promise<void> = Promise.resolve();
  private readonly keys: string[] = [];
  private keyWaiter: ((key: string | undefined) => void) | undefined;
  /** The plan steps taken so far (the runner adds each as it starts); written with the call's end. */
  private readonly taken: string[] = [];
  /** The ring rounds so far (`ringSeq` is unique within the call, across its ring steps). */
  private ringSeq = 0;
  /** Told of every change of this call's offers (a ring round waiting for an accept). */
  private readonly offerListeners = new Set<() => void>();

  constructor(
    readonly row: CallRow,
    /** The carrier of the called number: forwards leave through it. */
    private readonly carrierName: string,
    /** The caller's leg, answered. */
    private readonly caller: Leg,
    private readonly services: CallServices,
    /** Told once, when the call ends (the registry of active calls forgets it). */
    private readonly onEnd: (call: Call) => void,
  ) {
    // Listening for keys from the first packet on: a caller may press one right after the ACK.
    caller.onDtmf((digit) => {
      const waiter = this.keyWaiter;
      if (waiter !== undefined) {
        this.keyWaiter = undefined;
        waiter(digit);
      } else this.keys.push(digit);
    });
    caller.onHangup(() => void this.finish('caller_hangup'));
  }

  get signal(): AbortSignal {
    return this.gone.signal;
  }

  /** The call is answered: it runs the plan version it started with, and hangs up if the plan fails. */
  async run(definition: RoutingPlanDefinition): Promise<void> {
    const { pool, log, clock } = this.services;
    const row = this.row;
    // The answer is recorded before anything else of the call: a caller who hangs up at once still ends a call that
    // was answered (`finish` waits for this), so its call.ended says routing, not initiated.
    this.answerRecorded = (async () => {
      await setLegState(pool, this.caller.id, 'answered');
      await changeState(pool, row.id, 'routing', { answered: true });
    })();
    await this.answerRecorded;
    await runPlan(
      {
        callId: row.id,
        definition,
        schedule: (id) => scheduleHours(pool, row.workspace_id, id),
        now: () => clock?.now() ?? new Date(),
      },
      this,
      this.taken,
    ).catch(async (error: unknown) => {
      log.warn({ err: error, callId: row.id }, 'routing plan failed; ending the call');
      await this.hangup('plan_error');
    });
  }

  async play(prompt: Prompt, options: { stopOnKey?: boolean } = {}): Promise<{ key: string | undefined }> {
    if (this.ended) return { key: undefined };
    let pcm: Int16Array;
    try {
      pcm = await this.services.prompts.pcm(prompt);
    } catch (error) {
      // A prompt that cannot be produced: a second of silence, and the call goes on (docs/calls.md).
      this.services.metrics.promptFailures.inc();
      this.services.log.warn({ callId: this.row.id, err: error }, 'prompt could not be produced; silence');
      pcm = new Int16Array(8000);
    }
    const stop = new AbortController();
    const onGone = () => stop.abort();
    this.gone.signal.addEventListener('abort', onGone, { once: true });
    let pressed: string | undefined;
    let unsubscribe: (() => void) | undefined;
    if (options.stopOnKey === true) {
      // A key pressed before the prompt (typed ahead) answers it at once.
      const early = this.keys.shift();
      if (early !== undefined) {
        this.gone.signal.removeEventListener('abort', onGone);
        return { key: early };
      }
      unsubscribe = this.caller.onDtmf((digit) => {
        pressed ??= digit;
        stop.abort();
      });
    }
    try {
      await this.caller.media.play(pcm, stop.signal);
    } finally {
      unsubscribe?.();
      this.gone.signal.removeEventListener('abort', onGone);
    }
    if (pressed !== undefined) {
      // The key that cut the prompt is the answer; the queued copy is not a second press.
      const index = this.keys.indexOf(pressed);
      if (index !== -1) this.keys.splice(index, 1);
    }
    return { key: pressed };
  }

  key(timeoutMs: number): Promise<string | undefined> {
    if (this.ended) return Promise.resolve(undefined);
    const queued = this.keys.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return new Promise((resolve) => {
      const timer = setTimeout(() => finish(undefined), timeoutMs);
      const onGone = () => finish(undefined);
      const finish = (key: string | undefined) => {
        clearTimeout(timer);
        this.gone.signal.removeEventListener('abort', onGone);
        if (this.keyWaiter === finish) this.keyWaiter = undefined;
        resolve(key);
      };
      this.gone.signal.addEventListener('abort', onGone, { once: true });
      this.keyWaiter = finish;
    });
  }

  async voicemail(maxMs: number): Promise<void> {
    if (this.ended) return;
    await recordVoicemail(this.services, this.row, this.caller.media, this.gone.signal, maxMs);
  }

  /**
   * Dials `to` through the called number's carrier and, once answered, bridges the two legs until either side hangs
   * up (true). Not answered within `timeoutMs`, refused, or impossible (no carrier, a carrier named only by a CIDR
   * range): false, and the call goes on with the step's `next`.
   */
  async forward(to: string, timeoutMs: number): Promise<boolean> {
    if (this.ended) return false;
    const dialled = await dialOut(this.services, {
      callId: this.row.id,
      from: this.row.to_number,
      carrierName: this.carrierName,
      to,
      timeoutMs,
      signal: this.gone.signal,
      unavailable: (detail) => this.note('step_unavailable', detail),
    });
    if (dialled === undefined) return false;
    await bridgeDialled(
      this.services,
      { callId: this.row.id, caller: this.caller.media, gone: this.gone.signal },
      dialled,
      { role: 'forward' },
    );
    return true;
  }

  /**
   * One round of a `ring` step (ringing.ts): the people's live devices offered the call and the cells dialled out
   * through the called number's carrier, ringback to the caller, and the first to answer bridged to the caller until
   * either side hangs up (`answered`).
   */
  async ring(targets: readonly RingTarget[], timeoutMs: number): Promise<RingOutcome> {
    if (this.ended) return 'unanswered';
    this.ringSeq += 1;
    return ringRound(
      this.services,
      {
        callId: this.row.id,
        workspaceId: this.row.workspace_id,
        ringSeq: this.ringSeq,
        caller: this.caller.media,
        gone: this.gone.signal,
        dialCell: (to, ringMs, signal) =>
          dialOut(this.services, {
            callId: this.row.id,
            from: this.row.to_number,
            carrierName: this.carrierName,
            to,
            role: 'cell',
            timeoutMs: ringMs,
            signal,
            unavailable: (detail) => this.note('step_unavailable', detail),
          }),
        callerNumber: this.row.from_number,
        onOfferChange: (listener) => {
          this.offerListeners.add(listener);
          return () => this.offerListeners.delete(listener);
        },
      },
      targets,
      timeoutMs,
    );
  }

  /**
   * An offer of this call changed (a notice on `switchboard_offers`), or notices may have been missed (the engine's
   * listener reconnected): a ringing round reads the call's offers again.
   */
  offersChanged(): void {
    for (const listener of this.offerListeners) listener();
  }

  async enter(state: 'voicemail' | 'routing'): Promise<void> {
    if (this.ended) return;
    await changeState(this.services.pool, this.row.id, state);
  }

  note(what: 'step_unavailable', detail: string): void {
    this.services.metrics.stepsUnavailable.inc();
    this.services.log.warn({ callId: this.row.id, what }, detail);
  }

  /** Our side ends the call: BYE (once the caller has acknowledged the answer), then the record. */
  async hangup(reason: string): Promise<void> {
    if (this.ended) return;
    await this.caller.bye(this.gone.signal);
    if (this.ended) return;
    await this.finish(reason);
  }

  /** The caller hung up (BYE) or the call cannot go on. */
  async finish(reason: string): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    this.gone.abort();
    const media = this.caller.media;
    const stats = media.stats;
    this.services.metrics.countRtp(stats);
    media.close();
    this.onEnd(this);
    // A failure to record the answer is the run's to report; the end is recorded either way.
    await this.answerRecorded.catch(() => {});
    await setLegState(this.services.pool, this.caller.id, 'ended', { in: stats.packetsIn, out: stats.packetsOut });
    const ended = await endCall(this.services.pool, this.row.id, reason, this.taken);
    if (ended !== undefined) this.services.metrics.ended(reason);
  }
}
