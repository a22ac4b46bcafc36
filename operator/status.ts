/**
 * The operator's status writes. Conditions are built by core/resources/conditions.ts (each with the generation it
 * describes, and a `lastTransitionTime` that moves only when its status changes), the same function the REST API
 * uses. A status equal to the stored one is not written again, so a reconcile that changes nothing causes no watch
 * event and no loop.
 */
import { isDeepStrictEqual } from 'node:util';
import { type Condition, type ConditionInput, conditions } from '../core/resources/conditions.ts';
import type { Resource, ResourceStore } from '../core/resources/store.ts';

export { type Condition, type ConditionInput, conditions };

export const operatorFieldManager = 'switchboard-operator';

/** Writes `status` unless the resource already has it. */
export async function writeStatus(
  store: ResourceStore,
  resource: Resource,
  status: Record<string, unknown>,
): Promise<void> {
  if (isDeepStrictEqual(resource.status, status)) return;
  await store.updateStatus(resource.kind, resource.metadata.namespace, resource.metadata.name, status, {
    fieldManager: operatorFieldManager,
  });
}

/**
 * Adds or removes one finalizer, leaving the others; returns the resource as it now is (undefined once a removal let
 * a resource marked for deletion go).
 */
export async function keepFinalizer(
  store: ResourceStore,
  resource: Resource,
  finalizer: string,
  keep: boolean,
): Promise<Resource | undefined> {
  const has = resource.metadata.finalizers.includes(finalizer);
  if (has === keep) return resource;
  const finalizers = keep
    ? [...resource.metadata.finalizers, finalizer]
    : resource.metadata.finalizers.filter((name) => name !== finalizer);
  return store.setFinalizers(resource.kind, resource.metadata.namespace, resource.metadata.name, finalizers, {
    fieldManager: operatorFieldManager,
    resourceVersion: resource.metadata.resourceVersion,
  });
}

export function ready(status: ConditionInput['status'], reason: string, message: string): ConditionInput {
  return { type: 'Ready', status, reason, message };
}

/** A status of one `Ready` condition (queues, webhook endpoints), for the resource's current generation. */
export function writeReady(store: ResourceStore, resource: Resource, condition: ConditionInput, now: Date) {
  return writeStatus(store, resource, {
    observedGeneration: resource.metadata.generation,
    conditions: conditions(resource.status.conditions, [condition], resource.metadata.generation, now),
  });
}

/** Whether the resource's status says `Ready=True` (for its current generation or an older one). */
export function isReady(resource: Resource): boolean {
  const seen = resource.status.conditions;
  return Array.isArray(seen) && (seen as Condition[]).some((c) => c.type === 'Ready' && c.status === 'True');
}
