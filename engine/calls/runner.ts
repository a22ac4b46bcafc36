/**
 * Runs a routing plan version for one call, step by step (docs/calls.md, The runner). The runner walks the plan;
 * each step's code is a file in `steps/` (found by step type in `steps/index.ts`), and what a step asks of the call
 * (play, wait for a key, record, dial out, hang up) goes through `CallControl`, which `Call` (call.ts) implements on
 * its legs. The definition is the version the call started with: it never changes under a running call.
 */
import type { Step } from '../../core/routing/definition.ts';
import type { CallControl, RunnerContext } from './control.ts';
import { runStep } from './steps/index.ts';

// Where the tests (and the docs) have always found it.
export { splitBranch } from './steps/split.ts';

/** A plan longer than this many steps for one call is cut: a definition cannot loop, so this is only a guard. */
const maxStepsPerCall = 10_000;

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
    stepId = await runStep(step, call, { ...context, stepId });
  }
  // Every step that ends a plan hangs up; a run cut by the step guard must not leave the caller on the line.
  if (!call.ended) await call.hangup('plan_error');
  return taken;
}
