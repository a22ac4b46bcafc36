/**
 * Steps not built yet: `queue` and `ai_answer` take their no-answer edge (`overflow`, `next`), and
 * the call notes it (logged, counted in `switchboard_calls_step_unavailable_total`). Each becomes a file of its own
 * when built.
 */
import type { AiAnswerStep, QueueStep } from '../../../core/routing/definition.ts';
import type { StepHandler } from './step.ts';

export const queue: StepHandler<QueueStep> = (step, call, context) => {
  call.note('step_unavailable', `${context.stepId}: queue is not built yet; taking overflow`);
  return step.overflow;
};

export const aiAnswer: StepHandler<AiAnswerStep> = (step, call, context) => {
  call.note('step_unavailable', `${context.stepId}: ai_answer is not built yet; taking next`);
  return step.next;
};
