/**
 * The Kubernetes API test server (test/helpers/kube-api-server.ts) pinned with the real `@kubernetes/client-node` 1.4:
 * what a client sees from it is what it would see from kube-apiserver (REST verbs, resourceVersion and 409, patches
 * and server-side apply, the status subresource, finalizers, owner references, CRD validation, watches with bookmarks
 * and 410), and the faults tests inject reach the client the way real ones do.
 */
import {
  ApiException,
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  KubernetesObjectApi,
  type KubernetesObject,
  PatchStrategy,
  setHeaderOptions,
  Watch,
} from '@kubernetes/client-node';
import test, { type ExecutionContext } from 'ava';
import { type KubeApiServer, startKubeApiServer } from '../helpers/kube-api-server.ts';

type Json = Record<string, unknown>;

const group = 'switchboard.dev';
const version = 'v1alpha1';
const apiVersion = `${group}/${version}`;
const namespace = 'switchboard';

const engineSpec = { replicas: 2, image: 'ghcr.io/example/switchboard:0.1.0' };
const queueSpec = {
  applicationId: 'app-1',
  workspaceId: '0b5c3a2e-6f7d-4a8b-9c1d-2e3f4a5b6c7d',
  name: 'Sales',
  strategy: 'longest_idle',
  wrapUpSecs: 30,
  members: [],
};

interface Clients {
  server: KubeApiServer;
  config: KubeConfig;
  objects: KubernetesObjectApi;
  custom: CustomObjectsApi;
  core: CoreV1Api;
}

async function start(t: ExecutionContext, options: Parameters<typeof startKubeApiServer>[0] = {}): Promise<Clients> {
  const server = await startKubeApiServer({ bookmarkIntervalMs: 50, ...options });
  t.teardown(() => server.close());
  const config = server.kubeConfig(namespace);
  return {
    server,
    config,
    objects: KubernetesObjectApi.makeApiClient(config),
    custom: config.makeApiClient(CustomObjectsApi),
    core: config.makeApiClient(CoreV1Api),
  };
}

const engine = (name: string, spec: Json = engineSpec, metadata: Json = {}) =>
  ({ apiVersion, kind: 'EnginePool', metadata: { name, ...metadata }, spec }) as KubernetesObject & { spec: Json };
const address = (plural: string) => ({ group, version, namespace, plural });

/** The ApiException a call is refused with: its code and the Status it carries (the client leaves the body text). */
async function refusal(t: ExecutionContext, call: Promise<unknown>): Promise<{ code: number; status: Json }> {
  const error = await t.throwsAsync(call, { instanceOf: ApiException });
  const { code, body } = error as unknown as ApiException<string>;
  return { code, status: JSON.parse(body) as Json };
}

interface Event {
  type: string;
  object: Json & { metadata?: Json };
}

/** A watch through client-node's Watch, its events collected; `until` waits for one, `done` for the end. */
async function watch(config: KubeConfig, path: string, query: Record<string, string | number | boolean> = {}) {
  const events: Event[] = [];
  const waiters: Array<{ test: (event: Event) => boolean; resolve: (event: Event) => void }> = [];
  let finish!: (error: unknown) => void;
  const done = new Promise<unknown>((resolve) => (finish = resolve));
  const controller = await new Watch(config).watch(
    path,
    query,
    (type, object: Event['object']) => {
      const event = { type, object };
      events.push(event);
      for (const waiter of [...waiters]) {
        if (waiter.test(event)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(event);
        }
      }
    },
    (error) => finish(error),
  );
  const until = (test: (event: Event) => boolean) => {
    const seen = events.find(test);
    return seen ? Promise.resolve(seen) : new Promise<Event>((resolve) => waiters.push({ test, resolve }));
  };
  return { events, until, done, stop: () => controller.abort() };
}

const enginesPath = `/apis/${apiVersion}/namespaces/${namespace}/enginepools`;

test('discovery names each kind’s plural; create, get and list through KubernetesObjectApi', async (t) => {
  const { server, objects, core } = await start(t);
  const created = await objects.create(engine('pool-a'));
  t.is(created.metadata?.namespace, namespace, 'the namespace comes from the context');
  t.is(created.metadata?.generation, 1);
  t.regex(created.metadata?.uid ?? '', /^[0-9a-f-]{36}$/);
  t.regex(created.metadata?.resourceVersion ?? '', /^\d+$/);
  t.true(created.metadata?.creationTimestamp instanceof Date, 'the client parses the RFC 3339 timestamp');
  t.true(server.requests.some((request) => request.method === 'GET' && request.path === `/apis/${apiVersion}`));

  const read = await objects.read({ apiVersion, kind: 'EnginePool', metadata: { name: 'pool-a', namespace } });
  t.deepEqual((read as unknown as Json).spec, engineSpec);

  const generated = await core.createNamespacedConfigMap({
    namespace,
    body: { metadata: { generateName: 'settings-', labels: { tier: 'a' } }, data: { a: '1' } },
  });
  t.regex(generated.metadata?.name ?? '', /^settings-[a-z0-9]{5}$/);
  await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'other', labels: { tier: 'b' } } } });

  const all = await core.listNamespacedConfigMap({ namespace });
  t.is(all.items.length, 2);
  t.is(all.metadata?.resourceVersion, server.resourceVersion());
  const labelled = await core.listNamespacedConfigMap({ namespace, labelSelector: 'tier=b' });
  t.deepEqual(
    labelled.items.map((item) => item.metadata?.name),
    ['other'],
  );
  const named = await core.listNamespacedConfigMap({ namespace, fieldSelector: 'metadata.name=other' });
  t.is(named.items.length, 1);
  t.is((await core.listNamespacedConfigMap({ namespace: 'elsewhere' })).items.length, 0);

  const duplicate = await refusal(t, objects.create(engine('pool-a')));
  t.is(duplicate.code, 409);
  t.is(duplicate.status.reason, 'AlreadyExists');
  t.is(duplicate.status.message, 'enginepools.switchboard.dev "pool-a" already exists');
  const missing = await refusal(
    t,
    objects.read({ apiVersion, kind: 'EnginePool', metadata: { name: 'nope', namespace } }),
  );
  t.is(missing.code, 404);
  t.is(missing.status.message, 'enginepools.switchboard.dev "nope" not found');
  t.deepEqual(missing.status.details, { name: 'nope', group, kind: 'enginepools' });
});

test('a replace with a stale resourceVersion is a 409 Conflict; a custom resource must name one', async (t) => {
  const { custom } = await start(t);
  const first = await custom.createNamespacedCustomObject({ ...address('queues'), body: queueObject('sales') });
  const updated = await custom.replaceNamespacedCustomObject({
    ...address('queues'),
    name: 'sales',
    body: { ...first, spec: { ...queueSpec, name: 'Sales team' } },
  });
  t.not(updated.metadata.resourceVersion, first.metadata.resourceVersion);
  t.is(updated.metadata.generation, 2);

  const stale = await refusal(
    t,
    custom.replaceNamespacedCustomObject({ ...address('queues'), name: 'sales', body: { ...first, spec: queueSpec } }),
  );
  t.is(stale.code, 409);
  t.is(stale.status.reason, 'Conflict');
  t.is(
    stale.status.message,
    'Operation cannot be fulfilled on queues.switchboard.dev "sales": the object has been modified; please apply your changes to the latest version and try again',
  );

  const { resourceVersion: _, ...unversioned } = updated.metadata as Json;
  const blind = await refusal(
    t,
    custom.replaceNamespacedCustomObject({
      ...address('queues'),
      name: 'sales',
      body: { ...updated, metadata: unversioned },
    }),
  );
  t.is(blind.code, 422);
});

const queueObject = (name: string, spec: Json = queueSpec) => ({ apiVersion, kind: 'Queue', metadata: { name }, spec });

test('merge and JSON patches; a failed JSON patch test is 422; strategic merge is refused for a custom resource', async (t) => {
  const { custom, objects, core } = await start(t);
  await custom.createNamespacedCustomObject({ ...address('queues'), body: queueObject('sales') });
  const merged = await custom.patchNamespacedCustomObject(
    { ...address('queues'), name: 'sales', body: { spec: { wrapUpSecs: 10 }, metadata: { labels: { a: 'b' } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  t.is(merged.spec.wrapUpSecs, 10);
  t.is(merged.spec.name, 'Sales', 'a merge patch keeps what it does not name');
  t.deepEqual(merged.metadata.labels, { a: 'b' });

  // client-node's typed APIs send a JSON patch when no Content-Type is set.
  const patched = await custom.patchNamespacedCustomObject({
    ...address('queues'),
    name: 'sales',
    body: [
      { op: 'test', path: '/spec/wrapUpSecs', value: 10 },
      { op: 'replace', path: '/spec/strategy', value: 'round_robin' },
      { op: 'remove', path: '/metadata/labels/a' },
    ],
  });
  t.is(patched.spec.strategy, 'round_robin');
  t.deepEqual(patched.metadata.labels ?? {}, {});

  const failed = await refusal(
    t,
    custom.patchNamespacedCustomObject({
      ...address('queues'),
      name: 'sales',
      body: [{ op: 'test', path: '/spec/wrapUpSecs', value: 99 }],
    }),
  );
  t.is(failed.code, 422);
  t.regex(failed.status.message as string, /testing value \/spec\/wrapUpSecs failed/);

  // A JSON patch replacing metadata.resourceVersion makes it a precondition.
  const stale = await refusal(
    t,
    custom.patchNamespacedCustomObject({
      ...address('queues'),
      name: 'sales',
      body: [
        { op: 'replace', path: '/metadata/resourceVersion', value: '1' },
        { op: 'replace', path: '/spec/wrapUpSecs', value: 5 },
      ],
    }),
  );
  t.is(stale.code, 409);

  // KubernetesObjectApi.patch defaults to a strategic merge patch, which custom resources do not take.
  const strategic = await refusal(t, objects.patch({ ...queueObject('sales'), spec: { wrapUpSecs: 1 } }));
  t.is(strategic.code, 415);
  t.is(strategic.status.reason, 'UnsupportedMediaType');
  await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'settings' }, data: { a: '1' } } });
  const configMap = await objects.patch({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'settings' },
    data: { b: '2' },
  } as KubernetesObject);
  t.deepEqual((configMap as unknown as { data: Json }).data, { a: '1', b: '2' }, 'built-in kinds take it');
});

test('server-side apply: creates, owns fields per manager, drops what a manager stops applying, conflicts and force', async (t) => {
  const { objects, custom } = await start(t);
  const apply = (spec: Json, manager: string, force?: boolean, labels?: Json) =>
    objects.patch(
      engine('pool-a', spec, labels === undefined ? {} : { labels }),
      undefined,
      undefined,
      manager,
      force,
      PatchStrategy.ServerSideApply,
    ) as Promise<KubernetesObject & { spec: Json }>;

  const created = await apply({ ...engineSpec, sipPort: 5070 }, 'gitops', undefined, { team: 'voice' });
  t.is(created.metadata?.generation, 1);
  t.deepEqual(
    created.metadata?.managedFields?.map((entry) => [entry.manager, entry.operation, entry.fieldsType]),
    [['gitops', 'Apply', 'FieldsV1']],
  );
  t.deepEqual(created.metadata?.managedFields?.[0]?.fieldsV1, {
    'f:metadata': { 'f:labels': { 'f:team': {} } },
    'f:spec': { 'f:replicas': {}, 'f:image': {}, 'f:sipPort': {} },
  });

  // The same manager leaves out sipPort and the label: they go.
  const trimmed = await apply(engineSpec, 'gitops');
  t.deepEqual(trimmed.spec, engineSpec);
  t.is(trimmed.metadata?.labels, undefined);
  t.is(trimmed.metadata?.generation, 2);
  const again = await apply(engineSpec, 'gitops');
  t.is(again.metadata?.resourceVersion, trimmed.metadata?.resourceVersion, 'applying the same again changes nothing');

  // Another manager setting a field gitops owns to another value: 409 naming the conflict.
  const clash = await refusal(t, apply({ replicas: 5 }, 'operator'));
  t.is(clash.code, 409);
  t.is(clash.status.reason, 'Conflict');
  t.is(clash.status.message, 'Apply failed with 1 conflict: conflict with "gitops": .spec.replicas');
  t.deepEqual((clash.status.details as Json).causes, [
    { reason: 'FieldManagerConflict', message: 'conflict with "gitops"', field: '.spec.replicas' },
  ]);
  // The same value is no conflict (both own it); force takes the field over.
  await apply({ image: engineSpec.image }, 'operator');
  const forced = await apply({ replicas: 5 }, 'operator', true);
  t.is(forced.spec.replicas, 5);
  const owners = Object.fromEntries(
    (forced.metadata?.managedFields ?? []).map((entry) => [
      entry.manager,
      Object.keys((entry.fieldsV1 as Json)['f:spec'] as Json),
    ]),
  );
  t.deepEqual(owners, { gitops: ['f:image'], operator: ['f:replicas'] });

  // fieldManager is required; force is only for apply.
  const unmanaged = await refusal(
    t,
    custom.patchNamespacedCustomObject(
      { ...address('enginepools'), name: 'pool-a', body: engine('pool-a') },
      setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
    ),
  );
  t.is(unmanaged.code, 422);
  t.regex(unmanaged.status.message as string, /fieldManager: Required value/);
  const forcedMerge = await refusal(
    t,
    custom.patchNamespacedCustomObject(
      { ...address('enginepools'), name: 'pool-a', body: { spec: { replicas: 1 } }, force: true },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    ),
  );
  t.is(forcedMerge.code, 422);
});

test('the status subresource: spec writes ignore status, status writes ignore the rest; generation follows the spec', async (t) => {
  const { custom } = await start(t);
  const created = await custom.createNamespacedCustomObject({
    ...address('enginepools'),
    body: { ...engine('pool-a'), status: { readyReplicas: 9 } },
  });
  t.is(created.status, undefined, 'status is dropped on create');

  const statusWrite = await custom.patchNamespacedCustomObjectStatus(
    { ...address('enginepools'), name: 'pool-a', body: { spec: { replicas: 7 }, status: { readyReplicas: 1 } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  t.deepEqual(statusWrite.status, { readyReplicas: 1 });
  t.is(statusWrite.spec.replicas, 2);
  t.is(statusWrite.metadata.generation, 1, 'a status write leaves generation');

  const specWrite = await custom.replaceNamespacedCustomObject({
    ...address('enginepools'),
    name: 'pool-a',
    body: { ...statusWrite, spec: { ...engineSpec, replicas: 3 }, status: { readyReplicas: 3 } },
  });
  t.is(specWrite.spec.replicas, 3);
  t.deepEqual(specWrite.status, { readyReplicas: 1 });
  t.is(specWrite.metadata.generation, 2);

  const labelsOnly = await custom.patchNamespacedCustomObject(
    { ...address('enginepools'), name: 'pool-a', body: { metadata: { labels: { a: 'b' } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  t.is(labelsOnly.metadata.generation, 2, 'metadata is not the spec');
  t.not(labelsOnly.metadata.resourceVersion, specWrite.metadata.resourceVersion);

  const statusPut = await custom.replaceNamespacedCustomObjectStatus({
    ...address('enginepools'),
    name: 'pool-a',
    body: { ...labelsOnly, status: { readyReplicas: 2, observedGeneration: 2 } },
  });
  t.deepEqual(statusPut.status, { readyReplicas: 2, observedGeneration: 2 });
  const stale = await refusal(
    t,
    custom.replaceNamespacedCustomObjectStatus({
      ...address('enginepools'),
      name: 'pool-a',
      body: { ...labelsOnly, status: { readyReplicas: 0 } },
    }),
  );
  t.is(stale.code, 409, 'the status subresource checks resourceVersion too');
});

test('finalizers hold a deletion until they are released; none can be added meanwhile', async (t) => {
  const { custom, config } = await start(t);
  await custom.createNamespacedCustomObject({
    ...address('enginepools'),
    body: engine('pool-a', engineSpec, { finalizers: ['switchboard.dev/cleanup'] }),
  });
  const listed = await custom.listNamespacedCustomObject(address('enginepools'));
  const watching = await watch(config, enginesPath, { resourceVersion: listed.metadata.resourceVersion });
  t.teardown(watching.stop);

  const marked = await custom.deleteNamespacedCustomObject({ ...address('enginepools'), name: 'pool-a' });
  t.regex(marked.metadata.deletionTimestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  t.is(marked.metadata.deletionGracePeriodSeconds, 0);
  t.is(marked.metadata.generation, 2);
  const again = await custom.getNamespacedCustomObject({ ...address('enginepools'), name: 'pool-a' });
  t.is(again.metadata.deletionTimestamp, marked.metadata.deletionTimestamp);

  const adding = await refusal(
    t,
    custom.patchNamespacedCustomObject(
      {
        ...address('enginepools'),
        name: 'pool-a',
        body: { metadata: { finalizers: ['switchboard.dev/cleanup', 'x/y'] } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    ),
  );
  t.is(adding.code, 422);

  const released = await custom.patchNamespacedCustomObject(
    { ...address('enginepools'), name: 'pool-a', body: { metadata: { finalizers: [] } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  t.truthy(released.metadata.deletionTimestamp, 'the answer is the final state');
  const deleted = await watching.until((event) => event.type === 'DELETED');
  t.deepEqual(
    watching.events.map((event) => event.type),
    ['MODIFIED', 'DELETED'],
  );
  t.is(deleted.object.metadata?.resourceVersion, released.metadata.resourceVersion);
  t.is((await refusal(t, custom.getNamespacedCustomObject({ ...address('enginepools'), name: 'pool-a' }))).code, 404);
});

test('owner references: dependents go with their owner (Background, Foreground), or stay without it (Orphan)', async (t) => {
  const { server, custom, core, config } = await start(t);
  const apps = config.makeApiClient(AppsV1Api);
  const makePool = async (name: string, childFinalizers: string[] = []) => {
    const owner = await custom.createNamespacedCustomObject({ ...address('enginepools'), body: engine(name) });
    const ownerReferences = [
      { apiVersion, kind: 'EnginePool', name, uid: owner.metadata.uid, controller: true, blockOwnerDeletion: true },
    ];
    await apps.createNamespacedDeployment({
      namespace,
      body: {
        metadata: { name: `${name}-engine`, ownerReferences, finalizers: childFinalizers },
        spec: {
          selector: { matchLabels: { app: name } },
          template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'engine', image: 'x' }] } },
        },
      },
    });
    await core.createNamespacedConfigMap({
      namespace,
      body: { metadata: { name: `${name}-engine`, ownerReferences } },
    });
  };
  const names = (plural: string) => server.objects(plural, namespace).map((object) => object.metadata.name);

  await makePool('pool-a');
  await custom.deleteNamespacedCustomObject({
    ...address('enginepools'),
    name: 'pool-a',
    propagationPolicy: 'Background',
  });
  t.deepEqual(names('deployments'), []);
  t.deepEqual(names('configmaps'), []);

  await makePool('pool-b');
  await custom.deleteNamespacedCustomObject({ ...address('enginepools'), name: 'pool-b', propagationPolicy: 'Orphan' });
  t.deepEqual(names('deployments'), ['pool-b-engine']);
  t.is(server.objects('configmaps', namespace)[0]?.metadata.ownerReferences, undefined, 'orphans lose the reference');

  // Foreground: the owner waits (foregroundDeletion) for a dependent its own finalizer holds.
  await makePool('pool-c', ['example.com/hold']);
  const waiting = await custom.deleteNamespacedCustomObject({
    ...address('enginepools'),
    name: 'pool-c',
    propagationPolicy: 'Foreground',
  });
  t.deepEqual(waiting.metadata.finalizers, ['foregroundDeletion']);
  t.deepEqual(names('configmaps'), ['pool-b-engine']);
  t.deepEqual(names('enginepools'), ['pool-c']);
  const held = await apps.readNamespacedDeployment({ name: 'pool-c-engine', namespace });
  t.truthy(held.metadata?.deletionTimestamp);
  await apps.patchNamespacedDeployment(
    { name: 'pool-c-engine', namespace, body: { metadata: { finalizers: null } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  t.deepEqual(names('deployments'), ['pool-b-engine']);
  t.deepEqual(names('enginepools'), []);
});

test('custom resources are held to their CRD: the schema (422 with causes), CEL rules, unknown fields pruned', async (t) => {
  const { custom } = await start(t);
  const bad = await refusal(
    t,
    custom.createNamespacedCustomObject({
      ...address('enginepools'),
      body: engine('pool-a', { ...engineSpec, replicas: -1, hostNetwork: 'yes' }),
    }),
  );
  t.is(bad.code, 422);
  t.is(bad.status.reason, 'Invalid');
  const details = bad.status.details as { kind: string; causes: Array<{ field: string; reason: string }> };
  t.is(details.kind, 'EnginePool');
  t.deepEqual(details.causes.map((cause) => [cause.field, cause.reason]).sort(), [
    ['spec.hostNetwork', 'FieldValueTypeInvalid'],
    ['spec.replicas', 'FieldValueInvalid'],
  ]);
  t.regex(bad.status.message as string, /^EnginePool\.switchboard\.dev "pool-a" is invalid: \[/);

  const missing = await refusal(
    t,
    custom.createNamespacedCustomObject({
      ...address('queues'),
      body: queueObject('q', { ...queueSpec, name: undefined }),
    }),
  );
  t.deepEqual((missing.status.details as { causes: Json[] }).causes, [
    { reason: 'FieldValueRequired', field: 'spec.name', message: 'Required value' },
  ]);

  const rule = await refusal(
    t,
    custom.createNamespacedCustomObject({
      ...address('enginepools'),
      body: engine('pool-b', { ...engineSpec, rtpPortMin: 30000, rtpPortMax: 20000 }),
    }),
  );
  t.is(rule.code, 422);
  t.is(
    rule.status.message,
    'EnginePool.switchboard.dev "pool-b" is invalid: spec: Invalid value: "object": spec.rtpPortMin must not be above spec.rtpPortMax',
  );

  // A transition rule: the workspace of a queue never changes.
  const queue = await custom.createNamespacedCustomObject({ ...address('queues'), body: queueObject('sales') });
  const moved = await refusal(
    t,
    custom.replaceNamespacedCustomObject({
      ...address('queues'),
      name: 'sales',
      body: { ...queue, spec: { ...queueSpec, workspaceId: '1c6d4b3f-7a8e-4b9c-8d2e-3f4a5b6c7d8e' } },
    }),
  );
  t.regex(moved.status.message as string, /spec\.workspaceId cannot change/);

  const pruned = await custom.createNamespacedCustomObject({
    ...address('enginepools'),
    body: { ...engine('pool-c', { ...engineSpec, surprise: true }), extra: 1 },
  });
  t.deepEqual(pruned.spec, engineSpec);
  t.is(pruned.extra, undefined);
});

test('a watch from a list’s resourceVersion gets every change after it, in order; from 0 the current objects', async (t) => {
  const { custom, config } = await start(t);
  await custom.createNamespacedCustomObject({ ...address('enginepools'), body: engine('before') });
  const listed = await custom.listNamespacedCustomObject(address('enginepools'));
  const created = await custom.createNamespacedCustomObject({ ...address('enginepools'), body: engine('pool-a') });
  const watching = await watch(config, enginesPath, { resourceVersion: listed.metadata.resourceVersion });
  t.teardown(watching.stop);
  await custom.patchNamespacedCustomObject(
    { ...address('enginepools'), name: 'pool-a', body: { spec: { replicas: 4 } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  await custom.deleteNamespacedCustomObject({ ...address('enginepools'), name: 'pool-a' });
  await watching.until((event) => event.type === 'DELETED');
  t.deepEqual(
    watching.events.map((event) => [event.type, event.object.metadata?.name]),
    [
      ['ADDED', 'pool-a'],
      ['MODIFIED', 'pool-a'],
      ['DELETED', 'pool-a'],
    ],
  );
  const versions = watching.events.map((event) => Number(event.object.metadata?.resourceVersion));
  t.is(versions[0], Number(created.metadata.resourceVersion));
  t.deepEqual(
    versions,
    [...versions].sort((a, b) => a - b),
  );
  t.is((watching.events[1]?.object.spec as Json).replicas, 4);

  const fromZero = await watch(config, enginesPath, { resourceVersion: '0' });
  t.teardown(fromZero.stop);
  await fromZero.until((event) => event.type === 'ADDED');
  t.deepEqual(
    fromZero.events.map((event) => [event.type, event.object.metadata?.name]),
    [['ADDED', 'before']],
  );

  // A label selector: an object entering the selection is ADDED, one leaving it DELETED.
  const selected = await watch(config, enginesPath, { resourceVersion: '0', labelSelector: 'pool=blue' });
  t.teardown(selected.stop);
  const label = (value: string | null) =>
    custom.patchNamespacedCustomObject(
      { ...address('enginepools'), name: 'before', body: { metadata: { labels: { pool: value } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  await label('blue');
  await selected.until((event) => event.type === 'ADDED');
  await label(null);
  await selected.until((event) => event.type === 'DELETED');
  t.deepEqual(
    selected.events.map((event) => event.type),
    ['ADDED', 'DELETED'],
  );
});

test('bookmarks carry the current resourceVersion; timeoutSeconds ends the stream cleanly', async (t) => {
  const { server, custom, config } = await start(t);
  const watching = await watch(config, enginesPath, {
    resourceVersion: server.resourceVersion(),
    allowWatchBookmarks: true,
  });
  t.teardown(watching.stop);
  // A change to another kind moves the global resourceVersion; the bookmark tells this watch.
  await custom.createNamespacedCustomObject({ ...address('queues'), body: queueObject('sales') });
  const bookmark = await watching.until(
    (event) => event.type === 'BOOKMARK' && event.object.metadata?.resourceVersion === server.resourceVersion(),
  );
  t.deepEqual(bookmark.object, {
    kind: 'EnginePool',
    apiVersion,
    metadata: { resourceVersion: server.resourceVersion() },
  });
  t.is(server.openWatches(), 1);

  const timed = await watch(config, enginesPath, { timeoutSeconds: 1 });
  t.is(await timed.done, null, 'the client’s done callback gets null');
  t.is(server.openWatches(), 1);
});

test('410: after expireHistory a watch gets an ERROR event with the Expired Status, then done(null)', async (t) => {
  const { server, custom, config } = await start(t);
  const listed = await custom.listNamespacedCustomObject(address('enginepools'));
  server.faults.expireHistory();
  const watching = await watch(config, enginesPath, { resourceVersion: listed.metadata.resourceVersion });
  t.is(await watching.done, null, 'client-node ends the watch without an error');
  t.deepEqual(watching.events, [
    {
      type: 'ERROR',
      object: {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: `too old resource version: ${listed.metadata.resourceVersion} (${server.resourceVersion()})`,
        reason: 'Expired',
        code: 410,
      },
    },
  ]);
  // A list gives a fresh resourceVersion to watch from.
  const relisted = await custom.listNamespacedCustomObject(address('enginepools'));
  const fresh = await watch(config, enginesPath, { resourceVersion: relisted.metadata.resourceVersion });
  t.teardown(fresh.stop);
  await custom.createNamespacedCustomObject({ ...address('enginepools'), body: engine('pool-a') });
  await fresh.until((event) => event.type === 'ADDED');

  server.faults.goneOnNextWatch('enginepools');
  const gone = await watch(config, enginesPath, { resourceVersion: server.resourceVersion() });
  await gone.done;
  t.is((gone.events[0]?.object as Json).code, 410);
});

test('cutWatches destroys the stream mid-way: the client’s done gets a premature-close error', async (t) => {
  const { server, custom, config } = await start(t);
  const watching = await watch(config, enginesPath, { resourceVersion: server.resourceVersion() });
  await custom.createNamespacedCustomObject({ ...address('enginepools'), body: engine('pool-a') });
  await watching.until((event) => event.type === 'ADDED');
  t.is(server.faults.cutWatches('queues'), 0);
  t.is(
    server.faults.cutWatches((open) => open.plural === 'enginepools' && open.namespace === namespace),
    1,
  );
  const error = (await watching.done) as Error & { code?: string };
  t.true(error instanceof Error);
  t.is(error.message, 'Premature close');
  t.is(error.code, 'ERR_STREAM_PREMATURE_CLOSE');
  t.is(server.openWatches(), 0);
});

test('conflictOnNextWrite and failNext refuse requests whose data was fine', async (t) => {
  const { server, custom } = await start(t);
  const created = await custom.createNamespacedCustomObject({ ...address('enginepools'), body: engine('pool-a') });
  server.faults.conflictOnNextWrite('enginepools', 'pool-a');
  const patch = () =>
    custom.patchNamespacedCustomObjectStatus(
      {
        ...address('enginepools'),
        name: 'pool-a',
        body: [
          { op: 'replace', path: '/metadata/resourceVersion', value: created.metadata.resourceVersion },
          { op: 'add', path: '/status', value: { readyReplicas: 1 } },
        ],
      },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    );
  t.is((await refusal(t, patch())).code, 409);
  t.deepEqual((await patch()).status, { readyReplicas: 1 });

  server.faults.failNext(1, { status: 503, pathIncludes: '/enginepools/pool-a' });
  await custom.listNamespacedCustomObject(address('enginepools'));
  const failed = await refusal(t, custom.getNamespacedCustomObject({ ...address('enginepools'), name: 'pool-a' }));
  t.is(failed.code, 503);
  t.is(failed.status.kind, 'Status');
  await custom.getNamespacedCustomObject({ ...address('enginepools'), name: 'pool-a' });

  server.faults.failNext(1);
  const error = await t.throwsAsync(
    new Promise(
      (_, reject) =>
        void new Watch(server.kubeConfig()).watch(
          enginesPath,
          {},
          () => {},
          (err) => reject(err as Error),
        ),
    ),
  );
  t.is((error as Error & { statusCode?: number }).statusCode, 500, 'a refused watch reaches done with statusCode');
});

test('a Lease taken and renewed with its resourceVersion: a second contender with the same one loses (409)', async (t) => {
  const { config } = await start(t);
  const leases = config.makeApiClient(CoordinationV1Api);
  const now = new Date();
  const lease = await leases.createNamespacedLease({
    namespace,
    body: {
      metadata: { name: 'switchboard-operator' },
      spec: { holderIdentity: 'a', leaseDurationSeconds: 15, acquireTime: now, renewTime: now },
    },
  });
  t.is(lease.spec?.holderIdentity, 'a');
  const renewed = await leases.replaceNamespacedLease({
    name: 'switchboard-operator',
    namespace,
    body: { ...lease, spec: { ...lease.spec, renewTime: new Date(now.getTime() + 1000) } },
  });
  t.not(renewed.metadata?.resourceVersion, lease.metadata?.resourceVersion);
  const usurper = await refusal(
    t,
    leases.replaceNamespacedLease({
      name: 'switchboard-operator',
      namespace,
      body: { ...lease, spec: { ...lease.spec, holderIdentity: 'b' } },
    }),
  );
  t.is(usurper.code, 409);
  t.is(
    usurper.status.message,
    'Operation cannot be fulfilled on leases.coordination.k8s.io "switchboard-operator": the object has been modified; please apply your changes to the latest version and try again',
  );
  t.is((await leases.readNamespacedLease({ name: 'switchboard-operator', namespace })).spec?.holderIdentity, 'a');
});

test('malformed bodies are 400s, unknown paths 404s, and every refusal is a Status', async (t) => {
  const { server } = await start(t);
  const send = async (method: string, path: string, body?: string, contentType = 'application/json') => {
    const response = await fetch(`${server.url}${path}`, { method, body, headers: { 'Content-Type': contentType } });
    return { code: response.status, status: (await response.json()) as Json };
  };
  const malformed = await send('POST', enginesPath, '{"apiVersion": ');
  t.is(malformed.code, 400);
  t.like(malformed.status, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'BadRequest', code: 400 });
  t.like((await send('GET', '/apis/example.com/v1/namespaces/x/widgets')).status, { reason: 'NotFound', code: 404 });
  t.like((await send('POST', `${enginesPath}/x`, '{}')).status, { reason: 'MethodNotAllowed', code: 405 });
  const wrongKind = await send(
    'POST',
    enginesPath,
    JSON.stringify({ apiVersion, kind: 'Queue', metadata: { name: 'x' } }),
  );
  t.is(wrongKind.code, 400);
  const apis = await send('GET', '/apis');
  t.true((apis.status.groups as Json[]).some((entry) => entry.name === group));
  const core = await send('GET', '/api/v1');
  t.true((core.status.resources as Json[]).some((entry) => entry.name === 'configmaps' && entry.kind === 'ConfigMap'));
});
