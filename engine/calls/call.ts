/**
 * A call in progress on this engine (docs/architecture.md, "A call, its legs and its steps"): its record, its state,
 * its legs (the caller's, and a party's while connected), and its end, which happens once whatever asks for it (the
 * caller's BYE, the plan, a call command from the API, shutdown). It is the `CallControl` the routing steps drive:
 * prompts and keys on the caller's leg, voicemail, a forward, ring rounds, a queue's wait, hangup. How a call
 * arrives is not its business (admission.ts for an INVITE from a carrier). A queue's callback lets the caller's leg
 * go while the call waits on, and later dials the caller back: that leg is then the caller's (`caller` changes; a
 * call without one plays nothing and its BYE goes nowhere). A transfer (transfer.ts) moves the caller on once the
 * step's connection is over (`afterConnection`).
 */
import { type CallRow, changeState, endCall, setLegState } from '../../core/calls/calls.ts';
import type { RingTarget, RoutingPlanDefinition } from '../../core/routing/definition.ts';
import { scheduleHours } from '../../core/routing/schedules.ts';
import type { FinishTransferCommand, SuperviseCommand, TransferCommand } from '../../core/calls/commands.ts';
import type { RtpEndpoint } from '../media/rtp.ts';
import type { CallControl, Prompt, QueueCall, QueueOutcome, QueueStepRequest, RingOutcome } from './control.ts';
import { connectParty } from './connect-party.ts';
import { type DialRole, dialOut, hangUpDialled } from './dial-out.ts';
import { type AsideRound, type CallerMedia, connectionOf, holdSignal } from './connection.ts';
import { promptAudio } from './prompt-audio.ts';
import { Supervisions } from './supervision.ts';
import { type TransferHost, transferQueueRequest, Transfers, transferRingMs } from './transfer.ts';
import type { Leg } from './leg.ts';
import type { SipDialogLeg } from './legs/sip-dialog.ts';
import { waitInQueue } from './steps/queue/wait.ts';
import { ringRound, type RoundContext } from './steps/ring/round.ts';
import { ringAndConnect } from './steps/ring/winner.ts';
import { runPlan } from './runner.ts';
import type { CallServices } from './services.ts';
import { recordVoicemail } from './voicemail-recording.ts';

/** A ring round's own caller side and end (a warm transfer's consultation, a supervisor), or a queue's offer. */
type RoundOptions = Pick<RoundContext, 'queued' | 'aside'> & { caller?: CallerMedia; gone?: AbortSignal };

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
  /** The caller's leg now: none while a queue's callback waits, the dialled one once the caller is called back. */
  private caller: Leg | undefined;
  /** Run before the end is recorded (a queue's entry leaving). */
  private readonly endHooks: Array<() => Promise<void>> = [];
  /** Transfers and supervisors' legs asked of the call (transfer.ts, supervision.ts). */
  private readonly transfers: Transfers;
  private readonly supervisions: Supervisions;

  constructor(
    readonly row: CallRow,
    /** The carrier of the called number: forwards leave through it. */
    private readonly carrierName: string,
    /** The caller's leg, answered. */
    private readonly firstLeg: Leg,
    private readonly services: CallServices,
    /** Told once, when the call ends (the registry of active calls forgets it). */
    private readonly onEnd: (call: Call) => void,
  ) {
    this.attach(firstLeg);
    const host: TransferHost = {
      callId: row.id,
      gone: this.gone.signal,
      callerMedia: () => this.caller?.media,
      ringMember: (memberId, options) => this.ringWith([{ memberId }], transferRingMs, options),
      dial: (e164, signal) => this.dial(e164, 'transfer', transferRingMs, signal),
      offering: async () => void (await changeState(services.pool, row.id, 'offering')),
      waitInQueue: async (queueId) => (await this.waitInQueue(transferQueueRequest(queueId))) === 'answered',
      say: async (text) => void (await this.play({ tts: text })),
      hangup: (reason) => this.hangup(reason),
    };
    this.transfers = new Transfers(services, host);
    this.supervisions = new Supervisions(services, host);
  }

  /** `leg` is the caller's from now: its keys are the call's, its hangup ends the call. */
  private attach(leg: Leg): void {
    this.caller = leg;
    // Listening for keys from the first packet on: a caller may press one right after the ACK.
    leg.onDtmf((digit) => {
      if (this.caller !== leg) return;
      const waiter = this.keyWaiter;
      if (waiter !== undefined) {
        this.keyWaiter = undefined;
        waiter(digit);
      } else this.keys.push(digit);
    });
    leg.onHangup(() => {
      if (this.caller === leg) void this.finish('caller_hangup');
    });
  }

  /** The caller's media (a step that needs it runs only while the caller is on the line). */
  private get media(): RtpEndpoint {
    if (this.caller === undefined) throw new Error('the caller is not on the line');
    return this.caller.media;
  }

  /** The call is answered: it runs the plan version it started with, and hangs up if the plan fails. */
  async run(definition: RoutingPlanDefinition): Promise<void> {
    const { pool, log, clock } = this.services;
    const row = this.row;
    // The answer is recorded before anything else of the call: a caller who hangs up at once still ends a call that
    // was answered (`finish` waits for this), so its call.ended says routing, not initiated.
    this.answerRecorded = (async () => {
      await setLegState(pool, this.firstLeg.id, 'answered');
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
    const caller = this.caller;
    if (this.ended || caller === undefined) return { key: undefined };
    const pcm = await promptAudio(this.services, this.row.id, prompt);
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
      unsubscribe = caller.onDtmf((digit) => {
        pressed ??= digit;
        stop.abort();
      });
    }
    try {
      await caller.media.play(pcm, stop.signal);
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
    await recordVoicemail(this.services, this.row, this.media, this.gone.signal, maxMs);
  }

  /**
   * Dials `to` through the called number's carrier and, once answered, bridges the two legs until either side hangs
   * up (true). Not answered within `timeoutMs`, refused, or impossible (no carrier, a carrier named only by a CIDR
   * range): false, and the call goes on with the step's `next`.
   */
  async forward(to: string, timeoutMs: number): Promise<boolean> {
    if (this.ended) return false;
    const leg = await this.dial(to, 'forward', timeoutMs, this.gone.signal);
    if (leg === undefined) return false;
    const { ended } = await connectParty(
      this.services,
      { callId: this.row.id, caller: this.media, gone: this.gone.signal },
      { leg, who: { role: 'forward' } },
    );
    await ended;
    await this.transfers.afterConnection();
    return true;
  }

  /** Dials `to` from the called number through its carrier (dial-out.ts); what cannot be dialled is noted. */
  private dial(to: string, role: DialRole, timeoutMs: number, signal: AbortSignal): Promise<SipDialogLeg | undefined> {
    return dialOut(this.services, {
      callId: this.row.id,
      workspaceId: this.row.workspace_id,
      from: this.row.to_number,
      carrierName: this.carrierName,
      to,
      role,
      timeoutMs,
      signal,
      unavailable: (detail) => this.note('step_unavailable', detail),
    });
  }

  /**
   * One round of a `ring` step (steps/ring/round.ts): the people's live devices offered the call and the cells
   * dialled out through the called number's carrier, ringback to the caller, and the first to answer connected to the
   * caller until either side hangs up (`answered`).
   */
  async ring(targets: readonly RingTarget[], timeoutMs: number): Promise<RingOutcome> {
    const outcome = await this.ringWith(targets, timeoutMs, {});
    if (outcome === 'answered') await this.transfers.afterConnection();
    return outcome;
  }

  /** One round (see `ring`); `caller` and `aside` ring for a warm transfer's consultation, `gone` ends it early. */
  private async ringWith(
    targets: readonly RingTarget[],
    timeoutMs: number,
    options: { caller?: CallerMedia; aside?: AsideRound; gone?: AbortSignal },
  ): Promise<RingOutcome> {
    if (this.ended) return 'unanswered';
    return ringAndConnect(this.services, this.round(options), targets, timeoutMs);
  }

  /** The next ring round of the call: its number (`ringSeq`), what it rings to and how long it may last. */
  private round(options: RoundOptions): RoundContext {
    this.ringSeq += 1;
    const { queued, aside } = options;
    // The caller's media is read when the round needs it: a queue's callback has dialled the caller by then.
    const media = () => options.caller ?? this.media;
    return {
      callId: this.row.id,
      workspaceId: this.row.workspace_id,
      ringSeq: this.ringSeq,
      get caller() {
        return media();
      },
      gone: options.gone ?? this.gone.signal,
      dialCell: (to, ringMs, signal) => this.dial(to, 'cell', ringMs, signal),
      callerNumber: this.row.from_number,
      onOfferChange: (listener) => {
        this.offerListeners.add(listener);
        return () => this.offerListeners.delete(listener);
      },
      ...(queued === undefined ? {} : { queued }),
      ...(aside === undefined ? {} : { aside }),
    };
  }

  /** A `queue` step's wait (steps/queue/wait.ts): answered and connected, overflowed, or ended. */
  async queue(request: QueueStepRequest): Promise<QueueOutcome> {
    const outcome = await this.waitInQueue(request);
    if (outcome === 'answered') await this.transfers.afterConnection();
    return outcome;
  }

  private async waitInQueue(request: QueueStepRequest): Promise<QueueOutcome> {
    if (this.ended) return 'ended';
    const queueCall: QueueCall = {
      callId: this.row.id,
      workspaceId: this.row.workspace_id,
      fromNumber: this.row.from_number,
      caller: () => this.media,
      gone: this.gone.signal,
      onDtmf: (listener) => {
        const leg = this.caller;
        return leg === undefined ? () => {} : leg.onDtmf(listener);
      },
      ring: async (targets, timeoutMs, queued) =>
        this.ended ? undefined : ringRound(this.services, this.round({ queued }), targets, timeoutMs),
      beforeEnd: (hook) => void this.endHooks.push(hook),
      say: async (text) => void (await this.play({ tts: text })),
      releaseCaller: (goodbye) => this.releaseCaller(goodbye),
      dialBack: async (number, timeoutMs) => {
        const leg = await this.dial(number, 'callback', timeoutMs, this.gone.signal);
        if (leg === undefined) return false;
        this.dialledBack(leg);
        return true;
      },
      dropCaller: () => this.releaseCaller(),
      hangup: (reason) => this.hangup(reason),
    };
    const outcome = await waitInQueue(this.services, queueCall, request);
    // Keys pressed while waiting were the queue's (its callback key), not typed ahead for the next step.
    this.keys.length = 0;
    return outcome;
  }

  /** A dialled-back caller is the caller from now (until the call ends or lets them go). */
  private dialledBack(leg: SipDialogLeg): void {
    if (this.ended) {
      void hangUpDialled(this.services, leg);
      return;
    }
    this.attach(leg);
  }

  /** The goodbye if any, then our BYE to the caller; the call goes on without them (a queue's callback). */
  private async releaseCaller(goodbye?: string): Promise<void> {
    const leg = this.caller;
    if (leg === undefined) return;
    // Not the caller's any more: their BYE during the goodbye, or crossing ours, does not end the call.
    this.caller = undefined;
    if (goodbye !== undefined)
      await leg.media.play(await promptAudio(this.services, this.row.id, { tts: goodbye }), this.gone.signal);
    await leg.bye(this.gone.signal);
    await this.closeLeg(leg);
  }

  /** The leg closed (its media, a dialled leg's carrier account), its record ended with its packet counts. */
  private async closeLeg(leg: Leg): Promise<void> {
    const counts = leg.close();
    if (counts.rtp !== undefined) this.services.metrics.countRtp(counts.rtp);
    await setLegState(this.services.pool, leg.id, 'ended', counts);
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

  /** Holds or resumes the caller's connection (connection.ts, its re-INVITEs); unbridged, there is nothing to hold. */
  hold(on: boolean): boolean {
    const connection = this.caller === undefined ? undefined : connectionOf(this.caller.media);
    if (this.ended || connection === undefined) return false;
    connection.hold(on, holdSignal(this.services, this.row.id, this.caller, 'sendonly'));
    return true;
  }

  /** A transfer, or the end of a warm one (transfer.ts); nothing while the call is not connected to a party. */
  async transfer(command: TransferCommand | FinishTransferCommand): Promise<void> {
    if (this.ended) return;
    await (command.action === 'transfer' ? this.transfers.start(command) : this.transfers.finish(command));
  }

  /** A supervisor's leg, or its new mode (supervision.ts); nothing while the call is not connected to a party. */
  async supervise(command: SuperviseCommand): Promise<void> {
    if (!this.ended) await this.supervisions.supervise(command);
  }

  note(what: 'step_unavailable', detail: string): void {
    this.services.metrics.stepsUnavailable.inc();
    this.services.log.warn({ callId: this.row.id, what }, detail);
  }

  /** Our side ends the call: BYE (once the caller has acknowledged the answer), then the record. */
  async hangup(reason: string): Promise<void> {
    if (this.ended) return;
    await this.caller?.bye(this.gone.signal);
    if (this.ended) return;
    await this.finish(reason);
  }

  /** The caller hung up (BYE) or the call cannot go on. */
  async finish(reason: string): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    this.gone.abort();
    const leg = this.caller;
    const closed = leg === undefined ? Promise.resolve() : this.closeLeg(leg);
    this.onEnd(this);
    // A failure to record the answer is the run's to report; the end is recorded either way.
    await this.answerRecorded.catch(() => {});
    await closed;
    for (const hook of this.endHooks.splice(0)) {
      await hook().catch((error: unknown) =>
        this.services.log.warn({ err: error, callId: this.row.id }, 'could not record what the end changes'),
      );
    }
    const ended = await endCall(this.services.pool, this.row.id, reason, this.taken);
    if (ended !== undefined) this.services.metrics.ended(reason);
  }
}
