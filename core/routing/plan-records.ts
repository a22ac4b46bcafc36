/**
 * A routing plan's records that the API and the operator both write: immutable versions, each with the ids it names
 * (for `in_use` checks, core/routing/usage.ts).
 */
import type { Queryable } from '../database.ts';
import type { referencesOf } from './validate.ts';

export async function insertVersion(
  db: Queryable,
  planId: string,
  version: number,
  definition: unknown,
  references: ReturnType<typeof referencesOf>,
): Promise<void> {
  await db.query(
    `INSERT INTO routing_plan_versions (plan_id, version, definition, schedule_ids, queue_ids, ai_agent_ids)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [planId, version, JSON.stringify(definition), references.scheduleIds, references.queueIds, references.aiAgentIds],
  );
}
