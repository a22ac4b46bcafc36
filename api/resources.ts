/**
 * The API's own writes of custom resources (docs/kubernetes.md): in `RESOURCE_NAMESPACE`, under the field manager
 * `switchboard-api`, labelled with the application (and workspace) they belong to. Without a cluster the PostgreSQL
 * store writes them in the request's transaction, with its records. In a cluster the request records each write
 * (core/resources/writes.ts) and the Kubernetes API gets it once the transaction committed (api/resource-writes.ts),
 * before the request answers: no database connection is held while the Kubernetes API answers.
 */
import type { StatusIntent } from '../core/resources/writes.ts';
import { recordWrite } from '../core/resources/writes.ts';
import type { ResourceKind } from '../core/resources/store.ts';
import { apiWriter, statusOf } from './resource-writes.ts';
import type { HandlerContext } from './route.ts';

export interface ResourceOwner {
  applicationId: string;
  /** Left out for resources of the whole application (webhook endpoints). */
  workspaceId?: string;
}

export function apiResources(context: Pick<HandlerContext, 'services' | 'db' | 'afterCommit'>) {
  const { services, db } = context;
  const namespace = services.config.resourceNamespace;
  const writes = services.resourceWrites;
  return {
    /**
     * Applies the whole spec (the resource's name is the record's id), then, when given, the status: `status`'s
     * fields and conditions for the generation applied.
     */
    async apply(
      kind: ResourceKind,
      name: string,
      spec: object,
      owner: ResourceOwner,
      status?: StatusIntent,
    ): Promise<void> {
      const labels: Record<string, string> = { 'switchboard.dev/application': owner.applicationId };
      if (owner.workspaceId !== undefined) labels['switchboard.dev/workspace'] = owner.workspaceId;
      if (writes === undefined) {
        const store = services.resources(db);
        const resource = await store.apply({ kind, namespace, name, spec: { ...spec }, labels }, apiWriter);
        if (status !== undefined) {
          await store.updateStatus(kind, namespace, name, statusOf(resource, status, new Date()), apiWriter);
        }
        return;
      }
      const key = { kind, namespace, name };
      await recordWrite(db, key, {
        operation: 'apply',
        spec: { ...spec },
        labels,
        ...(status === undefined ? {} : { status }),
      });
      context.afterCommit(() => writes.carry([key]));
    },
    async delete(kind: ResourceKind, name: string): Promise<void> {
      if (writes === undefined) {
        await services.resources(db).delete(kind, namespace, name, apiWriter);
        return;
      }
      const key = { kind, namespace, name };
      await recordWrite(db, key, { operation: 'delete' });
      context.afterCommit(() => writes.carry([key]));
    },
  };
}
