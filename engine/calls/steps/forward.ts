/**
 * `forward`: dial out, ring up to `timeoutSecs`, bridge the media when answered, and once either side hangs up the
 * call is over (`completed`); not answered, the call goes back to `routing` and takes `next`.
 */
import type { ForwardStep } from '../../../core/routing/definition.ts';
import type { StepHandler } from './step.ts';

export const forward: StepHandler<ForwardStep> = async (step, call) => {
  const answered = await call.forward(step.to, step.timeoutSecs * 1000);
  if (answered) {
    await call.hangup('completed');
    return undefined;
  }
  await call.enter('routing');
  return step.next;
};
