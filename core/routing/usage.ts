/**
 * Which routing plans use a queue, schedule or AI agent: a plan that is not archived and whose newest or published
 * version names it. Deleting it is then refused with 409 `in_use`. Callers lock the row they delete first (FOR
 * UPDATE), so a save or publish that share-locked it (facts.ts) has committed and is seen here.
 */
import { ApiError } from '../errors.ts';
import type { Queryable } from '../database.ts';

export type Referenced = 'queue' | 'schedule' | 'AI agent';

const columnOf: Record<Referenced, string> = {
  queue: 'queue_ids',
  schedule: 'schedule_ids',
  'AI agent': 'ai_agent_ids',
};

export async function plansUsing(db: Queryable, what: Referenced, id: string): Promise<{ id: string; name: string }[]> {
  const result = await db.query<{ id: string; name: string }>(
    `SELECT DISTINCT p.id, p.name
       FROM routing_plans p
       JOIN routing_plan_versions v
         ON v.plan_id = p.id AND (v.version = p.newest_version OR v.version = p.published_version)
      WHERE p.archived_at IS NULL AND $1::uuid = ANY (v.${columnOf[what]})
      ORDER BY p.name`,
    [id],
  );
  return result.rows;
}

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
