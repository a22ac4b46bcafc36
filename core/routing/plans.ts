/**
 * The `routing_plans` and `routing_plan_versions` tables: a plan row (name, newest and published version, archived)
 * and its immutable versions, each with the ids it names (for `in_use` checks, usage.ts). Written by the REST API
 * (operations 25-33) and by the `RoutingPlan` reconciler; the plan row is locked for every change, so concurrent
 * saves get distinct version numbers, and creations take the workspace's plan-count lock (core/routing/limits.ts).
 */
import type { Queryable } from '../database.ts';
import { notFound } from '../errors.ts';
import { keysetPage, type PageWindow } from '../rows.ts';
import type { PlanLimitFacts } from './limits.ts';
import type { referencesOf } from './validate.ts';

export interface PlanRow {
  id: string;
  workspace_id: string;
  name: string;
  newest_version: number;
  published_version: number | null;
  published_at: Date | null;
  archived_at: Date | null;
  created_at: Date;
  updated_at: Date;
  cursor_ts: string;
  definition: unknown;
  assignments: { phoneNumberId: string; e164: string; assignedAt: string }[];
}

const planColumns = `p.id, p.workspace_id, p.name, p.newest_version, p.published_version, p.published_at, p.archived_at,
  p.created_at, p.updated_at, p.created_at::text AS cursor_ts,
  (SELECT v.definition FROM routing_plan_versions v WHERE v.plan_id = p.id AND v.version = p.newest_version)
    AS definition,
  (SELECT coalesce(json_agg(json_build_object('phoneNumberId', n.id, 'e164', n.e164,
                                              'assignedAt', to_char(n.assigned_at AT TIME ZONE 'UTC',
                                                                    'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
                            ORDER BY n.e164), '[]')
     FROM phone_numbers n WHERE n.routing_plan_id = p.id) AS assignments`;

/** The workspace's plan (not archived) with its newest definition and the numbers assigned to it, or 404. */
export async function readPlan(db: Queryable, id: string, workspaceId: string): Promise<PlanRow> {
  const result = await db.query<PlanRow>(
    `SELECT ${planColumns} FROM routing_plans p WHERE p.id = $1 AND p.workspace_id = $2 AND p.archived_at IS NULL`,
    [id, workspaceId],
  );
  const row = result.rows[0];
  if (row === undefined) throw notFound('routing plan');
  return row;
}

export function listPlans(db: Queryable, workspaceId: string, window: PageWindow): Promise<PlanRow[]> {
  return keysetPage<PlanRow>(
    db,
    {
      select: `SELECT ${planColumns} FROM routing_plans p`,
      where: 'p.workspace_id = $1 AND p.archived_at IS NULL',
      params: [workspaceId],
    },
    window,
  );
}

/**
 * Locks the plan row for the rest of the transaction (saves, publishes, assignments and archiving serialize); its
 * newest version, what the versions limit is judged on.
 */
export async function lockPlan(db: Queryable, id: string, workspaceId: string): Promise<{ newestVersion: number }> {
  const result = await db.query<{ newest_version: number }>(
    `SELECT newest_version FROM routing_plans WHERE id = $1 AND workspace_id = $2 AND archived_at IS NULL
        FOR UPDATE`,
    [id, workspaceId],
  );
  const row = result.rows[0];
  if (row === undefined) throw notFound('routing plan');
  return { newestVersion: row.newest_version };
}

/**
 * Takes the workspace's plan-count lock until commit (a transaction-level advisory lock: plan creations in one
 * workspace serialize, nothing else waits on it) and counts the workspace's plans that are not archived: a count
 * that stays true until this transaction's plan is inserted.
 */
export async function lockWorkspacePlans(db: Queryable, workspaceId: string): Promise<number> {
  await db.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`routing-plans:${workspaceId}`]);
  const result = await db.query<{ plans: number }>(
    'SELECT count(*)::int AS plans FROM routing_plans WHERE workspace_id = $1 AND archived_at IS NULL',
    [workspaceId],
  );
  return (result.rows[0] as { plans: number }).plans;
}

/**
 * What the limits are judged on when `definition` is written to plan `planId` (when recorded, with its newest version
 * and whether that is `definition`), read without a lock: the admission webhook's view, which the API and the
 * reconciler judge again under their locks.
 */
export async function planLimitFacts(
  db: Queryable,
  workspaceId: string,
  planId: string | undefined,
  definition: unknown,
): Promise<PlanLimitFacts> {
  const result = await db.query<{ plans: number; newest_version: number | null; newest_matches: boolean | null }>(
    `SELECT (SELECT count(*)::int FROM routing_plans WHERE workspace_id = $1 AND archived_at IS NULL) AS plans,
            p.newest_version,
            (SELECT v.definition::jsonb = $3::jsonb FROM routing_plan_versions v
              WHERE v.plan_id = p.id AND v.version = p.newest_version) AS newest_matches
       FROM (SELECT 1) one
       LEFT JOIN routing_plans p ON p.id = $2::uuid AND p.workspace_id = $1 AND p.archived_at IS NULL`,
    [workspaceId, planId ?? null, JSON.stringify(definition)],
  );
  const row = result.rows[0] as { plans: number; newest_version: number | null; newest_matches: boolean | null };
  return {
    plans: row.plans,
    ...(row.newest_version === null
      ? {}
      : { plan: { newestVersion: row.newest_version, newestMatches: row.newest_matches === true } }),
  };
}

/**
 * The one way a plan gets a version: `definition` saved as the next version of the plan (its row locked by the
 * caller, or made in this transaction by `createPlan`), counted on the plan row; the version's number.
 */
export async function addVersion(
  db: Queryable,
  planId: string,
  definition: unknown,
  references: ReturnType<typeof referencesOf>,
): Promise<number> {
  // A plan made in this transaction (no version yet) keeps the time it was made.
  const next = await db.query<{ newest_version: number }>(
    `UPDATE routing_plans SET newest_version = newest_version + 1,
            updated_at = CASE WHEN newest_version = 0 THEN updated_at ELSE clock_timestamp() END
      WHERE id = $1 RETURNING newest_version`,
    [planId],
  );
  const version = (next.rows[0] as { newest_version: number }).newest_version;
  await db.query(
    `INSERT INTO routing_plan_versions (plan_id, version, definition, schedule_ids, queue_ids, ai_agent_ids)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [planId, version, JSON.stringify(definition), references.scheduleIds, references.queueIds, references.aiAgentIds],
  );
  return version;
}

/**
 * A new plan, with the id given (a custom resource's `spec.id`) or a new one, and no version yet: `addVersion` adds
 * its first in the same transaction. Published at that first version when `publish`. Its id.
 */
export async function createPlan(
  db: Queryable,
  workspaceId: string,
  name: string,
  options: { id?: string; publish?: boolean } = {},
): Promise<string> {
  const inserted = await db.query<{ id: string }>(
    `INSERT INTO routing_plans (id, workspace_id, name, newest_version, published_version, published_at)
         VALUES (coalesce($1::uuid, gen_random_uuid()), $2, $3, 0, $4,
                 CASE WHEN $4::integer IS NULL THEN NULL ELSE clock_timestamp() END) RETURNING id`,
    [options.id ?? null, workspaceId, name, options.publish === true ? 1 : null],
  );
  return (inserted.rows[0] as { id: string }).id;
}

export async function renamePlan(db: Queryable, planId: string, name: string): Promise<void> {
  await db.query('UPDATE routing_plans SET name = $2, updated_at = clock_timestamp() WHERE id = $1', [planId, name]);
}

/** Version `version` of the plan (the newest when null), if it exists. */
export async function planVersion(
  db: Queryable,
  planId: string,
  version: number | null,
): Promise<{ version: number; definition: unknown } | undefined> {
  const chosen = await db.query<{ version: number; definition: unknown }>(
    `SELECT v.version, v.definition FROM routing_plan_versions v JOIN routing_plans p ON p.id = v.plan_id
          WHERE v.plan_id = $1 AND v.version = coalesce($2::integer, p.newest_version)`,
    [planId, version],
  );
  return chosen.rows[0];
}

export async function publishVersion(db: Queryable, planId: string, version: number): Promise<void> {
  await db.query(
    `UPDATE routing_plans SET published_version = $2, published_at = clock_timestamp(), updated_at = clock_timestamp()
          WHERE id = $1`,
    [planId, version],
  );
}

/** Up to `limit + 1` versions below `before`, newest first. */
export async function listVersions(
  db: Queryable,
  planId: string,
  before: number,
  limit: number,
): Promise<{ version: number; definition: unknown; created_at: Date }[]> {
  const result = await db.query<{ version: number; definition: unknown; created_at: Date }>(
    `SELECT version, definition, created_at FROM routing_plan_versions
          WHERE plan_id = $1 AND version < $2 ORDER BY version DESC LIMIT $3`,
    [planId, before, limit + 1],
  );
  return result.rows;
}

export async function archivePlan(db: Queryable, planId: string): Promise<void> {
  await db.query(
    'UPDATE routing_plans SET archived_at = clock_timestamp(), updated_at = clock_timestamp() WHERE id = $1',
    [planId],
  );
}

/** The plan's records as the reconciler compares them with the resource. */
export interface PlanRecord {
  workspace_id: string;
  name: string;
  newest_version: number;
  published_version: number | null;
  archived_at: Date | null;
  newest_matches: boolean;
  assigned: number;
}

/** Locks the plan row (if any) and reads it, with whether its newest version is `definition`. */
export async function lockPlanRecord(
  db: Queryable,
  planId: string,
  definition: unknown,
): Promise<PlanRecord | undefined> {
  const result = await db.query<PlanRecord>(
    `SELECT p.workspace_id, p.name, p.newest_version, p.published_version, p.archived_at,
            coalesce((SELECT v.definition::jsonb = $2::jsonb FROM routing_plan_versions v
                       WHERE v.plan_id = p.id AND v.version = p.newest_version), false) AS newest_matches,
            (SELECT count(*)::int FROM phone_numbers n WHERE n.routing_plan_id = p.id) AS assigned
       FROM routing_plans p WHERE p.id = $1 FOR UPDATE`,
    [planId, JSON.stringify(definition)],
  );
  return result.rows[0];
}

/** The definition of version `version`, if it exists. */
export async function versionDefinition(db: Queryable, planId: string, version: number): Promise<unknown> {
  const chosen = await db.query<{ definition: unknown }>(
    'SELECT definition FROM routing_plan_versions WHERE plan_id = $1 AND version = $2',
    [planId, version],
  );
  return chosen.rows[0]?.definition;
}

/**
 * Archives the plan of a deleted resource (locking it first); false while numbers are assigned to it. True as well
 * when there is no such plan.
 */
export async function archiveUnlessAssigned(db: Queryable, planId: string): Promise<boolean> {
  const record = await db.query<{ assigned: number }>(
    `SELECT (SELECT count(*)::int FROM phone_numbers n WHERE n.routing_plan_id = p.id) AS assigned
         FROM routing_plans p WHERE p.id = $1 FOR UPDATE`,
    [planId],
  );
  const row = record.rows[0];
  if (row === undefined) return true;
  if (row.assigned > 0) return false;
  await db.query('UPDATE routing_plans SET archived_at = coalesce(archived_at, clock_timestamp()) WHERE id = $1', [
    planId,
  ]);
  return true;
}

export type Referenced = 'queue' | 'schedule' | 'AI agent';

const columnOf: Record<Referenced, string> = {
  queue: 'queue_ids',
  schedule: 'schedule_ids',
  'AI agent': 'ai_agent_ids',
};

/**
 * Which routing plans use a queue, schedule or AI agent: a plan that is not archived and whose newest or published
 * version names it.
 */
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
