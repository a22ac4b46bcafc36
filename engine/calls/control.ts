/**
 * What the routing steps ask of a call (`CallControl`), and what they know of the plan run (`StepContext`). `Call`
 * (call.ts) implements `CallControl` on its legs; tests drive the steps with a double (test/helpers/call-control.ts).
 */
import type { RoutingPlanDefinition, RingTarget } from '../../core/routing/definition.ts';
import type { ScheduleHours } from '../../core/routing/opening-hours.ts';
import type { RtpEndpoint } from '../media/rtp.ts';
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

/** What a `queue` step's wait needs of its call (steps/queue/wait.ts; call.ts implements it). */
export interface QueueCall {
  callId: string;
  workspaceId: string;
  /** The caller's number (a callback dials it). */
  fromNumber: string;
  /** The caller's media now. */
  caller(): RtpEndpoint;
  /** Aborts when the call ends. */
  gone: AbortSignal;
  onDtmf(listener: (digit: string) => void): () => void;
  /**
   * Rings one round of the call for an offer of the entry (steps/ring/round.ts), the caller hearing `queued`'s audio;
   * returns who answered, not yet connected (the wait claims the entry for them and connects them), or undefined.
   */
  ring(targets: readonly RingTarget[], timeoutMs: number, queued: QueuedRound): Promise<RoundWinner | undefined>;
  /** Runs `hook` before the call's end is recorded, whatever ends it. */
  beforeEnd(hook: () => Promise<void>): void;
  /** Plays a text prompt to the caller (resolves when done, or at once when it cannot be made). */
  say(text: string): Promise<void>;
  /**
   * The goodbye, then our BYE to the caller; the call goes on without them (a callback). The caller hanging up
   * meanwhile does not end the call.
   */
  releaseCaller(goodbye?: string): Promise<void>;
  /** Dials `number` through the called number's carrier; answered, it is the call's caller leg (true). */
  dialBack(number: string, timeoutMs: number): Promise<boolean>;
  /** A dialled-back caller who is not wanted after all: BYE, the call goes on without them. */
  dropCaller(): Promise<void>;
  hangup(reason: string): Promise<void>;
}
