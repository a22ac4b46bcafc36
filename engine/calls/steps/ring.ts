/**
 * `ring`: people's phones ring (docs/phones.md, "The ring step"). `simultaneous` rings every target's live devices
 * in one round; `sequential` one target per round, in order, each for `timeoutSecs` (a target with no live device
 * is passed over at once). Answered: the call is bridged to the answering device until either side hangs up, and
 * is then over (`completed`), as a forward's. Nobody answers: the call goes back to `routing` and takes `next`.
 *
 * `{cell}` targets are not rung yet (dialling a cell out through the number's carrier is to come): they are noted
 * (`step_unavailable`) and passed over. `mode` (`ring`, `silent`, `muted`) is not carried to the device yet: the
 * offer and `call.ringing` have no field for it in the specification; every device rings.
 */
import type { RingStep } from '../../../core/routing/definition.ts';
import type { RingPerson } from '../control.ts';
import type { StepHandler } from './step.ts';

export const ring: StepHandler<RingStep> = async (step, call, context) => {
  const people = step.targets.filter((target): target is RingPerson => !('cell' in target));
  const cells = step.targets.length - people.length;
  if (cells > 0) {
    call.note('step_unavailable', `${context.stepId}: ${cells} cell target(s) not rung, dialling a cell is not built`);
  }
  const rounds = step.strategy === 'simultaneous' ? [people] : people.map((person) => [person]);
  for (const round of rounds) {
    if (call.ended) return undefined;
    if (round.length === 0) continue;
    if ((await call.ring(round, step.timeoutSecs * 1000)) === 'answered') {
      await call.hangup('completed');
      return undefined;
    }
  }
  if (call.ended) return undefined;
  await call.enter('routing');
  return step.next;
};
