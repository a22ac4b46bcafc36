/**
 * The `ResourceStore`: where the declarative configuration lives (docs/kubernetes.md, docs/routing-plans.md). In a
 * cluster it is Kubernetes custom resources; without one, a PostgreSQL table (postgres-store.ts). The API and the
 * operator see only this interface, with the Kubernetes semantics the operator relies on: `resourceVersion` changes at
 * every write and guards updates (409 `Conflict` when stale), `generation` counts spec changes, status is written
 * apart from the spec, finalizers hold a deletion (the resource is then only marked with `deletionTimestamp`), and a
 * watch from a list's `resourceVersion` sees every later change (ADDED, MODIFIED, DELETED), a late committer included.
 */

import type { Queryable } from '../database.ts';

export const resourceGroup = 'switchboard.dev';
export const resourceApiVersion = `${resourceGroup}/v1alpha1`;

export type ResourceKind = 'RoutingPlan' | 'Queue' | 'WebhookEndpoint' | 'EnginePool';

export interface ResourceMetadata {
  name: string;
  namespace: string;
  uid: string;
  resourceVersion: string;
  generation: number;
  labels: Record<string, string>;
  finalizers: string[];
  creationTimestamp: string;
  deletionTimestamp?: string;
}

export interface Resource<Spec = Record<string, unknown>, Status = Record<string, unknown>> {
  apiVersion: string;
  kind: ResourceKind;
  metadata: ResourceMetadata;
  spec: Spec;
  status: Status;
}

/** What a writer declares: the whole spec (apply replaces it), and optionally labels and finalizers. */
export interface ResourceIntent<Spec = Record<string, unknown>> {
  kind: ResourceKind;
  namespace: string;
  name: string;
  spec: Spec;
  labels?: Record<string, string>;
  finalizers?: string[];
}

export interface WriteOptions {
  /** Who writes (Kubernetes field manager), e.g. `switchboard-api`. */
  fieldManager: string;
  /** Refuse the write (ResourceConflict) unless the stored resourceVersion is this one. */
  resourceVersion?: string;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface WatchEvent {
  type: WatchEventType;
  object: Resource;
}

export interface Watch {
  stop(): Promise<void>;
}

export interface ResourceStore {
  /**
   * The same store bound to a connection (a transaction), for a store whose resources live in PostgreSQL; a store
   * elsewhere (Kubernetes) has none. Work that holds a transaction reads through it rather than take a second
   * connection from a pool it shares.
   */
  within?(db: Queryable): ResourceStore;
  get(kind: ResourceKind, namespace: string, name: string): Promise<Resource | undefined>;
  list(kind: ResourceKind, namespace: string): Promise<{ items: Resource[]; resourceVersion: string }>;
  /**
   * Calls `onEvent` for every change after `resourceVersion` (a list's), in commit order, until stopped.
   * `onError` hears a watch that broke; the caller lists again (the operator relists on 410 the same way).
   */
  watch(
    kind: ResourceKind,
    namespace: string,
    resourceVersion: string,
    onEvent: (event: WatchEvent) => void | Promise<void>,
    onError: (error: unknown) => void,
  ): Promise<Watch>;
  /** Creates the resource or replaces its spec (and labels/finalizers when given); generation counts spec changes. */
  apply(intent: ResourceIntent, options: WriteOptions): Promise<Resource>;
  /** Replaces the status (the status subresource); never touches spec or generation. */
  updateStatus(
    kind: ResourceKind,
    namespace: string,
    name: string,
    status: Record<string, unknown>,
    options: WriteOptions,
  ): Promise<Resource>;
  /** Replaces the finalizers; a resource marked for deletion goes once none remain. */
  setFinalizers(
    kind: ResourceKind,
    namespace: string,
    name: string,
    finalizers: string[],
    options: WriteOptions,
  ): Promise<Resource | undefined>;
  /**
   * Deletes the resource, or with finalizers left only marks it (deletionTimestamp) and returns it. Undefined when
   * there was nothing to delete.
   */
  delete(kind: ResourceKind, namespace: string, name: string, options: WriteOptions): Promise<Resource | undefined>;
}

/** A write refused because the resource changed since the caller read it (Kubernetes answers 409 Conflict). */
export class ResourceConflict extends Error {
  constructor(kind: ResourceKind, name: string) {
    super(`${kind} ${name} was changed by someone else; read it again`);
    this.name = 'ResourceConflict';
  }
}

export class ResourceNotFound extends Error {
  constructor(kind: ResourceKind, name: string) {
    super(`${kind} ${name} does not exist`);
    this.name = 'ResourceNotFound';
  }
}
