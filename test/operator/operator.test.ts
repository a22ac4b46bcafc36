/**
 * The operator reconciling custom resources kept in PostgreSQL (standalone, as `npm start` runs it;
 * docs/kubernetes.md): a workspace written as resources (GitOps) gets the same REST answers as one made through the
 * API; editing a plan's definition makes a new version; an invalid plan gets Valid=False with the REST issues and is
 * never published; a queue in use cannot go until no plan uses it; resources the API wrote reconcile to no change;
 * a second operator waits for the lead.
 */
import { randomUUID } from 'node:crypto';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { Registry } from 'prom-client';
import { PostgresResourceStore } from '../../core/resources/postgres-store.ts';
import type { Resource, ResourceIntent } from '../../core/resources/store.ts';
import { DatabaseLeadership, startOperator } from '../../operator/operator.ts';
import {
  comparable,
  condition,
  exampleDocuments,
  newMember,
  reconciled,
  type Setup,
  untilResource,
} from '../helpers/resources.ts';
import { isError, request, startService, type TestService, workspaceWithUser } from '../helpers/service.ts';

let service: TestService;
let store: PostgresResourceStore;
const namespace = 'switchboard';
const fixtures = fileURLToPath(new URL('../fixtures/tls/', import.meta.url));
let tlsDir: string;

/** A folder as the chart mounts the webhook's certificate: `tls.crt` and `tls.key` (of the test CA, see test/run.ts). */
async function admissionTlsDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'admission-tls-'));
  await copyFile(path.join(fixtures, 'localhost.pem'), path.join(dir, 'tls.crt'));
  await copyFile(path.join(fixtures, 'localhost-key.pem'), path.join(dir, 'tls.key'));
  return dir;
}

test.before(async () => {
  tlsDir = await admissionTlsDir();
  service = await startService({ ADMISSION_TLS_DIR: tlsDir, ADMISSION_PORT: '0' }, ['api', 'operator']);
  store = new PostgresResourceStore(service.pool);
});

test.after.always(async () => {
  await service?.close();
  if (tlsDir !== undefined) await rm(tlsDir, { recursive: true, force: true });
});

/** An AdmissionReview to the admission webhook's own HTTPS listener, as the Kubernetes API server sends it. */
function validate(review: unknown) {
  if (service.admissionUrl === undefined) throw new Error('the operator serves no admission webhook');
  return request(service.admissionUrl, 'POST', '/validate', { body: review, idempotencyKey: null });
}

function api(setup: Setup) {
  return (method: string, path: string, body?: unknown) =>
    service.request(method, `/api/v1${path}`, {
      auth: setup.apiKey,
      workspaceId: setup.workspace.id,
      ...(body === undefined ? {} : { body }),
    });
}

const apply = (intent: Omit<ResourceIntent, 'namespace'>) =>
  store.apply({ ...intent, namespace }, { fieldManager: 'gitops-test' });

const until = (kind: Resource['kind'], name: string, check: (resource: Resource) => boolean, what: string) =>
  untilResource(store, namespace, kind, name, check, what);
const member = (setup: Setup) => newMember(service, setup);

/** A queue's own hold prompt and announcements, written the same through the API and as a resource. */
const queueSettings = { holdPrompt: { tts: 'Please hold.' }, announcePosition: true, announceIntervalSecs: 30 };

function planDefinition(queueId: string, prompt = 'Press 1 for sales.') {
  return {
    entry: 'menu',
    steps: {
      menu: {
        type: 'menu',
        prompt: { tts: prompt },
        options: { '1': 'sales' },
        noInput: 'bye',
        timeoutSecs: 5,
        maxRetries: 2,
      },
      sales: { type: 'queue', queueId, maxWaitSecs: 300, overflow: 'bye', offerCallback: false },
      bye: { type: 'hangup', message: null },
    },
  };
}

test('a workspace written as resources gets the same REST answers as one made through the API', async (t) => {
  const viaApi = await workspaceWithUser(service);
  const viaGitOps = await workspaceWithUser(service);
  const [apiMember, gitopsMember] = [await member(viaApi), await member(viaGitOps)];

  // Through the API.
  const queue = await api(viaApi)('POST', '/queues', {
    name: 'Sales',
    strategy: 'round_robin',
    wrapUpSecs: 15,
    members: [apiMember],
    ...queueSettings,
  });
  t.is(queue.status, 201, queue.text);
  const plan = await api(viaApi)('POST', '/routing-plans', {
    name: 'Front desk',
    definition: planDefinition(queue.body.id),
    publish: true,
  });
  t.is(plan.status, 201, plan.text);

  // As resources only, ids chosen in the YAML, the plan naming the queue by its id.
  const queueId = randomUUID();
  const planId = randomUUID();
  const owner = { applicationId: viaGitOps.applicationId, workspaceId: viaGitOps.workspace.id };
  await apply({
    kind: 'Queue',
    name: 'sales',
    spec: {
      id: queueId,
      ...owner,
      name: 'Sales',
      strategy: 'round_robin',
      wrapUpSecs: 15,
      members: [gitopsMember],
      ...queueSettings,
    },
  });
  await apply({
    kind: 'RoutingPlan',
    name: 'front-desk',
    spec: { id: planId, ...owner, name: 'Front desk', definition: planDefinition(queueId), publish: true },
  });
  const planResource = await until(
    'RoutingPlan',
    'front-desk',
    (r) => condition(r, 'Ready')?.status === 'True',
    'Ready',
  );
  t.like(planResource.status, { newestVersion: 1, publishedVersion: 1, issues: [] });
  t.is(condition(planResource, 'Valid')?.status, 'True');
  t.is(condition(planResource, 'Published')?.status, 'True');
  t.true(planResource.metadata.finalizers.includes('switchboard.dev/routing-plan-records'));
  const queueResource = await until('Queue', 'sales', (r) => condition(r, 'Ready')?.status === 'True', 'Ready');
  t.true(queueResource.metadata.finalizers.includes('switchboard.dev/queue-in-use'));

  const gotQueue = await api(viaGitOps)('GET', `/queues/${queueId}`);
  t.is(gotQueue.status, 200, gotQueue.text);
  t.deepEqual(comparable(gotQueue.body), comparable(queue.body));
  t.deepEqual(gotQueue.body.members, [gitopsMember]);
  t.like(gotQueue.body, { ...queueSettings, announceExpectedWait: false });
  const gotPlan = await api(viaGitOps)('GET', `/routing-plans/${planId}`);
  t.is(gotPlan.status, 200, gotPlan.text);
  const expected = comparable(plan.body);
  t.deepEqual({ ...comparable(gotPlan.body), definition: null }, { ...expected, definition: null });
  t.deepEqual(gotPlan.body.definition, planDefinition(queueId));

  // Editing the definition in the resource makes version 2 (published, as the spec says).
  await apply({
    kind: 'RoutingPlan',
    name: 'front-desk',
    spec: {
      id: planId,
      ...owner,
      name: 'Front desk',
      definition: planDefinition(queueId, 'Sales: press 1.'),
      publish: true,
    },
  });
  const edited = await until('RoutingPlan', 'front-desk', (r) => reconciled(r) && r.status.newestVersion === 2, 'v2');
  t.like(edited.status, { newestVersion: 2, publishedVersion: 2 });
  const versions = await api(viaGitOps)('GET', `/routing-plans/${planId}/versions`);
  t.is(versions.status, 200, versions.text);
  t.deepEqual((versions.body.data as Array<{ version: number }>).map((version) => version.version).sort(), [1, 2]);
});

test('a plan applied before the queue it names is Invalid until the queue is recorded, then Ready at once', async (t) => {
  // GitOps applies in no set order; the plan must not wait for the next relist (or its 30 s recheck) to be valid.
  const setup = await workspaceWithUser(service);
  const owner = { applicationId: setup.applicationId, workspaceId: setup.workspace.id };
  const queueId = randomUUID();
  await apply({
    kind: 'RoutingPlan',
    name: 'queue-first-missing',
    spec: { id: randomUUID(), ...owner, name: 'Early plan', definition: planDefinition(queueId), publish: true },
  });
  const invalid = await until(
    'RoutingPlan',
    'queue-first-missing',
    (r) => condition(r, 'Valid')?.status === 'False',
    'Valid=False',
  );
  t.deepEqual(
    (invalid.status.issues as Array<{ code: string }>).map((issue) => issue.code),
    ['unknown_queue'],
  );
  await apply({
    kind: 'Queue',
    name: 'queue-first-missing',
    spec: { id: queueId, ...owner, name: 'Late queue', strategy: 'round_robin', wrapUpSecs: 0, members: [] },
  });
  const ready = await until(
    'RoutingPlan',
    'queue-first-missing',
    (r) => condition(r, 'Ready')?.status === 'True',
    'Ready',
  );
  t.like(ready.status, { newestVersion: 1, publishedVersion: 1, issues: [] });
});

test('an invalid plan gets Valid=False with the issues the REST API gives, and is never recorded or published', async (t) => {
  const setup = await workspaceWithUser(service);
  const definition = {
    entry: 'menu',
    steps: { menu: { type: 'queue', queueId: randomUUID(), maxWaitSecs: 60, overflow: 'gone', offerCallback: false } },
  };
  const rest = await api(setup)('POST', '/routing-plans/validate', { definition });
  t.is(rest.status, 200, rest.text);
  t.false(rest.body.valid);
  const planId = randomUUID();
  await apply({
    kind: 'RoutingPlan',
    name: 'broken',
    spec: {
      id: planId,
      applicationId: setup.applicationId,
      workspaceId: setup.workspace.id,
      name: 'Broken',
      definition,
      publish: true,
    },
  });
  const resource = await until(
    'RoutingPlan',
    'broken',
    (r) => condition(r, 'Valid')?.status === 'False',
    'Valid=False',
  );
  t.deepEqual(resource.status.issues, rest.body.issues);
  t.is(condition(resource, 'Published')?.status, 'False');
  t.is(condition(resource, 'Ready')?.status, 'False');
  t.is(resource.status.publishedVersion, null);
  t.is((await api(setup)('GET', `/routing-plans/${planId}`)).status, 404, 'nothing recorded');
});

test('a queue used by a plan cannot go: its deletion waits, the status says why; once unused it goes', async (t) => {
  const setup = await workspaceWithUser(service);
  const owner = { applicationId: setup.applicationId, workspaceId: setup.workspace.id };
  const queueId = randomUUID();
  await apply({
    kind: 'Queue',
    name: 'held',
    spec: { id: queueId, ...owner, name: 'Held', strategy: 'longest_idle', wrapUpSecs: 0, members: [] },
  });
  await until('Queue', 'held', (r) => condition(r, 'Ready')?.status === 'True', 'Ready');
  await apply({
    kind: 'RoutingPlan',
    name: 'uses-held',
    spec: { id: randomUUID(), ...owner, name: 'Uses held', definition: planDefinition(queueId), publish: true },
  });
  await until('RoutingPlan', 'uses-held', (r) => condition(r, 'Ready')?.status === 'True', 'Ready');

  await store.delete('Queue', namespace, 'held', { fieldManager: 'gitops-test' });
  const waiting = await until('Queue', 'held', (r) => condition(r, 'Ready')?.reason === 'InUse', 'InUse');
  t.truthy(waiting.metadata.deletionTimestamp);
  t.regex(
    (waiting.status.conditions as Array<{ message: string }>)[0]?.message ?? '',
    /used by routing plan "Uses held"/,
  );
  t.is((await api(setup)('GET', `/queues/${queueId}`)).status, 200, 'the record stays');

  // Deleting the plan archives it; the queue is then free, and goes with its record.
  await store.delete('RoutingPlan', namespace, 'uses-held', { fieldManager: 'gitops-test' });
  for (const deadline = Date.now() + 20_000; Date.now() < deadline;) {
    if ((await store.get('Queue', namespace, 'held')) === undefined) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  t.is(await store.get('Queue', namespace, 'held'), undefined);
  t.is(await store.get('RoutingPlan', namespace, 'uses-held'), undefined);
  t.is((await api(setup)('GET', `/queues/${queueId}`)).status, 404);
});

test('resources the API wrote reconcile to no change; a second operator waits for the lead', async (t) => {
  const setup = await workspaceWithUser(service);
  const plan = await api(setup)('POST', '/routing-plans', {
    name: 'API plan',
    definition: { entry: 'bye', steps: { bye: { type: 'hangup', message: null } } },
    publish: true,
  });
  t.is(plan.status, 201, plan.text);
  const resource = await until(
    'RoutingPlan',
    plan.body.id,
    (r) => condition(r, 'Ready')?.reason === 'Reconciled',
    'operator',
  );
  t.like(resource.status, { newestVersion: 1, publishedVersion: 1 });
  const versions = await service.pool.query('SELECT version FROM routing_plan_versions WHERE plan_id = $1', [
    plan.body.id,
  ]);
  t.is(versions.rowCount, 1, 'no version added by the operator');
  // A queue with its own hold prompt and announcements: the record the operator converges to is the API's.
  const queue = await api(setup)('POST', '/queues', { name: 'API queue', ...queueSettings });
  t.is(queue.status, 201, queue.text);
  await until('Queue', queue.body.id, (r) => condition(r, 'Ready')?.reason === 'Reconciled', 'operator');
  const after = await api(setup)('GET', `/queues/${queue.body.id}`);
  t.deepEqual(after.body, queue.body, 'unchanged, updatedAt included');

  // The service's own operator leads; another one waits (and never reconciles) until closed.
  const second = startOperator({
    pool: service.pool,
    store: new PostgresResourceStore(service.pool, { pool: service.pool, url: service.databaseUrl }),
    namespace,
    registry: new Registry(),
    log: { info() {}, warn() {} },
    leadership: new DatabaseLeadership(service.databaseUrl, 50),
    webhooks: { secretsKey: new Uint8Array(32), allowPrivateNetworks: false },
    engines: { carrierSecretsKey: new Uint8Array(32) },
  });
  let settledAs: boolean | undefined;
  void second.leading.then((leads) => {
    settledAs = leads;
  });
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.is(settledAs, undefined, 'it waits: the lock is held by the service’s operator');
  await second.close();
  t.false(await second.leading, 'closed while waiting, it never led');
});

test('the operator’s metrics are served', async (t) => {
  const setup = await workspaceWithUser(service);
  await apply({
    kind: 'Queue',
    name: 'metered',
    spec: {
      applicationId: setup.applicationId,
      workspaceId: setup.workspace.id,
      name: 'Metered',
      strategy: 'ring_all',
      wrapUpSecs: 0,
      members: [],
    },
  });
  const queue = await until('Queue', 'metered', (r) => condition(r, 'Ready')?.status === 'True', 'Ready');
  // Written without an id: the record takes the resource's uid.
  t.is((await api(setup)('GET', `/queues/${queue.metadata.uid}`)).status, 200);
  const metrics = await service.request('GET', '/metrics');
  t.regex(metrics.text, /switchboard_operator_reconciles_total\{kind="Queue",outcome="success"\} \d+/);
  t.regex(metrics.text, /switchboard_operator_leader 1/);
  t.regex(metrics.text, /switchboard_operator_queue_depth\{kind="Queue"\} \d+/);
});

function admission(operation: string, kind: string, fields: Record<string, unknown>) {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: randomUUID(),
      kind: { group: 'switchboard.dev', version: 'v1alpha1', kind },
      resource: { group: 'switchboard.dev', version: 'v1alpha1', resource: `${kind.toLowerCase()}s` },
      operation,
      namespace,
      ...fields,
    },
  };
}

test('the admission webhook refuses an invalid plan with the REST issues, and the delete of a queue in use', async (t) => {
  const setup = await workspaceWithUser(service);
  const owner = { applicationId: setup.applicationId, workspaceId: setup.workspace.id };
  const definition = {
    entry: 'menu',
    steps: { menu: { type: 'queue', queueId: randomUUID(), maxWaitSecs: 60, overflow: 'gone', offerCallback: false } },
  };
  const rest = await api(setup)('POST', '/routing-plans', { name: 'Broken', definition });
  t.is(rest.status, 422, rest.text);
  const review = admission('CREATE', 'RoutingPlan', {
    object: { metadata: { name: 'broken' }, spec: { ...owner, name: 'Broken', definition } },
  });
  const answer = await validate(review);
  t.is(answer.status, 200, answer.text);
  t.like(answer.body, { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' });
  t.is(answer.body.response.uid, review.request.uid);
  t.false(answer.body.response.allowed);
  t.is(answer.body.response.status.code, 422);
  const restErrors = (rest.body.error.issues as Array<{ stepId: string | null; code: string; severity: string }>)
    .filter((issue) => issue.severity === 'error')
    .map((issue) => `${issue.stepId}: ${issue.code}`);
  const causes = (answer.body.response.status.details.causes as Array<{ field: string; message: string }>).map(
    (cause) => `${cause.field.replace('spec.definition.steps.', '')}: ${cause.message.split(':')[0]}`,
  );
  t.deepEqual(causes, restErrors, 'the same issues as the REST 422');
  t.regex(answer.body.response.status.message, /^invalid_plan: /);

  // A valid plan, a spec that breaks the schema, and a workspace of another application.
  const valid = { entry: 'bye', steps: { bye: { type: 'hangup', message: null } } };
  const allowed = await validate(
    admission('UPDATE', 'RoutingPlan', { object: { spec: { ...owner, name: 'Fine', definition: valid } } }),
  );
  t.true(allowed.body.response.allowed, allowed.text);
  const shapeless = await validate(
    admission('CREATE', 'RoutingPlan', { object: { spec: { ...owner, definition: valid } } }),
  );
  t.false(shapeless.body.response.allowed);
  t.regex(JSON.stringify(shapeless.body.response.status.details.causes), /name/);
  const elsewhere = await validate(
    admission('CREATE', 'RoutingPlan', {
      object: { spec: { ...owner, applicationId: 'someone-else', name: 'X', definition: valid } },
    }),
  );
  t.false(elsewhere.body.response.allowed);

  // A queue a plan uses cannot be deleted; an unused one can.
  const queue = await api(setup)('POST', '/queues', { name: 'Busy' });
  const idle = await api(setup)('POST', '/queues', { name: 'Idle' });
  const uses = await api(setup)('POST', '/routing-plans', {
    name: 'Uses busy',
    definition: planDefinition(queue.body.id),
  });
  t.is(uses.status, 201, uses.text);
  const refuse = await validate(
    admission('DELETE', 'Queue', { oldObject: { metadata: { uid: randomUUID() }, spec: { id: queue.body.id } } }),
  );
  t.false(refuse.body.response.allowed);
  t.regex(refuse.body.response.status.message, /^in_use: this queue is used by routing plan "Uses busy"/);
  const unusedDelete = await validate(
    admission('DELETE', 'Queue', { oldObject: { metadata: { uid: randomUUID() }, spec: { id: idle.body.id } } }),
  );
  t.true(unusedDelete.body.response.allowed);

  // Not an AdmissionReview: 400 in the envelope.
  const garbage = await validate({ hello: 'world' });
  t.is(garbage.status, 400);
  t.is(garbage.body.error.code, 'invalid_request');
});

test('a WebhookEndpoint resource makes the endpoint the API shows; without a cluster, secretRef waits; deleting it removes it', async (t) => {
  const setup = await workspaceWithUser(service);
  const endpointId = randomUUID();
  await apply({
    kind: 'WebhookEndpoint',
    name: 'hooks',
    spec: {
      id: endpointId,
      applicationId: setup.applicationId,
      url: 'https://hooks.example.com/switchboard',
      eventTypes: ['call.started', 'call.ended'],
      description: 'CRM',
    },
  });
  await until('WebhookEndpoint', 'hooks', (r) => condition(r, 'Ready')?.status === 'True', 'Ready');
  const shown = await service.request('GET', `/api/v1/webhooks/${endpointId}`, { auth: setup.apiKey });
  t.is(shown.status, 200, shown.text);
  t.like(shown.body, {
    id: endpointId,
    url: 'https://hooks.example.com/switchboard',
    eventTypes: ['call.started', 'call.ended'],
    enabled: true,
    description: 'CRM',
  });

  await apply({
    kind: 'WebhookEndpoint',
    name: 'from-secret',
    spec: {
      applicationId: setup.applicationId,
      url: 'https://hooks.example.com/other',
      secretRef: { name: 'hook-secret', key: 'secret' },
    },
  });
  const waiting = await until(
    'WebhookEndpoint',
    'from-secret',
    (r) => condition(r, 'Ready')?.status === 'False',
    'waits',
  );
  t.is(condition(waiting, 'Ready')?.reason, 'SecretsUnavailable');

  await apply({
    kind: 'WebhookEndpoint',
    name: 'private',
    spec: { applicationId: setup.applicationId, url: 'https://127.0.0.1/hook' },
  });
  const refused = await until(
    'WebhookEndpoint',
    'private',
    (r) => condition(r, 'Ready')?.status === 'False',
    'refused',
  );
  t.is(condition(refused, 'Ready')?.reason, 'InvalidUrl');

  await store.delete('WebhookEndpoint', namespace, 'hooks', { fieldManager: 'gitops-test' });
  for (const deadline = Date.now() + 20_000; Date.now() < deadline;) {
    if ((await store.get('WebhookEndpoint', namespace, 'hooks')) === undefined) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  t.is((await service.request('GET', `/api/v1/webhooks/${endpointId}`, { auth: setup.apiKey })).status, 404);
});

test('with ADMISSION_TLS_DIR the operator serves the admission webhook over HTTPS', async (t) => {
  const dir = await admissionTlsDir();
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const tls = await startService({ ADMISSION_TLS_DIR: dir, ADMISSION_PORT: '0' }, ['operator']);
  t.teardown(() => tls.close());
  t.regex(tls.admissionUrl ?? '', /^https:\/\/localhost:\d+$/);
  const review = admission('DELETE', 'Queue', { oldObject: { metadata: { uid: randomUUID() }, spec: {} } });
  // NODE_EXTRA_CA_CERTS (test/run.ts) trusts the fixtures' CA, as the API server trusts the chart's caBundle.
  const answer = await fetch(`${tls.admissionUrl}/validate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(review),
  });
  t.is(answer.status, 200);
  const body = (await answer.json()) as { response: { uid: string; allowed: boolean } };
  t.deepEqual(body.response, { uid: review.request.uid, allowed: true });
  // The operator's health and metrics port does not serve it.
  isError(t, await tls.request('POST', '/validate', { body: review, idempotencyKey: null }), 404, 'not_found');
});

test('under `all` the API’s port does not serve the admission webhook: 404 in the envelope, with or without a certificate', async (t) => {
  const dir = await admissionTlsDir();
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const all = await startService({ ADMISSION_TLS_DIR: dir, ADMISSION_PORT: '0' }, ['api', 'engine', 'operator']);
  t.teardown(() => all.close());
  const withoutCertificate = await startService({}, ['api', 'engine', 'operator']);
  t.teardown(() => withoutCertificate.close());
  // A queue a plan uses: the webhook refuses its deletion, which tells whoever asks that the queue exists.
  const setup = await workspaceWithUser(all);
  const create = (path: string, body: unknown) =>
    all.request('POST', `/api/v1${path}`, { auth: setup.apiKey, workspaceId: setup.workspace.id, body });
  const queue = await create('/queues', { name: 'Busy' });
  t.is(queue.status, 201, queue.text);
  const plan = await create('/routing-plans', { name: 'Uses busy', definition: planDefinition(queue.body.id) });
  t.is(plan.status, 201, plan.text);
  const review = admission('DELETE', 'Queue', {
    oldObject: { metadata: { uid: randomUUID() }, spec: { id: queue.body.id } },
  });
  for (const running of [all, withoutCertificate]) {
    const answer = await running.request('POST', '/validate', { body: review, idempotencyKey: null });
    isError(t, answer, 404, 'not_found');
    t.false(answer.text.includes('in_use'));
  }
  t.is(withoutCertificate.admissionUrl, undefined, 'without a certificate there is no admission webhook at all');
  // Its own HTTPS listener answers, as the Kubernetes API server calls it.
  const answered = await request(all.admissionUrl ?? '', 'POST', '/validate', { body: review, idempotencyKey: null });
  t.is(answered.status, 200, answered.text);
  t.false(answered.body.response.allowed);
  t.regex(answered.body.response.status.message, /^in_use: /);
});

test('examples/ applied as written: the queue and the plan reconcile and answer the REST API; the endpoint’s Secret needs a cluster', async (t) => {
  const documents = await exampleDocuments();
  const custom = documents.filter((doc) => ['Queue', 'RoutingPlan', 'WebhookEndpoint'].includes(doc.kind));
  const plan = custom.find((doc) => doc.kind === 'RoutingPlan');
  const { applicationId, workspaceId } = plan?.spec as { applicationId: string; workspaceId: string };
  // The workspace the examples name, with its fixed id.
  const { apiKey } = await service.application(applicationId);
  await service.pool.query(
    `INSERT INTO workspaces (id, application_id, external_workspace_id, name, timezone, destination_policy, limits)
     VALUES ($1, $2, 'example', 'Example', 'UTC', '{}', '{}')`,
    [workspaceId, applicationId],
  );
  // Other tests here use the same namespace: the examples' names get a prefix.
  for (const doc of custom) doc.metadata.name = `examples-${doc.metadata.name}`;
  for (const doc of custom) {
    await apply({ kind: doc.kind as Resource['kind'], name: doc.metadata.name, spec: doc.spec ?? {} });
  }
  const queue = custom.find((doc) => doc.kind === 'Queue') as unknown as {
    metadata: { name: string };
    spec: { id: string };
  };
  await until('Queue', queue.metadata.name, (r) => condition(r, 'Ready')?.status === 'True', 'Ready');
  const ready = await until(
    'RoutingPlan',
    plan?.metadata.name as string,
    (r) => condition(r, 'Ready')?.status === 'True',
    'Ready',
  );
  t.like(ready.status, { newestVersion: 1, publishedVersion: 1, issues: [] });
  const planId = (plan?.spec as { id: string }).id;
  const rest = (path: string) => service.request('GET', `/api/v1${path}`, { auth: apiKey, workspaceId });
  const shownPlan = await rest(`/routing-plans/${planId}`);
  t.is(shownPlan.status, 200, shownPlan.text);
  t.like(shownPlan.body, { name: 'Front desk', state: 'published', publishedVersion: 1 });
  t.deepEqual(shownPlan.body.definition, plan?.spec?.definition);
  const shownQueue = await rest(`/queues/${queue.spec.id}`);
  t.is(shownQueue.status, 200, shownQueue.text);
  // Its signing secret is in a Kubernetes Secret: without a cluster the endpoint says so and waits.
  const endpoint = custom.find((doc) => doc.kind === 'WebhookEndpoint') as { metadata: { name: string } };
  const waiting = await until(
    'WebhookEndpoint',
    endpoint.metadata.name,
    (r) => condition(r, 'Ready') !== undefined,
    'status',
  );
  t.is(condition(waiting, 'Ready')?.reason, 'SecretsUnavailable');
});

test('a resource whose spec breaks its kind’s schema is reported InvalidSpec and reaches no record', async (t) => {
  const setup = await workspaceWithUser(service);
  const queueId = randomUUID();
  await apply({
    kind: 'Queue',
    name: 'odd-strategy',
    spec: {
      id: queueId,
      applicationId: setup.applicationId,
      workspaceId: setup.workspace.id,
      name: 'Odd',
      strategy: 'random',
      wrapUpSecs: 0,
      members: [],
    },
  });
  const refused = await until('Queue', 'odd-strategy', (r) => condition(r, 'Ready') !== undefined, 'status');
  t.like(condition(refused, 'Ready'), { status: 'False', reason: 'InvalidSpec' });
  t.regex(
    (refused.status.conditions as Array<{ message: string }>)[0]?.message ?? '',
    /^spec\.strategy must be one of/,
  );
  t.is((await api(setup)('GET', `/queues/${queueId}`)).status, 404);

  // The announcement settings are checked as the API checks them.
  const fastId = randomUUID();
  await apply({
    kind: 'Queue',
    name: 'fast-announcements',
    spec: {
      id: fastId,
      applicationId: setup.applicationId,
      workspaceId: setup.workspace.id,
      name: 'Fast',
      strategy: 'longest_idle',
      wrapUpSecs: 0,
      members: [],
      announceIntervalSecs: 5,
    },
  });
  const fast = await until('Queue', 'fast-announcements', (r) => condition(r, 'Ready') !== undefined, 'status');
  t.like(condition(fast, 'Ready'), { status: 'False', reason: 'InvalidSpec' });
  t.regex((fast.status.conditions as Array<{ message: string }>)[0]?.message ?? '', /announceIntervalSecs/);
  t.is((await api(setup)('GET', `/queues/${fastId}`)).status, 404);
});

test('an endpoint made, changed and deleted through the API is a WebhookEndpoint resource beside its record', async (t) => {
  const setup = await workspaceWithUser(service);
  const created = await service.request('POST', '/api/v1/webhooks', {
    auth: setup.apiKey,
    body: { url: 'https://hooks.example.com/api-made', eventTypes: ['call.started'], description: 'Made by the API' },
  });
  t.is(created.status, 201, created.text);
  const id = created.body.endpoint.id as string;
  const resource = await store.get('WebhookEndpoint', namespace, id);
  t.deepEqual(resource?.spec, {
    id,
    applicationId: setup.applicationId,
    url: 'https://hooks.example.com/api-made',
    enabled: true,
    eventTypes: ['call.started'],
    description: 'Made by the API',
  });
  t.is(resource?.metadata.labels['switchboard.dev/application'], setup.applicationId);
  // The operator finds the record as the API wrote it: Ready, and the secret the API showed is kept.
  const ready = await until('WebhookEndpoint', id, (r) => condition(r, 'Ready')?.status === 'True', 'Ready');
  t.true(ready.metadata.finalizers.includes('switchboard.dev/webhook-endpoint-record'));

  const changed = await service.request('PATCH', `/api/v1/webhooks/${id}`, {
    auth: setup.apiKey,
    body: { description: null, eventTypes: null, enabled: false },
  });
  t.is(changed.status, 200, changed.text);
  t.deepEqual((await store.get('WebhookEndpoint', namespace, id))?.spec, {
    id,
    applicationId: setup.applicationId,
    url: 'https://hooks.example.com/api-made',
    enabled: false,
  });

  const deleted = await service.request('DELETE', `/api/v1/webhooks/${id}`, { auth: setup.apiKey });
  t.is(deleted.status, 200, deleted.text);
  let left = await store.get('WebhookEndpoint', namespace, id);
  for (const deadline = Date.now() + 20_000; left !== undefined && Date.now() < deadline;) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    left = await store.get('WebhookEndpoint', namespace, id);
  }
  t.is(left, undefined, 'the finalizer ran and the resource went');
});
