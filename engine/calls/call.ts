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
import { CallerLine } from './caller-line.ts';
import type { CallSession, MemberRound, Prompt, QueueOutcome, QueueStepRequest, RingOutcome } from './control.ts';
import { connectParty } from './connect-party.ts';
import { type DialRole, dialOut, hangUpDialled } from './dial-out.ts';
import { connectionOf, holdSignal } from './connection.ts';
import { promptAudio } from './prompt-audio.ts';
import { Supervisions } from './supervision.ts';
import { transferQueueRequest, Transfers, transferRingMs } from './transfer.ts';
import type { Leg } from './leg.ts';
import type { SipDialogLeg } from './legs/sip-dialog.ts';
import { waitInQueue } from './steps/queue/wait.ts';
import { type QueuedRound, ringRound, type RoundContext, type RoundWinner } from './steps/ring/round.ts';
import { ringAndConnect } from './steps/ring/winner.ts';
import { runPlan } from './runner.ts';
import type { CallServices } from './services.ts';
import { recordVoicemail } from './voicemail-recording.ts';

export class Call implements CallSession {
  ended = false;
  private readonly ending = new AbortController();
  readonly over = this.ending.signal;
  readonly callId: string;
  readonly workspaceId: string;
  readonly fromNumber: string;
  /** The answer's records (caller leg answered, state routing), once `run` started writing them. */
  private answerRecorded: Promise<void> = Promise.resolve();
  /** The caller's leg now, its keys and prompts. */
  private readonly line = new CallerLine(this.over);
  /** The plan steps taken so far (the runner adds each as it starts); written with the call's end. */
  private readonly taken: string[] = [];
  /** The ring rounds so far (`ringSeq` is unique within the call, across its ring steps). */
  private ringSeq = 0;
  /** Told of every change of this call's offers (a ring round waiting for an accept). */
  private readonly offerListeners = new Set<() => void>();
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
    this.callId = row.id;
    this.workspaceId = row.workspace_id;
    this.fromNumber = row.from_number;
    this.attach(firstLeg);
    this.transfers = new Transfers(services, this);
    this.supervisions = new Supervisions(services, this);
  }

  /** `leg` is the caller's from now: its keys are the call's, its hangup ends the call. */
  private attach(leg: Leg): void {
    this.line.attach(leg, () => void this.finish('caller_hangup'));
  }

  /** The caller's media (a step that needs it runs only while the caller is on the line). */
  private get media(): RtpEndpoint {
    const media = this.callerMedia();
    if (media === undefined) throw new Error('the caller is not on the line');
    return media;
  }

  callerMedia(): RtpEndpoint | undefined {
    return this.line.current?.media;
  }

  onCallerKeys(listener: (digit: string) => void): () => void {
    return this.line.onKeys(listener);
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
    if (this.ended || this.line.current === undefined) return { key: undefined };
    const pcm = await promptAudio(this.services, this.row.id, prompt);
    return { key: await this.line.play(pcm, options.stopOnKey === true) };
  }

  async say(text: string): Promise<void> {
    await this.play({ tts: text });
  }

  key(timeoutMs: number): Promise<string | undefined> {
    return this.ended ? Promise.resolve(undefined) : this.line.key(timeoutMs);
  }

  async voicemail(maxMs: number): Promise<void> {
    if (this.ended) return;
    await recordVoicemail(this.services, this.row, this.media, this.over, maxMs);
  }

  /**
   * Dials `to` through the called number's carrier and, once answered, connects it to the caller until either side
   * hangs up (true). Not answered within `timeoutMs`, refused, or impossible (no carrier, a carrier named only by a
   * CIDR range): false, and the call goes on with the step's `next`.
   */
  async forward(to: string, timeoutMs: number): Promise<boolean> {
    if (this.ended) return false;
    const leg = await this.dial(to, 'forward', timeoutMs, this.over);
    if (leg === undefined) return false;
    const side = { callId: this.callId, caller: this.media, stop: this.over };
    await (
      await connectParty(this.services, side, { leg, who: { role: 'forward' } })
    ).ended;
    await this.transfers.afterConnection();
    return true;
  }

  /** Dials `to` from the called number through its carrier (dial-out.ts); what cannot be dialled is noted. */
  private dial(to: string, role: DialRole, timeoutMs: number, signal: AbortSignal): Promise<SipDialogLeg | undefined> {
    return dialOut(this.services, {
      callId: this.callId,
      workspaceId: this.workspaceId,
      from: this.row.to_number,
      carrierName: this.carrierName,
      to,
      role,
      timeoutMs,
      signal,
      unavailable: (detail) => this.note('step_unavailable', detail),
    });
  }

  dialCell(to: string, timeoutMs: number, signal: AbortSignal): Promise<SipDialogLeg | undefined> {
    return this.dial(to, 'cell', timeoutMs, signal);
  }

  dialTransfer(e164: string, signal: AbortSignal): Promise<SipDialogLeg | undefined> {
    return this.dial(e164, 'transfer', transferRingMs, signal);
  }

  /**
   * One round of a `ring` step (steps/ring/round.ts): the people's live devices offered the call and the cells
   * dialled out through the called number's carrier, ringback to the caller, and the first to answer connected to the
   * caller until either side hangs up (`answered`).
   */
  async ring(targets: readonly RingTarget[], timeoutMs: number): Promise<RingOutcome> {
    if (this.ended) return 'unanswered';
    const outcome = await ringAndConnect(this.services, this.round({}), targets, timeoutMs);
    if (outcome === 'answered') await this.transfers.afterConnection();
    return outcome;
  }

  async ringMember(memberId: string, options: MemberRound): Promise<RingOutcome> {
    if (this.ended) return 'unanswered';
    return ringAndConnect(this.services, this.round(options), [{ memberId }], transferRingMs);
  }

  async ringOffer(
    targets: readonly RingTarget[],
    timeoutMs: number,
    queued: QueuedRound,
  ): Promise<RoundWinner | undefined> {
    return this.ended ? undefined : ringRound(this.services, this.round({ queued }), targets, timeoutMs);
  }

  onOfferChange(listener: () => void): () => void {
    this.offerListeners.add(listener);
    return () => this.offerListeners.delete(listener);
  }

  /** The next ring round of the call: its number (`ringSeq`), what it rings to and how long it may last. */
  private round(options: MemberRound & { queued?: QueuedRound }): RoundContext {
    this.ringSeq += 1;
    const { queued, aside } = options;
    // The caller's media is read when the round needs it: a queue's callback has dialled the caller by then.
    const media = () => options.caller ?? this.media;
    return {
      call: this,
      callId: this.callId,
      ringSeq: this.ringSeq,
      get caller() {
        return media();
      },
      stop: options.stop ?? this.over,
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

  async transferToQueue(queueId: string): Promise<boolean> {
    return (await this.waitInQueue(transferQueueRequest(queueId))) === 'answered';
  }

  private async waitInQueue(request: QueueStepRequest): Promise<QueueOutcome> {
    if (this.ended) return 'ended';
    const outcome = await waitInQueue(this.services, this, request);
    // Keys pressed while waiting were the queue's (its callback key), not typed ahead for the next step.
    this.line.forgetKeys();
    return outcome;
  }

  beforeEnd(hook: () => Promise<void>): void {
    this.endHooks.push(hook);
  }

  async offering(): Promise<void> {
    await changeState(this.services.pool, this.callId, 'offering');
  }

  async dialBack(number: string, timeoutMs: number): Promise<boolean> {
    const leg = await this.dial(number, 'callback', timeoutMs, this.over);
    if (leg === undefined) return false;
    // A dialled-back caller is the caller from now (until the call ends or lets them go).
    if (this.ended) void hangUpDialled(this.services, leg);
    else this.attach(leg);
    return true;
  }

  dropCaller(): Promise<void> {
    return this.releaseCaller();
  }

  /** The goodbye if any, then our BYE to the caller; the call goes on without them (a queue's callback). */
  async releaseCaller(goodbye?: string): Promise<void> {
    // Not the caller's any more: their BYE during the goodbye, or crossing ours, does not end the call.
    const leg = this.line.detach();
    if (leg === undefined) return;
    if (goodbye !== undefined)
      await leg.media.play(await promptAudio(this.services, this.row.id, { tts: goodbye }), this.over);
    await leg.bye(this.over);
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
    const leg = this.line.current;
    const connection = leg === undefined ? undefined : connectionOf(leg.media);
    if (this.ended || connection === undefined) return false;
    connection.hold(on, holdSignal(this.services, this.row.id, leg, 'sendonly'));
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
    await this.line.current?.bye(this.over);
    if (this.ended) return;
    await this.finish(reason);
  }

  /** The caller hung up (BYE) or the call cannot go on. */
  async finish(reason: string): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    this.ending.abort();
    const leg = this.line.current;
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
