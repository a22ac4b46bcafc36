/**
 * The service in a cluster (docs/kubernetes.md): the API and the operator on the Kubernetes resource store, against
 * the Kubernetes API test server (test/helpers/kube-api-server.ts) through the real `@kubernetes/client-node`.
 *
 * GitOps: examples/ applied through the Kubernetes store answers the REST API as the same workspace made through the
 * API; an edited definition is a new version; an invalid plan is Valid=False and never published. Faults: a watch cut
 * mid-stream, 410 Gone, 409 on update, a second operator waiting for the Lease and taking it when the first steps
 * down. Engine pools: children applied with server-side apply and owner references, pruned, readiness from the
 * Deployment, carriers in PostgreSQL, all gone with the EnginePool; the pods' settings from the operator's configuration
 * (SWITCHBOARD_SECRET by the Secret it names), and an operator that could not give them refuses to start. Events for
 * condition changes.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import test from 'ava';
import { KubernetesObjectApi, type KubernetesObject, PatchStrategy, type V1Container } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { ConfigError, loadConfig } from '../../core/config.ts';
import { KubernetesResourceStore } from '../../core/resources/kubernetes-store.ts';
import { startRoles } from '../../app/roles.ts';
import type { Resource, ResourceKind } from '../../core/resources/store.ts';
import { LeaseLeadership } from '../../operator/lease.ts';
import { startOperator } from '../../operator/operator.ts';
import { type KubeApiServer, startKubeApiServer } from '../helpers/kube-api-server.ts';
import {
  comparable,
  condition,
  exampleDocuments,
  newMember,
  reconciled,
  type Setup,
  untilResource,
} from '../helpers/resources.ts';
import { startService, type TestService, workspaceWithUser } from '../helpers/service.ts';
import { until as untilDatabase, untilTrue } from '../helpers/until.ts';

const namespace = 'switchboard';
const serviceSecret = 'the service secret of this cluster, 32 characters or more';

let kube: KubeApiServer;
let service: TestService;
let store: KubernetesResourceStore;
let objects: KubernetesObjectApi;
let kubeconfigDir: string;
let kubeconfig: string;

test.before(async () => {
  kube = await startKubeApiServer({ bookmarkIntervalMs: 200 });
  kubeconfigDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-kube-'));
  kubeconfig = path.join(kubeconfigDir, 'config');
  await writeFile(kubeconfig, kube.kubeConfig(namespace).exportConfig());
  service = await startService(
    {
      RESOURCE_STORE: 'kubernetes',
      KUBECONFIG: kubeconfig,
      RESOURCE_NAMESPACE: namespace,
      LEASE_NAMESPACE: namespace,
      ENGINE_DATABASE_SECRET: 'switchboard-database/url',
      // As the chart sets them with switchboardSecret.existingSecret: the engine pods get the same secret.
      SWITCHBOARD_SECRET: serviceSecret,
      ENGINE_SWITCHBOARD_SECRET: 'switchboard-secret/secret',
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    },
    ['api', 'operator'],
  );
  store = new KubernetesResourceStore(kube.kubeConfig(namespace));
  objects = KubernetesObjectApi.makeApiClient(kube.kubeConfig(namespace));
});

test.after.always(async () => {
  await service?.close();
  await kube?.close();
  if (kubeconfigDir) await rm(kubeconfigDir, { recursive: true, force: true });
});

function api(setup: Setup) {
  return (method: string, route: string, body?: unknown) =>
    service.request(method, `/api/v1${route}`, {
      auth: setup.apiKey,
      workspaceId: setup.workspace.id,
      ...(body === undefined ? {} : { body }),
    });
}

/** What `kubectl apply --server-side` or a GitOps tool sends: server-side apply under its own field manager. */
async function kubectlApply(document: KubernetesObject, fieldManager = 'kubectl'): Promise<KubernetesObject> {
  return objects.patch(
    { ...document, metadata: { namespace, ...document.metadata } },
    undefined,
    undefined,
    fieldManager,
    true,
    PatchStrategy.ServerSideApply,
  );
}

const until = (kind: ResourceKind, name: string, check: (resource: Resource) => boolean, what: string) =>
  untilResource(store, namespace, kind, name, check, what);
const member = (setup: Setup) => newMember(service, setup);

test.serial(
  'examples/ applied through the Kubernetes store answer the REST API as the same workspace made through the API; an edit is version 2',
  async (t) => {
    const documents = await exampleDocuments();
    const plan = documents.find((doc) => doc.kind === 'RoutingPlan') as { spec: Record<string, unknown> };
    const queueDoc = documents.find((doc) => doc.kind === 'Queue') as { spec: Record<string, unknown> };
    const endpointDoc = documents.find((doc) => doc.kind === 'WebhookEndpoint') as {
      metadata: { name: string };
      spec: Record<string, unknown>;
    };
    const { applicationId, workspaceId } = plan.spec as { applicationId: string; workspaceId: string };
    const { apiKey } = await service.application(applicationId);
    await service.pool.query(
      `INSERT INTO workspaces (id, application_id, external_workspace_id, name, timezone, destination_policy, limits)
     VALUES ($1, $2, 'example', 'Example', 'UTC', '{}', '{}')`,
      [workspaceId, applicationId],
    );
    const gitops = { apiKey, workspace: { id: workspaceId }, applicationId } as unknown as Setup;
    // The queue's members are the workspace's: the examples name theirs by id.
    for (const memberId of (queueDoc.spec.members as string[] | undefined) ?? []) {
      await service.pool.query(
        `INSERT INTO members (id, workspace_id, email, scopes) VALUES ($1, $2, $3, '{}') ON CONFLICT DO NOTHING`,
        [memberId, workspaceId, `${memberId}@example.com`],
      );
    }

    // Secrets with kubectl; the custom resources through the store, as a GitOps tool's field manager.
    for (const doc of documents) {
      if (doc.kind === 'Secret') await kubectlApply(doc);
    }
    for (const doc of documents.filter((entry) => entry.apiVersion === 'switchboard.dev/v1alpha1')) {
      await store.apply(
        {
          kind: doc.kind as ResourceKind,
          namespace,
          name: doc.metadata?.name as string,
          spec: doc.spec ?? {},
          ...(doc.metadata?.labels ? { labels: doc.metadata.labels } : {}),
        },
        { fieldManager: 'argocd-controller' },
      );
    }
    const planName = (documents.find((doc) => doc.kind === 'RoutingPlan')?.metadata?.name ?? '') as string;
    const queueName = (documents.find((doc) => doc.kind === 'Queue')?.metadata?.name ?? '') as string;
    const queue = await until('Queue', queueName, (r) => condition(r, 'Ready')?.status === 'True', 'Ready');
    const planResource = await until('RoutingPlan', planName, (r) => condition(r, 'Ready')?.status === 'True', 'Ready');
    t.like(planResource.status, { newestVersion: 1, publishedVersion: 1, issues: [] });
    t.true(queue.metadata.finalizers.includes('switchboard.dev/queue-in-use'));
    // In a cluster the endpoint's secretRef is read from its Secret.
    await until('WebhookEndpoint', endpointDoc.metadata.name, (r) => condition(r, 'Ready')?.status === 'True', 'Ready');

    // The same workspace through the API.
    const viaApi = await workspaceWithUser(service);
    const apiQueue = await api(viaApi)('POST', '/queues', {
      name: queueDoc.spec.name,
      strategy: queueDoc.spec.strategy,
      wrapUpSecs: queueDoc.spec.wrapUpSecs,
      members: [await member(viaApi)],
    });
    t.is(apiQueue.status, 201, apiQueue.text);
    const definition = JSON.parse(
      JSON.stringify(plan.spec.definition).replaceAll(queueDoc.spec.id as string, apiQueue.body.id as string),
    );
    const apiPlan = await api(viaApi)('POST', '/routing-plans', { name: plan.spec.name, definition, publish: true });
    t.is(apiPlan.status, 201, apiPlan.text);
    const apiEndpoint = await service.request('POST', '/api/v1/webhooks', {
      auth: viaApi.apiKey,
      body: {
        url: endpointDoc.spec.url,
        eventTypes: endpointDoc.spec.eventTypes,
        description: endpointDoc.spec.description,
        enabled: endpointDoc.spec.enabled,
      },
    });
    t.is(apiEndpoint.status, 201, apiEndpoint.text);

    const gotQueue = await api(gitops)('GET', `/queues/${queueDoc.spec.id as string}`);
    t.is(gotQueue.status, 200, gotQueue.text);
    t.deepEqual(comparable(gotQueue.body), comparable(apiQueue.body));
    const gotPlan = await api(gitops)('GET', `/routing-plans/${plan.spec.id as string}`);
    t.is(gotPlan.status, 200, gotPlan.text);
    t.deepEqual({ ...comparable(gotPlan.body), definition: null }, { ...comparable(apiPlan.body), definition: null });
    t.deepEqual(gotPlan.body.definition, plan.spec.definition);
    const gotEndpoint = await service.request('GET', `/api/v1/webhooks/${endpointDoc.spec.id as string}`, {
      auth: apiKey,
    });
    t.is(gotEndpoint.status, 200, gotEndpoint.text);
    const apiGotEndpoint = await service.request('GET', `/api/v1/webhooks/${apiEndpoint.body.endpoint.id as string}`, {
      auth: viaApi.apiKey,
    });
    t.deepEqual(comparable(gotEndpoint.body), comparable(apiGotEndpoint.body));

    // The API's own writes are custom resources too, under its field manager.
    const apiQueueObject = kube.object(
      `/apis/switchboard.dev/v1alpha1/namespaces/${namespace}/queues/${apiQueue.body.id}`,
    );
    t.truthy(apiQueueObject, 'the API applied the Queue resource');
    const managers = (apiQueueObject?.metadata?.managedFields ?? []).map((entry) => entry.manager);
    t.true(managers.includes('switchboard-api'), managers.join(','));
    t.truthy(
      kube.object(
        `/apis/switchboard.dev/v1alpha1/namespaces/${namespace}/webhookendpoints/${apiEndpoint.body.endpoint.id}`,
      ),
      'the API applied the WebhookEndpoint resource',
    );

    // Editing the definition in the resource makes version 2, published as the spec says.
    const edited = JSON.parse(JSON.stringify(plan.spec.definition)) as {
      steps: Record<string, { prompt?: { tts?: string } }>;
    };
    const spoken = Object.values(edited.steps).find((step) => step.prompt?.tts !== undefined);
    t.truthy(spoken, 'the example plan speaks a prompt');
    if (spoken?.prompt) spoken.prompt.tts = 'A new greeting.';
    await store.apply(
      { kind: 'RoutingPlan', namespace, name: planName, spec: { ...plan.spec, definition: edited } },
      { fieldManager: 'argocd-controller' },
    );
    const v2 = await until('RoutingPlan', planName, (r) => reconciled(r) && r.status.newestVersion === 2, 'v2');
    t.like(v2.status, { newestVersion: 2, publishedVersion: 2 });
  },
);

test('an invalid plan gets Valid=False with the REST issues, is never published, and a Warning Event says so', async (t) => {
  const setup = await workspaceWithUser(service);
  const definition = {
    entry: 'menu',
    steps: { menu: { type: 'queue', queueId: randomUUID(), maxWaitSecs: 60, overflow: 'gone', offerCallback: false } },
  };
  const rest = await api(setup)('POST', '/routing-plans/validate', { definition });
  t.is(rest.status, 200, rest.text);
  const planId = randomUUID();
  await kubectlApply({
    apiVersion: 'switchboard.dev/v1alpha1',
    kind: 'RoutingPlan',
    metadata: { name: `broken-${planId.slice(0, 8)}` },
    spec: {
      id: planId,
      applicationId: setup.applicationId,
      workspaceId: setup.workspace.id,
      name: 'Broken',
      definition,
      publish: true,
    },
  } as KubernetesObject);
  const resource = await until(
    'RoutingPlan',
    `broken-${planId.slice(0, 8)}`,
    (r) => condition(r, 'Valid')?.status === 'False',
    'Valid=False',
  );
  t.deepEqual(resource.status.issues, rest.body.issues);
  t.is(condition(resource, 'Published')?.status, 'False');
  const recorded = await service.pool.query('SELECT 1 FROM routing_plans WHERE id = $1', [planId]);
  t.is(recorded.rowCount, 0, 'never recorded, never published');
  await untilTrue('a Warning Event on the plan', () =>
    kube
      .objects('events', namespace)
      .some(
        (event) =>
          (event as { involvedObject?: { uid?: string }; type?: string }).involvedObject?.uid ===
            resource.metadata.uid && (event as { type?: string }).type === 'Warning',
      ),
  );
  t.pass();
});

test.serial('a watch cut mid-stream and a watch answered 410 Gone: later changes still reconcile', async (t) => {
  const setup = await workspaceWithUser(service);
  const memberId = await member(setup);
  const queueId = randomUUID();
  const name = `cut-${queueId.slice(0, 8)}`;
  const spec = {
    id: queueId,
    applicationId: setup.applicationId,
    workspaceId: setup.workspace.id,
    name: 'Before',
    strategy: 'round_robin',
    wrapUpSecs: 5,
    members: [memberId],
  };
  await store.apply({ kind: 'Queue', namespace, name, spec }, { fieldManager: 'kubectl' });
  await until('Queue', name, (r) => condition(r, 'Ready')?.status === 'True', 'Ready');

  // Cut every watch mid-stream, then change the queue: the controller watches again and sees it.
  t.true(kube.faults.cutWatches() > 0, 'the operator was watching');
  await store.apply(
    { kind: 'Queue', namespace, name, spec: { ...spec, name: 'After a cut' } },
    { fieldManager: 'kubectl' },
  );
  await untilTrue('the record follows the change made while the watch was cut', async () => {
    const row = await service.pool.query<{ name: string }>('SELECT name FROM queues WHERE id = $1', [queueId]);
    return row.rows[0]?.name === 'After a cut';
  });

  // Forget the history and cut again: the watch from the old resourceVersion gets 410, the controller lists again.
  kube.faults.expireHistory();
  kube.faults.cutWatches();
  await store.apply(
    { kind: 'Queue', namespace, name, spec: { ...spec, name: 'After a 410' } },
    { fieldManager: 'kubectl' },
  );
  await untilTrue('the record follows the change made after the 410', async () => {
    const row = await service.pool.query<{ name: string }>('SELECT name FROM queues WHERE id = $1', [queueId]);
    return row.rows[0]?.name === 'After a 410';
  });
  const metrics = await service.request('GET', '/metrics');
  t.regex(metrics.text, /switchboard_operator_relists_total\{kind="Queue"\} [2-9]/);
});

test.serial(
  "the API's resource write reaches the Kubernetes API after its commit; refused, it stays pending and the operator never undoes the request",
  async (t) => {
    const setup = await workspaceWithUser(service);
    const call = api(setup);
    const hangup = (message: string) => ({ entry: 'bye', steps: { bye: { type: 'hangup', message } } });
    const created = await call('POST', '/routing-plans', { name: 'Hours', definition: hangup('one'), publish: true });
    t.is(created.status, 201, created.text);
    const planId = created.body.id as string;
    // Answered once the resource was applied, and its status written, by the API.
    const first = await store.get('RoutingPlan', namespace, planId);
    t.deepEqual((first?.spec as { definition?: unknown }).definition, hangup('one'));
    t.like(first?.status, { newestVersion: 1, publishedVersion: 1 });

    // The Kubernetes API refuses the next writes of the resource: the request still commits and answers.
    kube.faults.failNext(1_000, {
      status: 500,
      pathIncludes: `routingplans/${planId}?fieldManager=switchboard-api`,
      method: 'PATCH',
    });
    const edited = await call('PATCH', `/routing-plans/${planId}`, { definition: hangup('two') });
    t.is(edited.status, 200, edited.text);
    t.is(edited.body.newestVersion, 2);
    const pending = await until('RoutingPlan', planId, () => true, 'the old resource');
    t.deepEqual((pending.spec as { definition?: unknown }).definition, hangup('one'), 'the write did not reach it');
    const write = await service.pool.query<{ pending: boolean; last_error: string | null }>(
      `SELECT pending, last_error FROM resource_writes WHERE kind = 'RoutingPlan' AND name = $1`,
      [planId],
    );
    t.like(write.rows[0], { pending: true });
    t.truthy(write.rows[0]?.last_error);
    // The operator hears the old resource again (a label changed) while the write is pending: it must not make its
    // old definition a new version. Meanwhile the sweep tries the write again, and fails again.
    await kubectlApply(
      {
        apiVersion: 'switchboard.dev/v1alpha1',
        kind: 'RoutingPlan',
        metadata: { name: planId, labels: { team: 'front-desk' } },
      },
      'labeller',
    );
    await untilDatabase('the sweep to try the write again', async () => {
      const again = await service.pool.query<{ attempts: number }>(
        `SELECT attempts FROM resource_writes WHERE kind = 'RoutingPlan' AND name = $1`,
        [planId],
      );
      return (again.rows[0]?.attempts ?? 0) >= 2 ? true : undefined;
    });
    kube.faults.failNext(0);
    // The sweep carries it once the Kubernetes API takes it again.
    const applied = await until(
      'RoutingPlan',
      planId,
      (resource) =>
        JSON.stringify((resource.spec as { definition?: unknown }).definition) === JSON.stringify(hangup('two')) &&
        (resource.status as { newestVersion?: number }).newestVersion === 2,
      'the write carried',
    );
    t.is(applied.metadata.labels?.team, 'front-desk', "the label's own field manager keeps it");
    const versions = await call('GET', `/routing-plans/${planId}/versions`);
    t.deepEqual(
      (versions.body.data as { version: number }[]).map((version) => version.version),
      [2, 1],
      'no version was made from the old resource',
    );
  },
);

test('a 409 on a status write is retried with the resource read again', async (t) => {
  const setup = await workspaceWithUser(service);
  const memberId = await member(setup);
  const queueId = randomUUID();
  const name = `conflict-${queueId.slice(0, 8)}`;
  kube.faults.conflictOnNextWrite('queues', name, 2);
  await store.apply(
    {
      kind: 'Queue',
      namespace,
      name,
      spec: {
        id: queueId,
        applicationId: setup.applicationId,
        workspaceId: setup.workspace.id,
        name: 'Contested',
        strategy: 'longest_idle',
        wrapUpSecs: 0,
        members: [memberId],
      },
    },
    { fieldManager: 'kubectl' },
  );
  const ready = await until('Queue', name, (r) => condition(r, 'Ready')?.status === 'True', 'Ready after conflicts');
  t.true(ready.metadata.finalizers.includes('switchboard.dev/queue-in-use'));
  const conflicts = kube.requests.filter(
    (request) => request.path.includes(`/queues/${name}`) && request.status === 409,
  );
  t.true(conflicts.length >= 1, 'the server answered 409 and the operator tried again');
});

test.serial(
  'a second operator waits for the Lease and takes it when the first stops renewing; closing gives it up',
  async (t) => {
    const leaseName = `lease-${randomUUID().slice(0, 8)}`;
    const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${leaseName}`;
    const config = kube.kubeConfig(namespace);
    const start = (identity: string, releaseOnClose = true) =>
      startOperator({
        pool: service.pool,
        store,
        namespace: `lease-test-${identity}`,
        registry: new Registry(),
        log: { info() {}, warn() {} },
        leadership: new LeaseLeadership(config, {
          namespace,
          name: leaseName,
          identity,
          leaseDurationSeconds: 2,
          renewDeadlineMs: 1_000,
          retryMs: 100,
          releaseOnClose,
        }),
        webhooks: { secretsKey: new Uint8Array(32), allowPrivateNetworks: false },
        engines: { carrierSecretsKey: new Uint8Array(32) },
      });
    const holder = () =>
      (kube.object(leasePath) as { spec: { holderIdentity?: string } } | undefined)?.spec.holderIdentity;
    const first = start('first', false);
    t.true(await first.leading);
    const second = start('second');
    const reads = () => kube.requests.filter((r) => r.path.startsWith(leasePath) && r.method === 'GET').length;
    const before = reads();
    // Several of the second's tries find the Lease held and renewed.
    await untilTrue('the second operator tries', () => reads() >= before + 6);
    t.false(second.isLeading(), 'it waits while the first renews');
    t.is(holder(), 'first');

    // The first cannot renew (the API server fails its writes): it steps down, and dies without giving the Lease up.
    kube.faults.failNext(100_000, { status: 500, pathIncludes: leasePath, method: 'PUT' });
    await untilTrue('the first steps down', () => !first.isLeading());
    await first.close();
    kube.faults.failNext(0);
    // The Lease expires unrenewed; the second takes it.
    t.true(await second.leading);
    t.is(holder(), 'second');
    const taken = kube.object(leasePath) as { spec: { leaseTransitions: number } };
    t.true(taken.spec.leaseTransitions >= 1);

    // A third waits; the second closes and gives the Lease up, and the third takes it without waiting it out.
    const third = start('third');
    await untilTrue('the third operator tries', () => reads() >= before + 12);
    t.false(third.isLeading());
    await second.close();
    t.true(await third.leading);
    t.is(holder(), 'third');
    await third.close();
    t.falsy(holder(), 'closing gave the Lease up');
  },
);

test('an EnginePool: children applied with server-side apply and owner references, pruned, ready from its Deployment, carriers recorded, all gone with it', async (t) => {
  const name = `pool-${randomUUID().slice(0, 6)}`;
  const carrier = `carrier-${name}`;
  await kubectlApply({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: `${name}-sip` },
    stringData: { username: 'trunk-user', password: 'trunk-pass' },
  } as KubernetesObject);
  const engineSpec = {
    replicas: 2,
    image: 'ghcr.io/switchboard-dev/switchboard:0.1.0',
    hostNetwork: false,
    carriers: [{ name: carrier, address: '198.51.100.7', credentialsSecretRef: { name: `${name}-sip` } }],
  };
  await store.apply({ kind: 'EnginePool', namespace, name, spec: engineSpec }, { fieldManager: 'kubectl' });
  const engine = await until('EnginePool', name, (r) => condition(r, 'Ready')?.reason === 'RollingOut', 'rolling out');
  const deploymentPath = `/apis/apps/v1/namespaces/${namespace}/deployments/${name}-engine`;
  const deployment = kube.object(deploymentPath) as KubernetesObject & { spec: { replicas: number } };
  t.truthy(deployment, 'the Deployment is applied');
  t.is(deployment.spec.replicas, 2);
  t.deepEqual(
    deployment.metadata?.ownerReferences?.map((owner) => [owner.kind, owner.uid, owner.controller]),
    [['EnginePool', engine.metadata.uid, true]],
  );
  t.true((deployment.metadata?.managedFields ?? []).some((entry) => entry.manager === 'switchboard-operator'));
  t.truthy(
    kube.object(`/api/v1/namespaces/${namespace}/services/${name}-engine-sip`),
    'off the host network: SIP Service',
  );
  // The pods' settings come from the operator's own configuration: its SWITCHBOARD_SECRET by the Secret it names
  // (never the value), the settings it passes on in the ConfigMap.
  const configMap = kube.object(`/api/v1/namespaces/${namespace}/configmaps/${name}-engine`) as KubernetesObject & {
    data: Record<string, string>;
  };
  t.is(configMap.data.WEBHOOK_ALLOW_PRIVATE_NETWORKS, 'true');
  const [engineContainer] = (deployment as unknown as { spec: { template: { spec: { containers: V1Container[] } } } })
    .spec.template.spec.containers;
  t.deepEqual(engineContainer?.env?.find((variable) => variable.name === 'SWITCHBOARD_SECRET')?.valueFrom, {
    secretKeyRef: { name: 'switchboard-secret', key: 'secret' },
  });
  t.false(JSON.stringify([deployment, configMap]).includes(serviceSecret));
  t.truthy(kube.object(`/apis/policy/v1/namespaces/${namespace}/poddisruptionbudgets/${name}-engine`));
  const carriers = await service.pool.query<{ username: string; engine: string }>(
    'SELECT username, engine FROM carriers WHERE name = $1',
    [carrier],
  );
  t.deepEqual(carriers.rows, [{ username: 'trunk-user', engine: `${namespace}/${name}` }]);

  // The Deployment's controller reports its pods ready: the EnginePool is Ready (its controller watches the pools'
  // Deployments; without that it would look again only after 30 s, past this wait).
  kube.setStatus(deploymentPath, { observedGeneration: 1, replicas: 2, readyReplicas: 2 });
  const ready = await until('EnginePool', name, (r) => condition(r, 'Ready')?.status === 'True', 'Ready');
  t.is(ready.status.readyReplicas, 2);

  // Onto the host network: the SIP Service is no longer wanted and goes.
  await store.apply(
    { kind: 'EnginePool', namespace, name, spec: { ...engineSpec, hostNetwork: true, carriers: [] } },
    { fieldManager: 'kubectl' },
  );
  await untilTrue(
    'the SIP Service is pruned',
    () => kube.object(`/api/v1/namespaces/${namespace}/services/${name}-engine-sip`) === undefined,
  );
  await untilTrue('the carrier left out of the spec is removed', async () => {
    const left = await service.pool.query('SELECT 1 FROM carriers WHERE name = $1', [carrier]);
    return left.rowCount === 0;
  });

  // The EnginePool goes: its children with it (owner references), after its finalizer ran.
  await store.delete('EnginePool', namespace, name, { fieldManager: 'kubectl' });
  await untilTrue('the Deployment goes with its EnginePool', () => kube.object(deploymentPath) === undefined);
  t.is(kube.object(`/api/v1/namespaces/${namespace}/configmaps/${name}-engine`), undefined);
  t.is(await store.get('EnginePool', namespace, name), undefined);
});

test('an operator in a cluster with SWITCHBOARD_SECRET and no Secret naming it for its engine pods refuses to start', async (t) => {
  // Nothing is opened before the refusal: this database does not exist.
  const config = loadConfig({
    DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
    RESOURCE_STORE: 'kubernetes',
    KUBECONFIG: kubeconfig,
    SWITCHBOARD_SECRET: serviceSecret,
  });
  await t.throwsAsync(startRoles(config, new Set(['operator'])), {
    instanceOf: ConfigError,
    message: /ENGINE_SWITCHBOARD_SECRET must name the Secret/,
  });
  // Without a cluster it runs no engine pods, and needs none.
  const standalone = loadConfig({
    DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
    SWITCHBOARD_SECRET: serviceSecret,
  });
  await t.throwsAsync(startRoles(standalone, new Set(['operator']), { logStream: new PassThrough() }), {
    message: /ECONNREFUSED|connect/,
  });
});
