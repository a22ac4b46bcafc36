/**
 * The `ai_answer` step, not built yet: it takes its no-answer edge (`next`), and the call notes it (logged, counted
 * in `switchboard_calls_step_unavailable_total`).
 */
import type { AiAnswerStep } from '../../../core/routing/definition.ts';
import type { StepHandler } from './step.ts';

export const aiAnswer: StepHandler<AiAnswerStep> = (step, call, context) => {
  call.note('step_unavailable', `${context.stepId}: ai_answer is not built yet; taking next`);
  return step.next;
};
