/**
 * The ResourceStore in a cluster: the custom resources themselves, through the Kubernetes API with
 * `@kubernetes/client-node` 1.4 (docs/kubernetes.md). The API writes a resource by server-side apply under its field
 * manager (`switchboard-api`), so fields a GitOps tool owns stay as that tool set them; the operator writes status and
 * finalizers with patches that carry the resourceVersion it read, which the API server turns into a 409 when stale.
 *
 * Unlike the PostgreSQL store, a write here does not commit with the request's transaction, and is never made while
 * one is open: the API records its write with its records and carries it here once they committed (api/resources.ts),
 * and a reconcile asks PostgreSQL, not this store, whether a request changed the resource meanwhile.
 */
import {
  ApiException,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { assertNotHoldingConnection } from '../held-connections.ts';
import { crdVersion, kinds } from './crds.ts';
import { watchKubernetes } from './kubernetes-watch.ts';
import {
  type Resource,
  ResourceConflict,
  type ResourceIntent,
  type ResourceKind,
  ResourceNotFound,
  type ResourceStore,
  resourceApiVersion,
  resourceGroup,
  type Watch,
  type WatchEvent,
  type WriteOptions,
} from './store.ts';

/** A write the API server refused as invalid (422): the resource breaks its CRD's schema or a CEL rule. */
export class ResourceInvalid extends Error {
  constructor(
    kind: ResourceKind,
    name: string,
    readonly causes: Array<{ field?: string; message?: string }>,
  ) {
    super(
      `${kind} ${name} was refused by the Kubernetes API: ${causes.map((cause) => `${cause.field ?? ''}: ${cause.message ?? ''}`).join('; ')}`,
    );
    this.name = 'ResourceInvalid';
  }
}

interface KubernetesResource extends KubernetesObject {
  metadata?: KubernetesObject['metadata'] & { deletionTimestamp?: Date | string };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

const pluralOf = new Map<ResourceKind, string>(kinds.map((definition) => [definition.kind, definition.plural]));

function plural(kind: ResourceKind): string {
  const name = pluralOf.get(kind);
  if (name === undefined) throw new Error(`no custom resource definition for ${kind}`);
  return name;
}

const timestamp = (value: Date | string | undefined) =>
  value === undefined ? undefined : value instanceof Date ? value.toISOString() : value;

/** A custom resource as the API server answers it, in the store's shape. */
export function resourceOf(object: KubernetesResource): Resource {
  const metadata = object.metadata ?? {};
  const deletionTimestamp = timestamp(metadata.deletionTimestamp);
  return {
    apiVersion: object.apiVersion ?? resourceApiVersion,
    kind: object.kind as ResourceKind,
    metadata: {
      name: metadata.name ?? '',
      namespace: metadata.namespace ?? '',
      uid: metadata.uid ?? '',
      resourceVersion: metadata.resourceVersion ?? '',
      generation: metadata.generation ?? 0,
      labels: metadata.labels ?? {},
      finalizers: metadata.finalizers ?? [],
      creationTimestamp: timestamp(metadata.creationTimestamp) ?? '',
      ...(deletionTimestamp === undefined ? {} : { deletionTimestamp }),
    },
    spec: object.spec ?? {},
    status: object.status ?? {},
  };
}

/** The HTTP status of a refusal by the API server, if it is one. */
export function statusOf(error: unknown): number | undefined {
  return error instanceof ApiException ? error.code : undefined;
}

function causesOf(error: unknown): Array<{ field?: string; message?: string }> {
  if (!(error instanceof ApiException)) return [];
  let body: unknown = error.body;
  if (typeof body === 'string') {
    try {
      body = JSON.parse(body);
    } catch {
      return [{ message: body as string }];
    }
  }
  const status = body as { message?: string; details?: { causes?: Array<{ field?: string; message?: string }> } };
  return status?.details?.causes ?? [{ message: status?.message ?? error.message }];
}

/** Kubernetes' refusals as the store's errors (what the API and the operator already handle). */
function translate(error: unknown, kind: ResourceKind, name: string): unknown {
  switch (statusOf(error)) {
    case 404:
      return new ResourceNotFound(kind, name);
    case 409:
      return new ResourceConflict(kind, name);
    case 422:
      return new ResourceInvalid(kind, name, causesOf(error));
    default:
      return error;
  }
}

/** A request's failure as the store's error (`.catch(refused(kind, name))`). */
const refused =
  (kind: ResourceKind, name: string) =>
  (error: unknown): never => {
    throw translate(error, kind, name);
  };

/** The same, but a resource that is not there is `undefined`. */
const absentOrRefused =
  (kind: ResourceKind, name: string) =>
  (error: unknown): undefined => {
    if (statusOf(error) === 404) return undefined;
    throw translate(error, kind, name);
  };

export class KubernetesResourceStore implements ResourceStore {
  private readonly api: CustomObjectsApi;

  constructor(private readonly config: KubeConfig) {
    this.api = config.makeApiClient(CustomObjectsApi);
  }

  private address(kind: ResourceKind, namespace: string) {
    return { group: resourceGroup, version: crdVersion, namespace, plural: plural(kind) };
  }

  async get(kind: ResourceKind, namespace: string, name: string): Promise<Resource | undefined> {
    assertNotHoldingConnection(`a read of ${kind} ${name} from the Kubernetes API`);
    const found = await this.api
      .getNamespacedCustomObject({ ...this.address(kind, namespace), name })
      .catch(absentOrRefused(kind, name));
    return found === undefined ? undefined : resourceOf(found);
  }

  async list(kind: ResourceKind, namespace: string): Promise<{ items: Resource[]; resourceVersion: string }> {
    assertNotHoldingConnection(`a list of ${kind} from the Kubernetes API`);
    const listed = (await this.api
      .listNamespacedCustomObject(this.address(kind, namespace))
      .catch(refused(kind, '(list)'))) as {
      items?: KubernetesResource[];
      metadata?: { resourceVersion?: string };
    };
    return {
      items: (listed.items ?? []).map((item) => resourceOf({ ...item, kind, apiVersion: resourceApiVersion })),
      resourceVersion: listed.metadata?.resourceVersion ?? '',
    };
  }

  /**
   * Server-side apply of the intent: the manager owns the fields it sets, takes them over from other managers
   * (`force`: the API's write is the user's request), and fields it set before and now leaves out go. An expected
   * resourceVersion in the applied object is a precondition (409 when stale).
   */
  async apply(intent: ResourceIntent, options: WriteOptions): Promise<Resource> {
    assertNotHoldingConnection(`an apply of ${intent.kind} ${intent.name} to the Kubernetes API`);
    const body = {
      apiVersion: resourceApiVersion,
      kind: intent.kind,
      metadata: {
        name: intent.name,
        namespace: intent.namespace,
        ...(intent.labels === undefined ? {} : { labels: intent.labels }),
        ...(intent.finalizers === undefined ? {} : { finalizers: intent.finalizers }),
        ...(options.resourceVersion === undefined ? {} : { resourceVersion: options.resourceVersion }),
      },
      spec: intent.spec,
    };
    const applied = await this.api
      .patchNamespacedCustomObject(
        {
          ...this.address(intent.kind, intent.namespace),
          name: intent.name,
          body,
          fieldManager: options.fieldManager,
          force: true,
        },
        setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
      )
      .catch(refused(intent.kind, intent.name));
    return resourceOf(applied);
  }

  /**
   * Replaces the status through the status subresource with a JSON patch (a merge patch could not drop a key). With
   * an expected resourceVersion the patch also sets it, which the API server checks against the stored one.
   */
  async updateStatus(
    kind: ResourceKind,
    namespace: string,
    name: string,
    status: Record<string, unknown>,
    options: WriteOptions,
  ): Promise<Resource> {
    assertNotHoldingConnection(`a status write of ${kind} ${name} to the Kubernetes API`);
    const body = [
      ...(options.resourceVersion === undefined
        ? []
        : [{ op: 'replace', path: '/metadata/resourceVersion', value: options.resourceVersion }]),
      { op: 'add', path: '/status', value: status },
    ];
    const patched = await this.api
      .patchNamespacedCustomObjectStatus(
        { ...this.address(kind, namespace), name, body, fieldManager: options.fieldManager },
        setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
      )
      .catch(refused(kind, name));
    return resourceOf(patched);
  }

  async setFinalizers(
    kind: ResourceKind,
    namespace: string,
    name: string,
    finalizers: string[],
    options: WriteOptions,
  ): Promise<Resource | undefined> {
    assertNotHoldingConnection(`a finalizers write of ${kind} ${name} to the Kubernetes API`);
    const body = {
      metadata: {
        finalizers,
        ...(options.resourceVersion === undefined ? {} : { resourceVersion: options.resourceVersion }),
      },
    };
    const resource = resourceOf(
      await this.api
        .patchNamespacedCustomObject(
          { ...this.address(kind, namespace), name, body, fieldManager: options.fieldManager },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        )
        .catch(refused(kind, name)),
    );
    // The last finalizer of a resource marked for deletion let it go: the answer is its final state.
    return resource.metadata.deletionTimestamp !== undefined && finalizers.length === 0 ? undefined : resource;
  }

  async delete(
    kind: ResourceKind,
    namespace: string,
    name: string,
    options: WriteOptions,
  ): Promise<Resource | undefined> {
    assertNotHoldingConnection(`a delete of ${kind} ${name} through the Kubernetes API`);
    const answer = (await this.api
      .deleteNamespacedCustomObject({
        ...this.address(kind, namespace),
        name,
        propagationPolicy: 'Background',
        body: {
          propagationPolicy: 'Background',
          ...(options.resourceVersion === undefined
            ? {}
            : { preconditions: { resourceVersion: options.resourceVersion } }),
        },
      })
      .catch(absentOrRefused(kind, name))) as KubernetesResource | undefined;
    // The API server answers the object (marked when finalizers hold it) or, for some kinds, a Status.
    return answer?.kind === kind ? resourceOf(answer) : undefined;
  }

  /** Watches with bookmarks from `resourceVersion` (kubernetes-watch.ts: in order, resumed, 410 to `onError`). */
  watch(
    kind: ResourceKind,
    namespace: string,
    resourceVersion: string,
    onEvent: (event: WatchEvent) => void | Promise<void>,
    onError: (error: unknown) => void,
  ): Promise<Watch> {
    const path = `/apis/${resourceGroup}/${crdVersion}/namespaces/${encodeURIComponent(namespace)}/${plural(kind)}`;
    return watchKubernetes(
      this.config,
      { path, resourceVersion },
      (type, object) => onEvent({ type, object: resourceOf({ ...object, kind, apiVersion: resourceApiVersion }) }),
      onError,
    );
  }
}
