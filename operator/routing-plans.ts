/**
 * The `RoutingPlan` reconciler (docs/kubernetes.md): converges the plan's PostgreSQL records to the resource,
 * whoever wrote it. The definition is validated against the workspace exactly as the REST API validates a save; a
 * valid definition that differs from the newest version becomes the next version; `publishedVersion` (what the API
 * writes) or `publish: true` (GitOps: publish each valid definition) decide the published version. An invalid
 * definition is never recorded or published: the status says `Valid=False` with the `issues` a REST 422 would list,
 * and so is one past a limit (core/routing/limits.ts: size, plans per workspace, versions per plan), with the message
 * of the REST API's 413 or 409 (`LimitExceeded`; the size is an issue, `definition_too_large`).
 * Deleting the resource archives the plan (a finalizer holds the deletion until then), unless numbers are assigned
 * to it, which keeps it (the status says so). Idempotent: a resource whose records already match changes nothing.
 */
import { type Clock, systemClock } from '../core/clock.ts';
import type pg from 'pg';
import { inTransaction } from '../core/database.ts';
import { workspaceOfApplication } from '../core/identity/workspaces.ts';
import { Type } from 'typebox';
import { RoutingPlanSpec } from '../core/resources/kinds.ts';
import type { Resource, ResourceStore } from '../core/resources/store.ts';
import { workspaceFacts } from '../core/routing/facts.ts';
import { plansLimitProblem, versionsLimitProblem } from '../core/routing/limits.ts';
import {
  archiveUnlessAssigned,
  addVersion,
  createPlan,
  lockPlanRecord,
  lockWorkspacePlans,
  publishVersion,
  renamePlan,
  versionDefinition,
} from '../core/routing/plans.ts';
import { describeIssues, type PlanIssue, referencesOf, validateDefinition } from '../core/routing/validate.ts';
import type { ReconcileResult } from './controller.ts';
import { changedSince, recordIdOf, specCheck, staleRequeueMs } from './resources.ts';
import { type ConditionInput, conditions, keepFinalizer, writeStatus } from './status.ts';

export const planFinalizer = 'switchboard.dev/routing-plan-records';

/** The spec's shape; the definition is the validator's to judge, with its issue codes. */
const checkSpec = specCheck(
  Type.Object({ ...RoutingPlanSpec.properties, definition: Type.Unknown() }, { additionalProperties: false }),
);

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
/** A plan over a limit on plans or versions is looked at again this often (an archived plan makes room). */
const limitRecheckMs = 60_000;
const awaitsRecords = (issues: PlanIssue[]) => issues.some((issue) => missingRecordCodes.has(issue.code));

const condition = (
  type: string,
  status: ConditionInput['status'],
  reason: string,
  message: string,
): ConditionInput => ({ type, status, reason, message });

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
    let record = await lockPlanRecord(db, planId, spec.definition);
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
    // A valid definition that is not the newest version becomes one, within the limits (core/routing/limits.ts):
    // a new plan counted under the workspace's plan-count lock, a new version under the plan row's lock held here.
    let limit: string | undefined;
    if (validation.valid && (record === undefined || !record.newest_matches)) {
      limit =
        record === undefined
          ? plansLimitProblem(await lockWorkspacePlans(db, spec.workspaceId))
          : versionsLimitProblem(record.newest_version);
      if (limit === undefined) {
        if (record === undefined) await createPlan(db, spec.workspaceId, spec.name, { id: planId });
        await addVersion(db, planId, spec.definition, references);
        record = await lockPlanRecord(db, planId, spec.definition);
      }
    }
    const overLimit = limit === undefined ? undefined : condition('Valid', 'False', 'LimitExceeded', limit);
    /** Looked at again while over a limit (another plan archived makes room) or awaiting records. */
    const requeue =
      limit !== undefined
        ? { requeueAfterMs: limitRecheckMs }
        : awaitsRecords(validation.issues)
          ? { requeueAfterMs: missingRecordRecheckMs }
          : {};
    if (record === undefined) {
      // Invalid, or over a limit, before anything was recorded: nothing to publish, nothing for calls to run.
      return {
        conditions: [
          overLimit ?? condition('Valid', 'False', 'Invalid', describeIssues(validation.issues)),
          overLimit === undefined
            ? condition('Published', 'False', 'Invalid', 'an invalid definition is never published')
            : condition('Published', 'False', 'LimitExceeded', 'nothing recorded'),
          overLimit === undefined
            ? condition('Ready', 'False', 'Invalid', 'fix the definition')
            : condition('Ready', 'False', 'LimitExceeded', limit as string),
        ],
        issues: validation.issues,
        newestVersion: null,
        publishedVersion: null,
        ...requeue,
      };
    }
    if (record.name !== spec.name) await renamePlan(db, planId, spec.name);

    // Publishing: the version the spec names, or (publish: true) the newest, once it is this valid definition.
    const current = validation.valid && limit === undefined;
    const wanted =
      spec.publishedVersion !== undefined
        ? spec.publishedVersion
        : spec.publish === true && current
          ? record.newest_version
          : record.published_version;
    let publishIssue: string | undefined;
    if (wanted !== null && wanted !== record.published_version) {
      const definition = await versionDefinition(db, planId, wanted);
      const check =
        definition === undefined
          ? undefined
          : validateDefinition(definition, await workspaceFacts(db, spec.workspaceId, referencesOf(definition), true));
      if (check?.valid === true) {
        await publishVersion(db, planId, wanted);
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
        overLimit ??
          (validation.valid
            ? condition('Valid', 'True', 'Validated', `version ${record.newest_version} is this definition`)
            : condition('Valid', 'False', 'Invalid', describeIssues(validation.issues))),
        publishIssue !== undefined
          ? condition('Published', 'False', 'PublishRefused', publishIssue)
          : published === null
            ? condition('Published', 'False', 'Draft', 'no version is published')
            : condition('Published', 'True', 'Published', `version ${published} is published`),
        current && publishIssue === undefined
          ? condition('Ready', 'True', 'Reconciled', 'the records match the resource')
          : condition(
              'Ready',
              'False',
              overLimit !== undefined ? 'LimitExceeded' : validation.valid ? 'PublishRefused' : 'Invalid',
              'see Valid and Published',
            ),
      ],
      issues: validation.issues,
      newestVersion: record.newest_version,
      publishedVersion: published,
      ...requeue,
    };
  });
}

/** Archives the plan of a deleted resource; false while numbers are assigned to it. */
async function archive(pool: pg.Pool, planId: string): Promise<boolean> {
  return inTransaction(pool, (db) => archiveUnlessAssigned(db, planId));
}

/**
 * `onPlansChanged` hears that a plan was archived or got a new version: a queue whose deletion waits on plans may be
 * free now.
 */
export function routingPlanReconciler(
  pool: pg.Pool,
  store: ResourceStore,
  clock: Clock = systemClock,
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
          clock.now(),
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
          clock.now(),
        ),
      });
      return;
    }
    const outcome = await converge(pool, store, fresh);
    if (outcome === stale) return { requeueAfterMs: staleRequeueMs };
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
      conditions: conditions(fresh.status.conditions, outcome.conditions, fresh.metadata.generation, clock.now()),
    });
    return outcome.requeueAfterMs === undefined ? undefined : { requeueAfterMs: outcome.requeueAfterMs };
  };
}
