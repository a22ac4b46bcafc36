/**
 * What the routing steps ask of a call (`CallControl`), what they know of the plan run (`StepContext`), and the one
 * session a call offers to everything that runs on it (`CallSession`, with the view each part takes). `Call`
 * (call.ts) implements it on its legs; tests drive the steps with a double (test/helpers/call-control.ts).
 */
import type { RoutingPlanDefinition, RingTarget } from '../../core/routing/definition.ts';
import type { ScheduleHours } from '../../core/routing/opening-hours.ts';
import type { RtpEndpoint } from '../media/rtp.ts';
import type { AsideRound, CallerMedia } from './connection.ts';
import type { SipDialogLeg } from './legs/sip-dialog.ts';
import type { QueuedRound, RoundWinner } from './steps/ring/round.ts';

export type Prompt = { tts: string } | { audioUrl: string };

/** A person a `ring` step rings: every live device of theirs (a `cell` target is not a person's device). */
export type RingPerson = Exclude<RingTarget, { cell: string }>;

/**
 * One round of a `ring` step: these people's devices offered the call and these cells dialled at once, up to
 * `timeoutMs`. `answered`: a device or a cell took it and was bridged to the caller until either side hung up;
 * `unanswered`: nobody took it in time, nobody had a live device and no cell could be dialled (at once), or the caller
 * hung up.
 */
export type RingOutcome = 'answered' | 'unanswered';

/** A `queue` step's wait (steps/queue/wait.ts). */
export interface QueueStepRequest {
  queueId: string;
  maxWaitMs: number;
  offerCallback: boolean;
  /** The entry's priority in the queue (the step's, default 0). */
  priority: number;
}

/**
 * How a queue's wait ended: `answered` (an agent took the call and the bridge is over), `overflowed` (`maxWaitMs`
 * passed: the plan takes `overflow`), `ended` (the call is over: the caller hung up, or a callback ended it).
 */
export type QueueOutcome = 'answered' | 'overflowed' | 'ended';

export interface CallControl {
  /** Plays a prompt to the caller; resolves when it ends, early with 'key' when the caller pressed one. */
  play(prompt: Prompt, options?: { stopOnKey?: boolean }): Promise<{ key: string | undefined }>;
  /** Waits up to `timeoutMs` for one key (a key pressed during the prompt counts). */
  key(timeoutMs: number): Promise<string | undefined>;
  /** Records the caller until they hang up or `maxMs` passes. */
  voicemail(maxMs: number): Promise<void>;
  /** Dials `to`, rings up to `timeoutMs`; true once answered and bridged until either side hangs up. */
  forward(to: string, timeoutMs: number): Promise<boolean>;
  /**
   * Rings these targets for one round: people's live devices offered, cells dialled out through the called number's
   * carrier (the call numbers the rounds: `ringSeq`).
   */
  ring(targets: readonly RingTarget[], timeoutMs: number): Promise<RingOutcome>;
  /** Waits in a queue for an agent (hold music, offers to agents, overflow, callback). */
  queue(request: QueueStepRequest): Promise<QueueOutcome>;
  /** Ends the call from our side (BYE). */
  hangup(reason: string): Promise<void>;
  /** The call state for steps that change it (`voicemail`). */
  enter(state: 'voicemail' | 'routing'): Promise<void>;
  /** True once the caller hung up (the runner stops at the next step). */
  readonly ended: boolean;
  /** Something worth counting: a step type not built yet, a prompt that could not be played. */
  note(what: 'step_unavailable', detail: string): void;
}

/** The plan run a call is in: the version it started with (it never changes under a running call). */
export interface RunnerContext {
  callId: string;
  definition: RoutingPlanDefinition;
  schedule(id: string): Promise<ScheduleHours | undefined>;
  now(): Date;
}

/** What one step is given: the run, and its own id in the plan. */
export interface StepContext extends RunnerContext {
  stepId: string;
}

/**
 * A call as everything that runs on it sees it: its routing steps (`CallControl`), a queue's wait (`QueueCall`),
 * its transfers (`TransferCall`), supervisions (`SupervisedCall`) and ring rounds (`RingingCall`). `Call` (call.ts)
 * is the one implementation; each part is given the view it needs, and tests drive a part through a double of it.
 */
export interface CallSession extends CallControl {
  readonly callId: string;
  readonly workspaceId: string;
  /** The caller's number (a callback dials it; SIP devices are shown it). */
  readonly fromNumber: string;
  /** Aborts when the call is over (the caller hung up, a command, shutdown). */
  readonly over: AbortSignal;
  /** The caller's media now (undefined while no caller is on the line: a queue's callback waits). */
  callerMedia(): RtpEndpoint | undefined;
  /** Hears the keys of the caller on the line now; returns the unsubscribe. */
  onCallerKeys(listener: (digit: string) => void): () => void;
  /** Plays a text prompt to the caller (resolves when done, or at once when it cannot be made). */
  say(text: string): Promise<void>;
  /** Runs `hook` before the call's end is recorded, whatever ends it. */
  beforeEnd(hook: () => Promise<void>): void;
  /**
   * Rings one round of the call for an offer of a queue's entry (steps/ring/round.ts), the caller hearing `queued`'s
   * audio; returns who answered, not yet connected (the wait claims the entry for them and connects them).
   */
  ringOffer(targets: readonly RingTarget[], timeoutMs: number, queued: QueuedRound): Promise<RoundWinner | undefined>;
  /**
   * Rings a member's devices and connects the first to answer to `caller` (the caller's media by default, a warm
   * transfer's agent or a supervisor's port); `answered` once that connection is over.
   */
  ringMember(memberId: string, options: MemberRound): Promise<RingOutcome>;
  /** Dials a cell of a ring round out through the called number's carrier (cancelled when `signal` aborts). */
  dialCell(to: string, timeoutMs: number, signal: AbortSignal): Promise<SipDialogLeg | undefined>;
  /** Dials a transfer's number out through the called number's carrier, ringing `transferRingMs`. */
  dialTransfer(e164: string, signal: AbortSignal): Promise<SipDialogLeg | undefined>;
  /** Called with every offer notice of the call while a round waits; returns the unsubscribe. */
  onOfferChange(listener: () => void): () => void;
  /** The call is `offering` (a blind transfer's number rings). */
  offering(): Promise<void>;
  /** The caller waits in the queue as a transfer moved them; true once an agent answered (and the bridge is over). */
  transferToQueue(queueId: string): Promise<boolean>;
  /**
   * The goodbye, then our BYE to the caller; the call goes on without them (a callback). The caller hanging up
   * meanwhile does not end the call.
   */
  releaseCaller(goodbye?: string): Promise<void>;
  /** Dials `number` through the called number's carrier; answered, it is the call's caller leg (true). */
  dialBack(number: string, timeoutMs: number): Promise<boolean>;
  /** A dialled-back caller who is not wanted after all: BYE, the call goes on without them. */
  dropCaller(): Promise<void>;
}

/** A member's round beside the call's own connection: its caller side, its report, its own end. */
export interface MemberRound {
  caller?: CallerMedia;
  aside?: AsideRound;
  /** Stops the round (default: the call being over). */
  stop?: AbortSignal;
}

/** What a `queue` step's wait needs of its call (steps/queue/wait.ts). */
export type QueueCall = Pick<
  CallSession,
  | 'callId'
  | 'workspaceId'
  | 'fromNumber'
  | 'over'
  | 'callerMedia'
  | 'onCallerKeys'
  | 'ringOffer'
  | 'beforeEnd'
  | 'say'
  | 'releaseCaller'
  | 'dialBack'
  | 'dropCaller'
  | 'hangup'
>;

/** What a transfer needs of its call (transfer.ts). */
export type TransferCall = Pick<
  CallSession,
  'callId' | 'over' | 'callerMedia' | 'ringMember' | 'dialTransfer' | 'offering' | 'transferToQueue' | 'say' | 'hangup'
>;

/** What a supervision needs of its call (supervision.ts). */
export type SupervisedCall = Pick<CallSession, 'callId' | 'over' | 'callerMedia' | 'ringMember'>;

/** What a ring round needs of its call beyond the round's own data (steps/ring/round.ts). */
export type RingingCall = Pick<CallSession, 'callId' | 'workspaceId' | 'fromNumber' | 'dialCell' | 'onOfferChange'>;
