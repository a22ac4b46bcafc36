/**
 * A `CallControl` test double for the routing steps (engine/calls/steps/): no SIP, no RTP, no timers. The caller's
 * keys are a script; what the steps asked (prompts played, key waits, forwards, ring rounds, queue waits, recordings,
 * state changes, notes, hangups) is recorded in order for the test to check.
 */
import type { RingTarget } from '../../core/routing/definition.ts';
import type { CallControl, Prompt, QueueOutcome, QueueStepRequest, RingOutcome } from '../../engine/calls/control.ts';

/** One key wait of the script: a key pressed while waiting, a key pressed during the prompt, or none (timeout). */
export type ScriptedKey = string | { duringPrompt: string } | undefined;

export interface CallScript {
  /** The caller's keys, one entry per prompt-and-wait, in order; once exhausted the caller presses nothing. */
  keys?: ScriptedKey[];
  /** Whether each forward is answered (in order); not listed: not answered. */
  forwardsAnswered?: boolean[];
  /** The caller hangs up during the prompt with this index (0 is the first prompt played). */
  hangsUpDuringPrompt?: number;
  /** The caller hangs up while being recorded. */
  hangsUpDuringRecording?: boolean;
  /**
   * How each ring round ends (in order): `answered` (a device or a cell took it), `unanswered` (nobody took it in
   * time, or nobody was live) or `caller_hangup` (the caller hung up while it rang). Not listed: unanswered.
   */
  rings?: Array<RingOutcome | 'caller_hangup'>;
  /** How each queue wait ends (in order); `ended` also ends the call. Not listed: overflowed. */
  queues?: QueueOutcome[];
}

export type CallAction =
  | { play: Prompt; stopOnKey: boolean }
  | { keyWaitMs: number }
  | { forward: string; timeoutMs: number }
  | { ring: string[]; timeoutMs: number }
  | { queue: QueueStepRequest }
  | { voicemailMaxMs: number }
  | { enter: 'voicemail' | 'routing' }
  | { note: string }
  | { hangup: string };

export class ScriptedCall implements CallControl {
  ended = false;
  /** Everything the steps asked, in order. */
  readonly actions: CallAction[] = [];
  private readonly keys: ScriptedKey[];
  private readonly forwardsAnswered: boolean[];
  private plays = 0;

  constructor(private readonly script: CallScript = {}) {
    this.keys = [...(script.keys ?? [])];
    this.forwardsAnswered = [...(script.forwardsAnswered ?? [])];
    this.rings = [...(script.rings ?? [])];
    this.queues = [...(script.queues ?? [])];
  }

  private readonly queues: QueueOutcome[];

  private readonly rings: Array<RingOutcome | 'caller_hangup'>;

  /** The ring rounds asked for: each round's targets (their member or user ids, or the cell's number). */
  get rounds(): string[][] {
    return this.actions.flatMap((action) => ('ring' in action ? [action.ring] : []));
  }

  get played(): Prompt[] {
    return this.actions.flatMap((action) => ('play' in action ? [action.play] : []));
  }

  get hungUp(): string[] {
    return this.actions.flatMap((action) => ('hangup' in action ? [action.hangup] : []));
  }

  get forwarded(): string[] {
    return this.actions.flatMap((action) => ('forward' in action ? [action.forward] : []));
  }

  get notes(): string[] {
    return this.actions.flatMap((action) => ('note' in action ? [action.note] : []));
  }

  play(prompt: Prompt, options: { stopOnKey?: boolean } = {}): Promise<{ key: string | undefined }> {
    if (this.ended) return Promise.resolve({ key: undefined });
    const stopOnKey = options.stopOnKey === true;
    this.actions.push({ play: prompt, stopOnKey });
    if (this.script.hangsUpDuringPrompt === this.plays++) this.ended = true;
    const next = this.keys[0];
    if (stopOnKey && typeof next === 'object') {
      this.keys.shift();
      return Promise.resolve({ key: next.duringPrompt });
    }
    return Promise.resolve({ key: undefined });
  }

  key(timeoutMs: number): Promise<string | undefined> {
    if (this.ended) return Promise.resolve(undefined);
    this.actions.push({ keyWaitMs: timeoutMs });
    const next = this.keys.shift();
    return Promise.resolve(typeof next === 'string' ? next : undefined);
  }

  voicemail(maxMs: number): Promise<void> {
    if (this.ended) return Promise.resolve();
    this.actions.push({ voicemailMaxMs: maxMs });
    if (this.script.hangsUpDuringRecording === true) this.ended = true;
    return Promise.resolve();
  }

  forward(to: string, timeoutMs: number): Promise<boolean> {
    if (this.ended) return Promise.resolve(false);
    this.actions.push({ forward: to, timeoutMs });
    return Promise.resolve(this.forwardsAnswered.shift() ?? false);
  }

  ring(targets: readonly RingTarget[], timeoutMs: number): Promise<RingOutcome> {
    if (this.ended) return Promise.resolve('unanswered');
    this.actions.push({
      ring: targets.map((target) =>
        'cell' in target ? target.cell : 'memberId' in target ? target.memberId : target.userId,
      ),
      timeoutMs,
    });
    const outcome = this.rings.shift() ?? 'unanswered';
    if (outcome === 'caller_hangup') {
      this.ended = true;
      return Promise.resolve('unanswered');
    }
    return Promise.resolve(outcome);
  }

  queue(request: QueueStepRequest): Promise<QueueOutcome> {
    if (this.ended) return Promise.resolve('ended');
    this.actions.push({ queue: request });
    const outcome = this.queues.shift() ?? 'overflowed';
    if (outcome === 'ended') this.ended = true;
    return Promise.resolve(outcome);
  }

  hangup(reason: string): Promise<void> {
    if (this.ended) return Promise.resolve();
    this.actions.push({ hangup: reason });
    this.ended = true;
    return Promise.resolve();
  }

  enter(state: 'voicemail' | 'routing'): Promise<void> {
    if (this.ended) return Promise.resolve();
    this.actions.push({ enter: state });
    return Promise.resolve();
  }

  note(_what: 'step_unavailable', detail: string): void {
    this.actions.push({ note: detail });
  }
}
