/**
 * `queue`: the caller waits for the next free agent (wait.ts, docs/contact-center.md). Answered: the call is
 * bridged to the agent until either side hangs up, and is then over (`completed`), as a ring step's. `maxWaitSecs`
 * passed: the call goes back to `routing` and takes `overflow`. The caller hung up (or asked to be called back and
 * the callback ended or expired): the call is over. The entry has the step's `priority` (default 0).
 */
import type { QueueStep } from '../../../../core/routing/definition.ts';
import type { StepHandler } from '../step.ts';

export const queue: StepHandler<QueueStep> = async (step, call) => {
  const outcome = await call.queue({
    queueId: step.queueId,
    maxWaitMs: step.maxWaitSecs * 1000,
    offerCallback: step.offerCallback,
    priority: step.priority ?? 0,
  });
  if (outcome === 'answered') {
    await call.hangup('completed');
    return undefined;
  }
  if (outcome === 'ended' || call.ended) return undefined;
  await call.enter('routing');
  return step.overflow;
};
