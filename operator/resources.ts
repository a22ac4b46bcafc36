/**
 * What every reconciler asks of a resource: the id of its record, whether its spec is one the API would take, and
 * whether it changed while a reconcile waited for a lock.
 */
import type { TSchema } from 'typebox';
import type { Queryable } from '../core/database.ts';
import type { Resource, ResourceStore } from '../core/resources/store.ts';
import { writeAhead } from '../core/resources/writes.ts';
import { compileStrict, describeValidationError } from '../core/validation.ts';

/** The record's id: the spec's `id`, or (a resource written without one) its uid. */
export function recordIdOf(resource: Resource): string {
  return (resource.spec as { id?: string }).id ?? resource.metadata.uid;
}

/**
 * A check of a kind's spec against its schema: undefined when it passes, otherwise the problem (`spec.strategy must
 * be one of ...`). A cluster's API server checks the CRD's schema before a resource is stored; without a cluster
 * nothing has, so the reconcilers check before a spec reaches a record.
 */
export function specCheck(schema: TSchema): (spec: unknown) => string | undefined {
  const check = compileStrict(schema);
  return (spec) => (check(spec) ? undefined : describeValidationError('spec', check.errors ?? []));
}

/**
 * How soon a reconcile that found its resource stale (`changedSince`) runs again: the newer resource is queued by
 * then, or the API's write of it still pending (carried within a request, else by a sweep every few seconds).
 */
export const staleRequeueMs = 2_000;

/**
 * Whether the records must not follow `resource` as read: a request of the API changed them and the resource since.
 * A reconcile asks while it holds its record's lock, so a request that wrote the record has committed by then, and a
 * pass with the older spec would undo it (the newer one is queued and runs next).
 *
 * - Without a cluster the API writes record and resource in one transaction, and the PostgreSQL store reads the
 *   resource again through the reconcile's own transaction `db` (a later statement sees what committed): a second
 *   connection from the pool it shares with the API would deadlock once requests waiting on that lock hold every
 *   other one.
 * - In a cluster the API's write reaches the Kubernetes API after its records committed (api/resources.ts), and
 *   nothing is asked of the Kubernetes API while the lock is held: `resource_writes` says whether a write of the
 *   resource is still pending, or applied a later generation than the one read (core/resources/writes.ts).
 */
export async function changedSince(store: ResourceStore, resource: Resource, db: Queryable): Promise<boolean> {
  const { kind, metadata } = resource;
  if (store.within === undefined) {
    return writeAhead(db, { kind, namespace: metadata.namespace, name: metadata.name }, metadata);
  }
  const current = await store.within(db).get(kind, metadata.namespace, metadata.name);
  return current?.metadata.resourceVersion !== metadata.resourceVersion;
}
