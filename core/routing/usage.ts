/**
 * Which routing plans use a queue, schedule or AI agent: a plan that is not archived and whose newest or published
 * version names it (`plansUsing`, plans.ts). Deleting it is then refused with 409 `in_use`. Callers lock the row they
 * delete first (FOR UPDATE), so a save or publish that share-locked it (facts.ts) has committed and is seen here.
 */
import { ApiError } from '../errors.ts';
import type { Queryable } from '../database.ts';
import { plansUsing, type Referenced } from './plans.ts';

export { plansUsing, type Referenced };

/** `used by routing plan "Front desk" (<id>), ...`: the first five of the plans that use something. */
export function usedBy(plans: ReadonlyArray<{ id: string; name: string }>): string {
  const names = plans
    .slice(0, 5)
    .map((plan) => `"${plan.name}" (${plan.id})`)
    .join(', ');
  return `used by routing plan ${names}${plans.length > 5 ? ' and more' : ''}`;
}

/** Throws 409 `in_use` naming the plans that use it. */
export async function refuseWhenUsed(db: Queryable, what: Referenced, id: string): Promise<void> {
  const plans = await plansUsing(db, what, id);
  if (plans.length === 0) return;
  throw new ApiError('in_use', `this ${what} is ${usedBy(plans)}`, {
    extra: { routingPlanIds: plans.map((plan) => plan.id) },
  });
}
