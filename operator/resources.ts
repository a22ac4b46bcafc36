/**
 * What every reconciler asks of a resource: the id of its record, whether its spec is one the API would take, and
 * whether it changed while a reconcile waited for a lock.
 */
import type { TSchema } from 'typebox';
import type { Queryable } from '../core/database.ts';
import type { Resource, ResourceStore } from '../core/resources/store.ts';
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
 * Whether the resource changed since `resource` was read. A reconcile asks while it holds its record's lock: a
 * request that wrote record and resource together has committed by then, and a pass with the older spec would undo
 * it (the newer one is queued and runs next). The PostgreSQL store reads through the reconcile's own transaction
 * `db` (a later statement sees what committed): a second connection from the pool it shares with the API would
 * deadlock once requests waiting on that lock hold every other one.
 */
export async function changedSince(store: ResourceStore, resource: Resource, db: Queryable): Promise<boolean> {
  const reader = store.within?.(db) ?? store;
  const current = await reader.get(resource.kind, resource.metadata.namespace, resource.metadata.name);
  return current?.metadata.resourceVersion !== resource.metadata.resourceVersion;
}
