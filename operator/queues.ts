/**
 * The `Queue` reconciler (docs/kubernetes.md): converges the queue's PostgreSQL record to the resource, whoever
 * wrote it, with the members checked as the REST API checks them. A finalizer guards deletion: while a routing plan
 * (its newest or published version) uses the queue, the resource stays, marked for deletion, and its status says
 * which plans hold it; once none does, the record goes and then the resource.
 */
import type pg from 'pg';
import { inTransaction } from '../core/database.ts';
import type { QueueSpec } from '../core/resources/kinds.ts';
import type { Resource, ResourceStore } from '../core/resources/store.ts';
import { plansUsing } from '../core/routing/usage.ts';
import type { ReconcileResult } from './controller.ts';
import { type ConditionInput, conditions, keepFinalizer, writeStatus } from './status.ts';

export const queueFinalizer = 'switchboard.dev/queue-in-use';

/** How soon a deletion waiting on plans looks again (a plan's change also frees it). */
const inUseRecheckMs = 10_000;

export function queueIdOf(resource: Resource): string {
  return (resource.spec as QueueSpec).id ?? resource.metadata.uid;
}

type Outcome = { ready: ConditionInput; requeueAfterMs?: number } | 'stale';

async function converge(pool: pg.Pool, store: ResourceStore, resource: Resource): Promise<Outcome> {
  const spec = resource.spec as QueueSpec;
  const queueId = queueIdOf(resource);
  return inTransaction(pool, async (db) => {
    const workspace = await db.query('SELECT 1 FROM workspaces WHERE id = $1 AND application_id = $2', [
      spec.workspaceId,
      spec.applicationId,
    ]);
    if (workspace.rowCount === 0) {
      const message = `no workspace ${spec.workspaceId} in ${spec.applicationId}`;
      return { ready: ready('False', 'WorkspaceNotFound', message), requeueAfterMs: 30_000 };
    }
    const existing = await db.query<{ workspace_id: string }>(
      'SELECT workspace_id FROM queues WHERE id = $1 FOR UPDATE',
      [queueId],
    );
    const current = await store.get(resource.kind, resource.metadata.namespace, resource.metadata.name);
    if (current?.metadata.resourceVersion !== resource.metadata.resourceVersion) return 'stale';
    const owner = existing.rows[0]?.workspace_id;
    if (owner !== undefined && owner !== spec.workspaceId) {
      return { ready: ready('False', 'IdTaken', `queue ${queueId} belongs to another workspace`) };
    }
    const members = spec.members.map((id) => id.toLowerCase());
    const found = await db.query<{ id: string }>(
      'SELECT id FROM members WHERE workspace_id = $1 AND id = ANY ($2::uuid[])',
      [spec.workspaceId, members],
    );
    const known = new Set(found.rows.map((row) => row.id));
    const unknown = members.filter((id) => !known.has(id));
    if (unknown.length > 0) {
      const message = `not members of the workspace: ${unknown.join(', ')}`;
      return { ready: ready('False', 'UnknownMembers', message), requeueAfterMs: 30_000 };
    }
    await db.query(
      `INSERT INTO queues (id, workspace_id, name, strategy, wrap_up_secs, member_ids) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (id) DO UPDATE SET name = excluded.name, strategy = excluded.strategy,
              wrap_up_secs = excluded.wrap_up_secs, member_ids = excluded.member_ids, updated_at = clock_timestamp()
        WHERE (queues.name, queues.strategy, queues.wrap_up_secs, queues.member_ids)
              IS DISTINCT FROM (excluded.name, excluded.strategy, excluded.wrap_up_secs, excluded.member_ids)`,
      [queueId, spec.workspaceId, spec.name, spec.strategy, spec.wrapUpSecs, members],
    );
    return { ready: ready('True', 'Reconciled', 'the record matches the resource') };
  });
}

function ready(status: ConditionInput['status'], reason: string, message: string): ConditionInput {
  return { type: 'Ready', status, reason, message };
}

/** Deletes the record of a deleted resource unless plans use it; the plans that do, otherwise. */
async function remove(pool: pg.Pool, queueId: string): Promise<Array<{ id: string; name: string }>> {
  return inTransaction(pool, async (db) => {
    await db.query('SELECT id FROM queues WHERE id = $1 FOR UPDATE', [queueId]);
    const plans = await plansUsing(db, 'queue', queueId);
    if (plans.length === 0) await db.query('DELETE FROM queues WHERE id = $1', [queueId]);
    return plans;
  });
}

export function queueReconciler(pool: pg.Pool, store: ResourceStore, clock: () => Date = () => new Date()) {
  const status = (resource: Resource, condition: ConditionInput) =>
    writeStatus(store, resource, {
      observedGeneration: resource.metadata.generation,
      conditions: conditions(resource.status.conditions, [condition], resource.metadata.generation, clock()),
    });
  return async (_name: string, resource: Resource | undefined): Promise<ReconcileResult> => {
    if (resource === undefined) return;
    if (resource.metadata.deletionTimestamp !== undefined) {
      if (!resource.metadata.finalizers.includes(queueFinalizer)) return;
      const plans = await remove(pool, queueIdOf(resource));
      if (plans.length === 0) {
        await keepFinalizer(store, resource, queueFinalizer, false);
        return;
      }
      const names = plans.map((plan) => `"${plan.name}" (${plan.id})`).join(', ');
      await status(resource, ready('False', 'InUse', `deletion waits: used by routing plan ${names}`));
      return { requeueAfterMs: inUseRecheckMs };
    }
    await keepFinalizer(store, resource, queueFinalizer, true);
    const fresh = (await store.get(resource.kind, resource.metadata.namespace, resource.metadata.name)) ?? resource;
    const outcome = await converge(pool, store, fresh);
    if (outcome === 'stale') return { requeueAfterMs: 0 };
    await status(fresh, outcome.ready);
    return outcome.requeueAfterMs === undefined ? undefined : { requeueAfterMs: outcome.requeueAfterMs };
  };
}
