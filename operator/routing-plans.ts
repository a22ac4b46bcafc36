/**
 * The `RoutingPlan` reconciler (docs/kubernetes.md): converges the plan's PostgreSQL records to the resource,
 * whoever wrote it. The definition is validated against the workspace exactly as the REST API validates a save; a
 * valid definition that differs from the newest version becomes the next version; `publishedVersion` (what the API
 * writes) or `publish: true` (GitOps: publish each valid definition) decide the published version. An invalid
 * definition is never recorded or published: the status says `Valid=False` with the `issues` a REST 422 would list.
 * Deleting the resource archives the plan (a finalizer holds the deletion until then), unless numbers are assigned
 * to it, which keeps it (the status says so). Idempotent: a resource whose records already match changes nothing.
 */
import type pg from 'pg';
import { inTransaction } from '../core/database.ts';
import { Type } from 'typebox';
import { RoutingPlanSpec } from '../core/resources/kinds.ts';
import type { Resource, ResourceStore } from '../core/resources/store.ts';
import { workspaceFacts } from '../core/routing/facts.ts';
import { insertVersion } from '../core/routing/plan-records.ts';
import { describeIssues, type PlanIssue, referencesOf, validateDefinition } from '../core/routing/validate.ts';
import type { ReconcileResult } from './controller.ts';
import { changedSince, recordIdOf, specCheck, workspaceOfApplication } from './resources.ts';
import { type ConditionInput, conditions, keepFinalizer, writeStatus } from './status.ts';

export const planFinalizer = 'switchboard.dev/routing-plan-records';

/** The spec's shape; the definition is the validator's to judge, with its issue codes. */
const checkSpec = specCheck(
  Type.Object({ ...RoutingPlanSpec.properties, definition: Type.Unknown() }, { additionalProperties: false }),
);

interface PlanRecord {
  workspace_id: string;
  name: string;
  newest_version: number;
  published_version: number | null;
  archived_at: Date | null;
  newest_matches: boolean;
  assigned: number;
}

interface Outcome {
  conditions: ConditionInput[];
  issues: PlanIssue[];
  newestVersion: number | null;
  publishedVersion: number | null;
  requeueAfterMs?: number;
}

/**
 * Issues about records a plan names that may be made later (through the API, or as resources applied after the
 * plan): a plan with one is looked at again this often, besides when a queue is recorded.
 */
const missingRecordCodes = new Set<PlanIssue['code']>([
  'unknown_schedule',
  'unknown_queue',
  'unknown_agent',
  'unknown_member',
  'unknown_user',
]);
const missingRecordRecheckMs = 30_000;
const awaitsRecords = (issues: PlanIssue[]) => issues.some((issue) => missingRecordCodes.has(issue.code));

const condition = (
  type: string,
  status: ConditionInput['status'],
  reason: string,
  message: string,
): ConditionInput => ({ type, status, reason, message });

async function readRecord(db: pg.PoolClient, planId: string, definition: unknown): Promise<PlanRecord | undefined> {
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

/** Stale: the resource changed while this pass waited for the plan's lock (the API writes both); the next pass runs. */
const stale = Symbol('stale');

async function converge(pool: pg.Pool, store: ResourceStore, resource: Resource): Promise<Outcome | typeof stale> {
  const spec = resource.spec as RoutingPlanSpec;
  const planId = recordIdOf(resource);
  return inTransaction(pool, async (db) => {
    if (!(await workspaceOfApplication(db, spec.workspaceId, spec.applicationId))) {
      return {
        conditions: [
          condition('Valid', 'Unknown', 'WorkspaceNotFound', 'the workspace is not one of the application'),
          condition('Published', 'Unknown', 'WorkspaceNotFound', 'nothing recorded'),
          condition('Ready', 'False', 'WorkspaceNotFound', `no workspace ${spec.workspaceId} in ${spec.applicationId}`),
        ],
        issues: [],
        newestVersion: null,
        publishedVersion: null,
        requeueAfterMs: 30_000,
      };
    }
    let record = await readRecord(db, planId, spec.definition);
    if (await changedSince(store, resource, db)) return stale;
    if (record !== undefined && (record.workspace_id !== spec.workspaceId || record.archived_at !== null)) {
      const why = record.archived_at !== null ? 'was archived' : 'belongs to another workspace';
      return {
        conditions: [
          condition('Valid', 'Unknown', 'IdTaken', `plan ${planId} ${why}`),
          condition('Published', 'Unknown', 'IdTaken', 'nothing recorded'),
          condition('Ready', 'False', 'IdTaken', `plan ${planId} ${why}; give the resource another spec.id`),
        ],
        issues: [],
        newestVersion: null,
        publishedVersion: null,
      };
    }

    const references = referencesOf(spec.definition);
    const validation = validateDefinition(
      spec.definition,
      await workspaceFacts(db, spec.workspaceId, references, true),
    );
    if (validation.valid && (record === undefined || !record.newest_matches)) {
      const version = (record?.newest_version ?? 0) + 1;
      if (record === undefined) {
        await db.query(`INSERT INTO routing_plans (id, workspace_id, name, newest_version) VALUES ($1, $2, $3, 1)`, [
          planId,
          spec.workspaceId,
          spec.name,
        ]);
      } else {
        await db.query('UPDATE routing_plans SET newest_version = $2, updated_at = clock_timestamp() WHERE id = $1', [
          planId,
          version,
        ]);
      }
      await insertVersion(db, planId, version, spec.definition, references);
      record = await readRecord(db, planId, spec.definition);
    }
    if (record === undefined) {
      // Invalid before anything was recorded: nothing to publish, nothing for calls to run.
      return {
        conditions: [
          condition('Valid', 'False', 'Invalid', describeIssues(validation.issues)),
          condition('Published', 'False', 'Invalid', 'an invalid definition is never published'),
          condition('Ready', 'False', 'Invalid', 'fix the definition'),
        ],
        issues: validation.issues,
        newestVersion: null,
        publishedVersion: null,
        ...(awaitsRecords(validation.issues) ? { requeueAfterMs: missingRecordRecheckMs } : {}),
      };
    }
    if (record.name !== spec.name) {
      await db.query('UPDATE routing_plans SET name = $2, updated_at = clock_timestamp() WHERE id = $1', [
        planId,
        spec.name,
      ]);
    }

    // Publishing: the version the spec names, or (publish: true) the newest, once it is this valid definition.
    const wanted =
      spec.publishedVersion !== undefined
        ? spec.publishedVersion
        : spec.publish === true && validation.valid
          ? record.newest_version
          : record.published_version;
    let publishIssue: string | undefined;
    if (wanted !== null && wanted !== record.published_version) {
      const chosen = await db.query<{ definition: unknown }>(
        'SELECT definition FROM routing_plan_versions WHERE plan_id = $1 AND version = $2',
        [planId, wanted],
      );
      const definition = chosen.rows[0]?.definition;
      const check =
        definition === undefined
          ? undefined
          : validateDefinition(definition, await workspaceFacts(db, spec.workspaceId, referencesOf(definition), true));
      if (check?.valid === true) {
        await db.query(
          `UPDATE routing_plans SET published_version = $2, published_at = clock_timestamp(),
                                    updated_at = clock_timestamp() WHERE id = $1`,
          [planId, wanted],
        );
        record.published_version = wanted;
      } else {
        publishIssue =
          check === undefined
            ? `version ${wanted} does not exist`
            : `version ${wanted}: ${describeIssues(check.issues)}`;
      }
    }
    const published = record.published_version;
    return {
      conditions: [
        validation.valid
          ? condition('Valid', 'True', 'Validated', `version ${record.newest_version} is this definition`)
          : condition('Valid', 'False', 'Invalid', describeIssues(validation.issues)),
        publishIssue !== undefined
          ? condition('Published', 'False', 'PublishRefused', publishIssue)
          : published === null
            ? condition('Published', 'False', 'Draft', 'no version is published')
            : condition('Published', 'True', 'Published', `version ${published} is published`),
        validation.valid && publishIssue === undefined
          ? condition('Ready', 'True', 'Reconciled', 'the records match the resource')
          : condition('Ready', 'False', validation.valid ? 'PublishRefused' : 'Invalid', 'see Valid and Published'),
      ],
      issues: validation.issues,
      newestVersion: record.newest_version,
      publishedVersion: published,
      ...(awaitsRecords(validation.issues) ? { requeueAfterMs: missingRecordRecheckMs } : {}),
    };
  });
}

/** Archives the plan of a deleted resource; false while numbers are assigned to it. */
async function archive(pool: pg.Pool, planId: string): Promise<boolean> {
  return inTransaction(pool, async (db) => {
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
  });
}

/**
 * `onPlansChanged` hears that a plan was archived or got a new version: a queue whose deletion waits on plans may be
 * free now.
 */
export function routingPlanReconciler(
  pool: pg.Pool,
  store: ResourceStore,
  clock: () => Date = () => new Date(),
  onPlansChanged: () => void = () => {},
) {
  return async (_name: string, resource: Resource | undefined): Promise<ReconcileResult> => {
    if (resource === undefined) return;
    const planId = recordIdOf(resource);
    if (resource.metadata.deletionTimestamp !== undefined) {
      if (!resource.metadata.finalizers.includes(planFinalizer)) return;
      if (await archive(pool, planId)) {
        await keepFinalizer(store, resource, planFinalizer, false);
        onPlansChanged();
        return;
      }
      await writeStatus(store, resource, {
        ...resource.status,
        conditions: conditions(
          resource.status.conditions,
          [condition('Ready', 'False', 'InUse', 'numbers are assigned to this plan; unassign them to delete it')],
          resource.metadata.generation,
          clock(),
        ),
      });
      return { requeueAfterMs: 10_000 };
    }
    const fresh = (await keepFinalizer(store, resource, planFinalizer, true)) ?? resource;
    const invalid = checkSpec(fresh.spec);
    if (invalid !== undefined) {
      await writeStatus(store, fresh, {
        observedGeneration: fresh.metadata.generation,
        conditions: conditions(
          fresh.status.conditions,
          [
            condition('Valid', 'False', 'InvalidSpec', invalid),
            condition('Published', 'Unknown', 'InvalidSpec', 'nothing recorded'),
            condition('Ready', 'False', 'InvalidSpec', invalid),
          ],
          fresh.metadata.generation,
          clock(),
        ),
      });
      return;
    }
    const outcome = await converge(pool, store, fresh);
    if (outcome === stale) return { requeueAfterMs: 0 };
    if (
      outcome.newestVersion !== fresh.status.newestVersion ||
      outcome.publishedVersion !== fresh.status.publishedVersion
    ) {
      onPlansChanged();
    }
    await writeStatus(store, fresh, {
      observedGeneration: fresh.metadata.generation,
      newestVersion: outcome.newestVersion,
      publishedVersion: outcome.publishedVersion,
      issues: outcome.issues,
      conditions: conditions(fresh.status.conditions, outcome.conditions, fresh.metadata.generation, clock()),
    });
    return outcome.requeueAfterMs === undefined ? undefined : { requeueAfterMs: outcome.requeueAfterMs };
  };
}
