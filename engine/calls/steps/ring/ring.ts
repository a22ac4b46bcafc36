/**
 * `ring`: people's phones and cells ring (docs/phones.md, "The ring step"). `simultaneous` rings every target in one
 * round (people's live devices offered, cells dialled out through the called number's carrier); `sequential` one
 * target per round, in order, each for `timeoutSecs` (a person with no live device, or a cell that cannot be
 * dialled, is passed over at once). Answered: the call is bridged to the answering device or cell until either side
 * hangs up, and is then over (`completed`), as a forward's. Nobody answers: the call goes back to `routing` and takes
 * `next`.
 *
 * Each person target's `mode` (`ring`, `silent`, `muted`) goes with their devices' offers and desk phones' INVITEs
 * (round.ts, docs/phones.md "Ring modes"); a cell is an ordinary call.
 */
import type { RingStep } from '../../../../core/routing/definition.ts';
import type { StepHandler } from '../step.ts';

export const ring: StepHandler<RingStep> = async (step, call) => {
  const rounds = step.strategy === 'simultaneous' ? [step.targets] : step.targets.map((target) => [target]);
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
