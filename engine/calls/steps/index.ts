/**
 * The routing steps by type: one file per step type in this folder. A step type of the plan definition
 * (core/routing/definition.ts) without its line here fails the compiler.
 */
import type { Step } from '../../../core/routing/definition.ts';
import type { CallControl, StepContext } from '../control.ts';
import { forward } from './forward.ts';
import { hangup } from './hangup.ts';
import { hours } from './hours.ts';
import { menu } from './menu.ts';
import { split } from './split.ts';
import type { StepHandler } from './step.ts';
import { queue } from './queue/queue.ts';
import { ring } from './ring/ring.ts';
import { aiAnswer } from './ai-answer.ts';
import { voicemail } from './voicemail.ts';

export type StepHandlers = { [T in Step['type']]: StepHandler<Extract<Step, { type: T }>> };

export const steps: StepHandlers = {
  hours,
  menu,
  split,
  forward,
  voicemail,
  hangup,
  ring,
  queue,
  ai_answer: aiAnswer,
};

/** One step; the next step's id, or undefined when the call is over. */
export async function runStep(step: Step, call: CallControl, context: StepContext): Promise<string | undefined> {
  // The table pairs each type with its handler; TypeScript cannot follow that pairing through `step.type`.
  const handler = steps[step.type] as StepHandler<Step>;
  return handler(step, call, context);
}
