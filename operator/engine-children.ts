/**
 * The engine pool's children in a cluster (docs/kubernetes.md, Engine pools): applied with server-side apply under
 * the operator's field manager (the builders in engine-pool.ts give the whole desired object, owner reference
 * included, so Kubernetes deletes them with their EnginePool), pruned when the spec stops asking for one (the SIP
 * Service of a pool moved onto the host network), and read back for the pool's readiness.
 */
import {
  KubernetesObjectApi,
  type KubeConfig,
  type KubernetesObject,
  PatchStrategy,
  type V1Deployment,
} from '@kubernetes/client-node';
import { watchKubernetes } from '../core/resources/kubernetes-watch.ts';
import type { Watch } from '../core/resources/store.ts';
import type { RelatedWatch } from './controller.ts';
import { statusOf } from '../core/resources/kubernetes-store.ts';
import { type EnginePoolChild, type EngineResource, engineManagedBy, enginePoolLabels } from './engine-pool.ts';
import { operatorFieldManager } from './status.ts';
import { assertNotHoldingConnection } from '../core/held-connections.ts';

/** Where an engine pool's children live: the cluster (here), or nowhere without one. */
export interface EngineChildren extends RelatedWatch {
  apply(child: EnginePoolChild): Promise<void>;
  /** Deletes the pool's children that `keep` does not name. */
  prune(engine: EngineResource, keep: readonly EnginePoolChild[]): Promise<void>;
  /** The Deployment's ready pods, once its controller has seen its newest spec; undefined before that. */
  readyReplicas(engine: EngineResource, deploymentName: string): Promise<number | undefined>;
}

/** The kinds an engine pool has children of, in the order they are pruned. */
const childKinds = [
  { apiVersion: 'policy/v1', kind: 'PodDisruptionBudget' },
  { apiVersion: 'v1', kind: 'Service' },
  { apiVersion: 'apps/v1', kind: 'Deployment' },
  { apiVersion: 'v1', kind: 'ConfigMap' },
] as const;

/** Every engine pool's pods, whichever EnginePool they belong to. */
const poolsSelector = `app.kubernetes.io/component=engine,app.kubernetes.io/managed-by=${engineManagedBy}`;

const selectorOf = (labels: Record<string, string>) =>
  Object.entries(labels)
    .map(([key, value]) => `${key}=${value}`)
    .join(',');

export class KubernetesEngineChildren implements EngineChildren {
  private readonly objects: KubernetesObjectApi;

  constructor(private readonly config: KubeConfig) {
    this.objects = KubernetesObjectApi.makeApiClient(config);
  }

  /**
   * The pools' Deployments: a rollout's progress (ready pods, a new generation observed) queues the EnginePool it
   * belongs to (its `app.kubernetes.io/instance`), so the EnginePool's status follows without polling.
   */
  async watch(namespace: string, concerns: (name: string) => void, onError: (error: unknown) => void): Promise<Watch> {
    assertNotHoldingConnection("a watch of the pools' Deployments");
    const listed = await this.objects.list(
      'apps/v1',
      'Deployment',
      namespace,
      undefined,
      undefined,
      undefined,
      undefined,
      poolsSelector,
    );
    return watchKubernetes(
      this.config,
      {
        path: `/apis/apps/v1/namespaces/${encodeURIComponent(namespace)}/deployments`,
        resourceVersion: listed.metadata?.resourceVersion ?? '',
        labelSelector: poolsSelector,
      },
      (_type, deployment) => {
        const engine = deployment.metadata?.labels?.['app.kubernetes.io/instance'];
        if (engine !== undefined) concerns(engine);
      },
      onError,
    );
  }

  async apply(child: EnginePoolChild): Promise<void> {
    assertNotHoldingConnection(`an apply of ${child.kind} ${child.metadata?.name ?? ''}`);
    // Server-side apply names its patch type: the client's default (strategic merge) is not apply.
    await this.objects.patch(
      child as KubernetesObject,
      undefined,
      undefined,
      operatorFieldManager,
      true,
      PatchStrategy.ServerSideApply,
    );
  }

  async prune(engine: EngineResource, keep: readonly EnginePoolChild[]): Promise<void> {
    const wanted = new Set(keep.map((child) => `${child.kind}/${child.metadata?.name ?? ''}`));
    const namespace = engine.metadata.namespace;
    const labelSelector = selectorOf(enginePoolLabels(engine));
    for (const { apiVersion, kind } of childKinds) {
      const listed = await this.objects.list(
        apiVersion,
        kind,
        namespace,
        undefined,
        undefined,
        undefined,
        undefined,
        labelSelector,
      );
      for (const item of listed.items) {
        const owned = item.metadata?.ownerReferences?.some((owner) => owner.uid === engine.metadata.uid) ?? false;
        const managed = item.metadata?.labels?.['app.kubernetes.io/managed-by'] === engineManagedBy;
        if (!owned || !managed || wanted.has(`${kind}/${item.metadata?.name ?? ''}`)) continue;
        try {
          await this.objects.delete({ apiVersion, kind, metadata: { name: item.metadata?.name ?? '', namespace } });
        } catch (error) {
          if (statusOf(error) !== 404) throw error;
        }
      }
    }
  }

  async readyReplicas(engine: EngineResource, deploymentName: string): Promise<number | undefined> {
    assertNotHoldingConnection(`a read of Deployment ${deploymentName}`);
    try {
      const deployment = await this.objects.read<V1Deployment>({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: deploymentName, namespace: engine.metadata.namespace },
      });
      const observed = deployment.status?.observedGeneration ?? 0;
      if (observed < (deployment.metadata?.generation ?? 0)) return undefined;
      return deployment.status?.readyReplicas ?? 0;
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw error;
    }
  }
}
