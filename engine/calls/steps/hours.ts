/** `hours`: `open` or `closed` by the schedule at the call's current instant (the engine's clock). */
import type { HoursStep } from '../../../core/routing/definition.ts';
import { isOpenAt } from '../../../core/routing/opening-hours.ts';
import type { StepHandler } from './step.ts';

export const hours: StepHandler<HoursStep> = async (step, _call, context) => {
  const schedule = await context.schedule(step.scheduleId);
  // A schedule deleted under a published plan cannot happen (deletes are refused while used); treat as closed.
  return schedule !== undefined && isOpenAt(schedule, context.now()) ? step.open : step.closed;
};
