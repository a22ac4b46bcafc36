/**
 * The `Queue` reconciler (docs/kubernetes.md): converges the queue's PostgreSQL record to the resource, whoever
 * wrote it (its hold prompt and announcement settings included, defaults for those left out), with the members checked
 * as the REST API checks them. A finalizer guards deletion: while a routing plan
 * (its newest or published version) uses the queue, the resource stays, marked for deletion, and its status says
 * which plans hold it; once none does, the record goes and then the resource.
 */
import { type Clock, systemClock } from '../core/clock.ts';
import type pg from 'pg';
import { inTransaction } from '../core/database.ts';
import { workspaceOfApplication } from '../core/identity/workspaces.ts';
import { unknownMembers } from '../core/identity/members.ts';
import { QueueSpec } from '../core/resources/kinds.ts';
import type { Resource, ResourceStore } from '../core/resources/store.ts';
import { deleteQueue, lockQueue, lockQueueOwner, recordQueue } from '../core/queues/queues.ts';
import { plansUsing, usedBy } from '../core/routing/usage.ts';
import type { ReconcileResult } from './controller.ts';
import { changedSince, recordIdOf, specCheck, staleRequeueMs } from './resources.ts';
import { type ConditionInput, keepFinalizer, ready, writeReady } from './status.ts';

export const queueFinalizer = 'switchboard.dev/queue-in-use';

const checkSpec = specCheck(QueueSpec);

/** How soon a deletion waiting on plans looks again (a plan's change also frees it). */
const inUseRecheckMs = 10_000;

type Outcome = { ready: ConditionInput; requeueAfterMs?: number; recorded?: boolean } | 'stale';

async function converge(pool: pg.Pool, store: ResourceStore, resource: Resource): Promise<Outcome> {
  const spec = resource.spec as QueueSpec;
  const queueId = recordIdOf(resource);
  return inTransaction(pool, async (db) => {
    if (!(await workspaceOfApplication(db, spec.workspaceId, spec.applicationId))) {
      const message = `no workspace ${spec.workspaceId} in ${spec.applicationId}`;
      return { ready: ready('False', 'WorkspaceNotFound', message), requeueAfterMs: 30_000 };
    }
    const owner = await lockQueueOwner(db, queueId);
    if (await changedSince(store, resource, db)) return 'stale';
    if (owner !== undefined && owner !== spec.workspaceId) {
      return { ready: ready('False', 'IdTaken', `queue ${queueId} belongs to another workspace`) };
    }
    const members = spec.members.map((id) => id.toLowerCase());
    const unknown = await unknownMembers(db, spec.workspaceId, members);
    if (unknown.length > 0) {
      const message = `not members of the workspace: ${unknown.join(', ')}`;
      return { ready: ready('False', 'UnknownMembers', message), requeueAfterMs: 30_000 };
    }
    const recorded = await recordQueue(db, queueId, spec.workspaceId, {
      name: spec.name,
      strategy: spec.strategy,
      wrapUpSecs: spec.wrapUpSecs,
      memberIds: members,
      // Settings left out of the spec take their defaults (recordQueue's).
      holdPrompt: spec.holdPrompt ?? null,
      announcePosition: spec.announcePosition,
      announceExpectedWait: spec.announceExpectedWait,
      announceIntervalSecs: spec.announceIntervalSecs,
    });
    return { ready: ready('True', 'Reconciled', 'the record matches the resource'), recorded };
  });
}

/** Deletes the record of a deleted resource unless plans use it; the plans that do, otherwise. */
async function remove(pool: pg.Pool, queueId: string): Promise<Array<{ id: string; name: string }>> {
  return inTransaction(pool, async (db) => {
    await lockQueue(db, queueId);
    const plans = await plansUsing(db, 'queue', queueId);
    if (plans.length === 0) await deleteQueue(db, queueId);
    return plans;
  });
}

/**
 * `onQueueRecorded` hears that a queue's record was made or changed: a plan that named it before it existed (GitOps
 * applies resources in no set order) can be valid now.
 */
export function queueReconciler(
  pool: pg.Pool,
  store: ResourceStore,
  clock: Clock = systemClock,
  onQueueRecorded: () => void = () => {},
) {
  const status = (resource: Resource, condition: ConditionInput) => writeReady(store, resource, condition, clock.now());
  return async (_name: string, resource: Resource | undefined): Promise<ReconcileResult> => {
    if (resource === undefined) return;
    if (resource.metadata.deletionTimestamp !== undefined) {
      if (!resource.metadata.finalizers.includes(queueFinalizer)) return;
      const plans = await remove(pool, recordIdOf(resource));
      if (plans.length === 0) {
        await keepFinalizer(store, resource, queueFinalizer, false);
        return;
      }
      await status(resource, ready('False', 'InUse', `deletion waits: ${usedBy(plans)}`));
      return { requeueAfterMs: inUseRecheckMs };
    }
    const fresh = (await keepFinalizer(store, resource, queueFinalizer, true)) ?? resource;
    const invalid = checkSpec(fresh.spec);
    if (invalid !== undefined) {
      await status(fresh, ready('False', 'InvalidSpec', invalid));
      return;
    }
    const outcome = await converge(pool, store, fresh);
    if (outcome === 'stale') return { requeueAfterMs: staleRequeueMs };
    await status(fresh, outcome.ready);
    if (outcome.recorded === true) onQueueRecorded();
    return outcome.requeueAfterMs === undefined ? undefined : { requeueAfterMs: outcome.requeueAfterMs };
  };
}
