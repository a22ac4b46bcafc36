/**
 * Runs a routing plan version for one call, step by step (docs/calls.md, The runner). The runner decides; what it
 * asks of the call (play, wait for a key, record, dial out, hang up) goes through `CallControl`, which the inbound
 * call handler implements on SIP and RTP. The definition is the version the call started with: it never changes
 * under a running call.
 */
import { createHash } from 'node:crypto';
import type { RoutingPlanDefinition, Step } from '../../core/routing/definition.ts';
import type { ScheduleHours } from '../../core/routing/schedule.ts';
import { isOpenAt } from '../../core/routing/schedule.ts';

export type Prompt = { tts: string } | { audioUrl: string };

export interface CallControl {
  /** Plays a prompt to the caller; resolves when it ends, early with 'key' when the caller pressed one. */
  play(prompt: Prompt, options?: { stopOnKey?: boolean }): Promise<{ key: string | undefined }>;
  /** Waits up to `timeoutMs` for one key (a key pressed during the prompt counts). */
  key(timeoutMs: number): Promise<string | undefined>;
  /** Records the caller until they hang up or `maxMs` passes. */
  voicemail(maxMs: number): Promise<void>;
  /** Dials `to`, rings up to `timeoutMs`; true once answered and bridged until either side hangs up. */
  forward(to: string, timeoutMs: number): Promise<boolean>;
  /** Ends the call from our side (BYE). */
  hangup(reason: string): Promise<void>;
  /** The call state for steps that change it (`voicemail`). */
  enter(state: 'voicemail' | 'routing'): Promise<void>;
  /** True once the caller hung up (the runner stops at the next step). */
  readonly ended: boolean;
  /** Something worth counting: a step type not built yet, a prompt that could not be played. */
  note(what: 'step_unavailable', detail: string): void;
}

export interface RunnerContext {
  callId: string;
  definition: RoutingPlanDefinition;
  schedule(id: string): Promise<ScheduleHours | undefined>;
  now(): Date;
}

export const voicemailMaxMs = 5 * 60_000;
export const defaultGreeting: Prompt = { tts: 'Please leave a message after the tone.' };
/** A plan longer than this many steps for one call is cut: a definition cannot loop, so this is only a guard. */
const maxStepsPerCall = 10_000;

/** `a` or `b` for this call, the same every time for one call id. */
export function splitBranch(callId: string, percentToA: number): 'a' | 'b' {
  const bucket = createHash('sha256').update(callId).digest().readUInt32BE(0) % 100;
  return bucket < percentToA ? 'a' : 'b';
}

/**
 * Runs the plan from its entry until a hangup, a voicemail, or the caller leaving; `taken` gets each step as it
 * starts (so it is complete even when a step fails). Returns `taken`.
 */
export async function runPlan(context: RunnerContext, call: CallControl, taken: string[] = []): Promise<string[]> {
  let stepId: string | undefined = context.definition.entry;
  while (stepId !== undefined && !call.ended && taken.length < maxStepsPerCall) {
    const step: Step | undefined = context.definition.steps[stepId];
    if (step === undefined) {
      await call.hangup('plan_error');
      break;
    }
    taken.push(stepId);
    stepId = await runStep(context, call, stepId, step);
  }
  // Every step that ends a plan hangs up; a run cut by the step guard must not leave the caller on the line.
  if (!call.ended) await call.hangup('plan_error');
  return taken;
}

/** One step; returns the next step, or undefined when the call is over. */
async function runStep(context: RunnerContext, call: CallControl, id: string, step: Step): Promise<string | undefined> {
  switch (step.type) {
    case 'hours': {
      const schedule = await context.schedule(step.scheduleId);
      // A schedule deleted under a published plan cannot happen (deletes are refused while used); treat as closed.
      return schedule !== undefined && isOpenAt(schedule, context.now()) ? step.open : step.closed;
    }
    case 'menu': {
      for (let attempt = 0; attempt <= step.maxRetries; attempt += 1) {
        if (call.ended) return undefined;
        const played = await call.play(step.prompt, { stopOnKey: true });
        const key = played.key ?? (await call.key(step.timeoutSecs * 1000));
        if (key !== undefined) {
          const next = (step.options as Record<string, string | undefined>)[key];
          if (next !== undefined) return next;
        }
      }
      return step.noInput;
    }
    case 'split':
      return splitBranch(context.callId, step.percentToA) === 'a' ? step.a : step.b;
    case 'forward': {
      const answered = await call.forward(step.to, step.timeoutSecs * 1000);
      if (answered) {
        await call.hangup('completed');
        return undefined;
      }
      await call.enter('routing');
      return step.next;
    }
    case 'voicemail': {
      await call.enter('voicemail');
      await call.play(step.greeting ?? defaultGreeting);
      if (call.ended) return undefined;
      await call.voicemail(voicemailMaxMs);
      if (!call.ended) await call.hangup('voicemail_complete');
      return undefined;
    }
    case 'hangup': {
      if (step.message !== null) await call.play({ tts: step.message });
      if (!call.ended) await call.hangup('plan_hangup');
      return undefined;
    }
    case 'ring':
      call.note('step_unavailable', `${id}: ring is not built yet; taking next`);
      return step.next;
    case 'queue':
      call.note('step_unavailable', `${id}: queue is not built yet; taking overflow`);
      return step.overflow;
    case 'ai_answer':
      call.note('step_unavailable', `${id}: ai_answer is not built yet; taking next`);
      return step.next;
  }
}
