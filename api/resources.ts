/**
 * The API's own writes of custom resources (docs/kubernetes.md): in `RESOURCE_NAMESPACE`, under the field manager
 * `switchboard-api`, labelled with the application (and workspace) they belong to, through the store bound to the
 * request's connection (the PostgreSQL store commits with the request's records).
 */
import type { Queryable } from '../core/database.ts';
import type { Resource, ResourceKind } from '../core/resources/store.ts';
import type { Services } from './route.ts';

const writer = { fieldManager: 'switchboard-api' };

export interface ResourceOwner {
  applicationId: string;
  /** Left out for resources of the whole application (webhook endpoints). */
  workspaceId?: string;
}

export function apiResources(services: Services, db: Queryable) {
  const store = services.resources(db);
  const namespace = services.config.resourceNamespace;
  return {
    /** Applies the whole spec (the resource's name is the record's id). */
    apply(kind: ResourceKind, name: string, spec: object, owner: ResourceOwner): Promise<Resource> {
      const labels: Record<string, string> = { 'switchboard.dev/application': owner.applicationId };
      if (owner.workspaceId !== undefined) labels['switchboard.dev/workspace'] = owner.workspaceId;
      return store.apply({ kind, namespace, name, spec: { ...spec }, labels }, writer);
    },
    updateStatus(kind: ResourceKind, name: string, status: Record<string, unknown>): Promise<Resource> {
      return store.updateStatus(kind, namespace, name, status, writer);
    },
    delete(kind: ResourceKind, name: string): Promise<Resource | undefined> {
      return store.delete(kind, namespace, name, writer);
    },
  };
}
