/**
 * What one workspace may store of routing plans (core/routing/limits.ts, docs/routing-plans.md "Limits"), through
 * real HTTP and the operator on the PostgreSQL resource store: a definition over 256 KiB is 413 in the envelope (and
 * an issue of the validate operation), a workspace past 500 plans and a plan past 1,000 versions are 409
 * `limit_exceeded`, counted so that saves at once never pass a limit together; a `RoutingPlan` resource past a limit
 * gets `Valid=False` with the REST API's message, and the admission webhook refuses it with the same one.
 *
 * The plans and versions below a limit are written straight to the tables (the service's own schema): making 499
 * plans through HTTP would only make the test slow.
 */
import { randomUUID } from 'node:crypto';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test, { type ExecutionContext } from 'ava';
import { PostgresResourceStore } from '../../core/resources/postgres-store.ts';
import type { Resource } from '../../core/resources/store.ts';
import {
  maxDefinitionBytes,
  maxPlansPerWorkspace,
  maxVersionsPerPlan,
  plansLimitProblem,
  versionsLimitProblem,
} from '../../core/routing/limits.ts';
import { condition, type Setup, untilResource } from '../helpers/resources.ts';
import {
  type Answer,
  isError,
  request,
  startService,
  type TestService,
  workspaceClient,
  workspaceWithUser,
} from '../helpers/service.ts';

let service: TestService;
let store: PostgresResourceStore;
let tlsDir: string;
const namespace = 'switchboard';
const fixtures = fileURLToPath(new URL('../fixtures/tls/', import.meta.url));

test.before(async () => {
  // The admission webhook's certificate, as the chart mounts it (of the test CA, see test/run.ts).
  tlsDir = await mkdtemp(path.join(os.tmpdir(), 'admission-tls-'));
  await copyFile(path.join(fixtures, 'localhost.pem'), path.join(tlsDir, 'tls.crt'));
  await copyFile(path.join(fixtures, 'localhost-key.pem'), path.join(tlsDir, 'tls.key'));
  service = await startService({ ADMISSION_TLS_DIR: tlsDir, ADMISSION_PORT: '0' }, ['api', 'operator']);
  store = new PostgresResourceStore(service.pool);
});

test.after.always(async () => {
  await service?.close();
  if (tlsDir !== undefined) await rm(tlsDir, { recursive: true, force: true });
});

const api = (setup: Setup) => workspaceClient(service, setup);

const small = { entry: 'bye', steps: { bye: { type: 'hangup', message: null } } };

/** A valid definition of about `bytes` bytes as JSON: a hangup step, and unreachable ones (warnings) to fill. */
function definitionOf(bytes: number) {
  const steps: Record<string, { type: 'hangup'; message: string | null }> = { bye: { type: 'hangup', message: null } };
  const definition = { entry: 'bye', steps };
  let size = Buffer.byteLength(JSON.stringify(definition));
  for (let index = 0; size < bytes; index += 1) {
    const overhead = `,"f${index}":{"type":"hangup","message":""}`.length;
    const text = 'x'.repeat(Math.max(1, Math.min(4000, bytes - size - overhead)));
    steps[`f${index}`] = { type: 'hangup', message: text };
    size += overhead + text.length;
  }
  return definition;
}

/** `count` plans (one version each) written straight to the workspace's tables. */
async function seedPlans(workspaceId: string, count: number): Promise<void> {
  await service.pool.query(
    `WITH plans AS (
       INSERT INTO routing_plans (workspace_id, name, newest_version)
       SELECT $1, 'Seeded ' || n, 1 FROM generate_series(1, $2) n RETURNING id)
     INSERT INTO routing_plan_versions (plan_id, version, definition, schedule_ids, queue_ids, ai_agent_ids)
     SELECT id, 1, $3, '{}', '{}', '{}' FROM plans`,
    [workspaceId, count, JSON.stringify(small)],
  );
}

/** Versions 2 to `newest` of a plan, written straight to its tables. */
async function seedVersions(planId: string, newest: number): Promise<void> {
  await service.pool.query(
    `INSERT INTO routing_plan_versions (plan_id, version, definition, schedule_ids, queue_ids, ai_agent_ids)
     SELECT $1, n, $3, '{}', '{}', '{}' FROM generate_series(2, $2) n`,
    [planId, newest, JSON.stringify(small)],
  );
  await service.pool.query('UPDATE routing_plans SET newest_version = $2 WHERE id = $1', [planId, newest]);
}

async function planCount(workspaceId: string): Promise<number> {
  const result = await service.pool.query<{ plans: number }>(
    'SELECT count(*)::int AS plans FROM routing_plans WHERE workspace_id = $1 AND archived_at IS NULL',
    [workspaceId],
  );
  return result.rows[0]?.plans ?? -1;
}

/** A condition's message (`condition` gives the current generation's). */
const messageOf = (resource: Resource, type: string) =>
  (condition(resource, type) as { message?: string } | undefined)?.message;

/** isError, with the answer's text cut short in the labels (a definition near 256 KiB would fill the report). */
function refused(t: ExecutionContext, answer: Answer, status: number, code: string): void {
  isError(t, { ...answer, text: answer.text.slice(0, 300) }, status, code);
}

const statuses = (answers: Answer[]) => answers.map((answer) => answer.status).sort();

test('a definition over 256 KiB is 413 in the envelope on create and save, an issue of validate; up to it is stored', async (t) => {
  const setup = await workspaceWithUser(service);
  const call = api(setup);
  const atLimit = definitionOf(maxDefinitionBytes);
  t.is(Buffer.byteLength(JSON.stringify(atLimit)), maxDefinitionBytes);
  const over = definitionOf(maxDefinitionBytes + 1);
  const expected = `the definition is ${maxDefinitionBytes + 1} bytes as JSON, over the ${maxDefinitionBytes} bytes (256 KiB) a routing plan definition may have`;

  const tooLarge = await call('POST', '/routing-plans', { name: 'Too large', definition: over });
  refused(t, tooLarge, 413, 'payload_too_large');
  t.is(tooLarge.body.error.message, expected);
  t.is(await planCount(setup.workspace.id), 0, 'nothing recorded');

  const stored = await call('POST', '/routing-plans', { name: 'At the limit', definition: atLimit });
  t.is(stored.status, 201, stored.text.slice(0, 300));
  const save = await call('PATCH', `/routing-plans/${stored.body.id}`, { definition: over });
  refused(t, save, 413, 'payload_too_large');
  t.is(save.body.error.message, expected);
  t.is((await call('GET', `/routing-plans/${stored.body.id}`)).body.newestVersion, 1);

  const validated = await call('POST', '/routing-plans/validate', { definition: over });
  t.is(validated.status, 200);
  t.deepEqual(validated.body, {
    valid: false,
    issues: [{ stepId: null, code: 'definition_too_large', message: expected, severity: 'error' }],
  });
  // A body over BODY_LIMIT (1 MiB) is refused before it is read, in the envelope too.
  const huge = await call('POST', '/routing-plans', { name: 'Huge', definition: definitionOf(1_100_000) });
  refused(t, huge, 413, 'payload_too_large');
});

test('a workspace holds at most 500 plans: eight creates at once at 499 make exactly one, archiving makes room', async (t) => {
  const setup = await workspaceWithUser(service);
  const call = api(setup);
  await seedPlans(setup.workspace.id, maxPlansPerWorkspace - 1);
  const answers = await Promise.all(
    Array.from({ length: 8 }, (_, index) =>
      call('POST', '/routing-plans', { name: `Race ${index}`, definition: small }),
    ),
  );
  t.deepEqual(
    statuses(answers),
    [201, 409, 409, 409, 409, 409, 409, 409],
    answers.map((a) => a.text.slice(0, 200)).join('\n'),
  );
  const overPlans = answers.find((answer) => answer.status === 409) as Answer;
  refused(t, overPlans, 409, 'limit_exceeded');
  t.is(overPlans.body.error.message, plansLimitProblem(maxPlansPerWorkspace));
  t.regex(overPlans.body.error.message, /^the workspace has 500 routing plans, the most it may have \(500\)/);
  t.is(await planCount(setup.workspace.id), maxPlansPerWorkspace);

  // Another workspace is not counted with this one; an archived plan makes room.
  const other = await workspaceWithUser(service);
  t.is((await api(other)('POST', '/routing-plans', { name: 'Elsewhere', definition: small })).status, 201);
  const made = answers.find((answer) => answer.status === 201) as Answer;
  t.is((await call('DELETE', `/routing-plans/${made.body.id}`)).status, 200);
  t.is((await call('POST', '/routing-plans', { name: 'After archiving', definition: small })).status, 201);
});

test('a plan keeps at most 1,000 versions: eight saves at once at 999 make exactly one; rename and publish still work', async (t) => {
  const setup = await workspaceWithUser(service);
  const call = api(setup);
  const plan = await call('POST', '/routing-plans', { name: 'Busy plan', definition: small });
  t.is(plan.status, 201);
  await seedVersions(plan.body.id, maxVersionsPerPlan - 1);
  const answers = await Promise.all(
    Array.from({ length: 8 }, (_, index) =>
      call('PATCH', `/routing-plans/${plan.body.id}`, {
        definition: { entry: 'bye', steps: { bye: { type: 'hangup', message: `Goodbye ${index}.` } } },
      }),
    ),
  );
  t.deepEqual(
    statuses(answers),
    [200, 409, 409, 409, 409, 409, 409, 409],
    answers.map((a) => a.text.slice(0, 200)).join('\n'),
  );
  const overVersions = answers.find((answer) => answer.status === 409) as Answer;
  refused(t, overVersions, 409, 'limit_exceeded');
  t.is(overVersions.body.error.message, versionsLimitProblem(maxVersionsPerPlan));
  const after = await call('GET', `/routing-plans/${plan.body.id}`);
  t.is(after.body.newestVersion, maxVersionsPerPlan);
  // What makes no version still works at the limit.
  const renamed = await call('PATCH', `/routing-plans/${plan.body.id}`, { name: 'Renamed' });
  t.is(renamed.status, 200, renamed.text);
  const published = await call('POST', `/routing-plans/${plan.body.id}/publish`, {});
  t.is(published.status, 200, published.text);
  t.is(published.body.publishedVersion, maxVersionsPerPlan);
});

/** An AdmissionReview to the admission webhook's own HTTPS listener, as the Kubernetes API server sends it. */
async function admit(
  operation: 'CREATE' | 'UPDATE',
  object: { metadata: { uid?: string; annotations?: Record<string, string> }; spec: unknown },
  oldObject?: unknown,
) {
  if (service.admissionUrl === undefined) throw new Error('the operator serves no admission webhook');
  const review = {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: randomUUID(),
      kind: { group: 'switchboard.dev', version: 'v1alpha1', kind: 'RoutingPlan' },
      resource: { group: 'switchboard.dev', version: 'v1alpha1', resource: 'routingplans' },
      operation,
      namespace,
      object,
      ...(oldObject === undefined ? {} : { oldObject }),
    },
  };
  const answer = await request(service.admissionUrl, 'POST', '/validate', { body: review, idempotencyKey: null });
  if (answer.status !== 200) throw new Error(answer.text);
  return answer.body.response as { allowed: boolean; status?: { code: number; message: string } };
}

function apply(name: string, spec: Record<string, unknown>) {
  return store.apply({ kind: 'RoutingPlan', name, namespace, spec }, { fieldManager: 'gitops-test' });
}

const validCondition = (name: string, reason: string) =>
  untilResource(
    store,
    namespace,
    'RoutingPlan',
    name,
    (resource: Resource) =>
      resource.status.observedGeneration === resource.metadata.generation &&
      condition(resource, 'Valid')?.reason === reason,
    `Valid ${reason}`,
  );

test('a RoutingPlan past a limit gets Valid=False with the REST message; the admission webhook refuses it with the same', async (t) => {
  const setup = await workspaceWithUser(service);
  const owner = { applicationId: setup.applicationId, workspaceId: setup.workspace.id };

  // Too large: an issue, as the REST validate operation lists it.
  const over = definitionOf(maxDefinitionBytes + 1);
  const rest = await api(setup)('POST', '/routing-plans/validate', { definition: over });
  const large = { ...owner, id: randomUUID(), name: 'Too large', definition: over };
  const refusedLarge = await admit('CREATE', { metadata: {}, spec: large });
  t.false(refusedLarge.allowed);
  t.is(refusedLarge.status?.code, 422);
  t.is(refusedLarge.status?.message, `invalid_plan: the definition has 1 problem: ${rest.body.issues[0].message}`);
  await apply('too-large', large);
  const tooLarge = await validCondition('too-large', 'Invalid');
  t.is(condition(tooLarge, 'Valid')?.status, 'False');
  t.deepEqual(tooLarge.status.issues, rest.body.issues);
  t.is(messageOf(tooLarge, 'Valid'), `the definition has 1 problem: ${rest.body.issues[0].message}`);

  // A plan past the workspace's 500: refused by the webhook as by the API, Valid=False LimitExceeded, no record.
  await seedPlans(setup.workspace.id, maxPlansPerWorkspace);
  const viaApi = await api(setup)('POST', '/routing-plans', { name: 'One more', definition: small });
  refused(t, viaApi, 409, 'limit_exceeded');
  const extra = { ...owner, id: randomUUID(), name: 'One more', definition: small };
  const refusedPlan = await admit('CREATE', { metadata: {}, spec: extra });
  t.false(refusedPlan.allowed);
  t.is(refusedPlan.status?.code, 409);
  t.is(refusedPlan.status?.message, `limit_exceeded: ${viaApi.body.error.message}`);
  await apply('one-more', extra);
  const onePlanMore = await validCondition('one-more', 'LimitExceeded');
  t.is(condition(onePlanMore, 'Valid')?.status, 'False');
  t.is(messageOf(onePlanMore, 'Valid'), viaApi.body.error.message);
  t.is(condition(onePlanMore, 'Ready')?.status, 'False');
  t.is(onePlanMore.status.newestVersion, null);
  t.is((await api(setup)('GET', `/routing-plans/${extra.id}`)).status, 404, 'nothing recorded');
  t.is(await planCount(setup.workspace.id), maxPlansPerWorkspace);

  // A plan at 1,000 versions (another workspace): a new definition is refused alike; the same definition is not.
  const second = await workspaceWithUser(service);
  const secondOwner = { applicationId: second.applicationId, workspaceId: second.workspace.id };
  const planId = randomUUID();
  const spec = { ...secondOwner, id: planId, name: 'Long lived', definition: small, publish: true };
  await apply('long-lived', spec);
  await validCondition('long-lived', 'Validated');
  // Versions 2 to 1,000 are the same definition: the resource's spec is the newest version still.
  await seedVersions(planId, maxVersionsPerPlan);
  const changed = { entry: 'bye', steps: { bye: { type: 'hangup', message: 'Goodbye.' } } };
  const viaApiSave = await api(second)('PATCH', `/routing-plans/${planId}`, { definition: changed });
  refused(t, viaApiSave, 409, 'limit_exceeded');
  const refusedVersion = await admit('UPDATE', { metadata: {}, spec: { ...spec, definition: changed } });
  t.false(refusedVersion.allowed);
  t.is(refusedVersion.status?.message, `limit_exceeded: ${viaApiSave.body.error.message}`);
  t.true((await admit('UPDATE', { metadata: {}, spec: { ...spec, name: 'Renamed' } })).allowed, 'no new version');
  await apply('long-lived', { ...spec, definition: changed });
  const pastVersions = await validCondition('long-lived', 'LimitExceeded');
  t.is(messageOf(pastVersions, 'Valid'), viaApiSave.body.error.message);
  t.is(condition(pastVersions, 'Ready')?.status, 'False');
  t.is(pastVersions.status.newestVersion, maxVersionsPerPlan, 'the recorded versions stay');
  t.is((await api(second)('GET', `/routing-plans/${planId}`)).body.newestVersion, maxVersionsPerPlan);
});

test('the admission webhook reads the review of a plan at the size limit applied by kubectl: both objects, twice the spec each', async (t) => {
  const setup = await workspaceWithUser(service);
  const spec = {
    applicationId: setup.applicationId,
    workspaceId: setup.workspace.id,
    id: randomUUID(),
    name: 'At the limit',
    definition: definitionOf(maxDefinitionBytes),
  };
  // kubectl apply keeps the applied object again in an annotation: an object carries its definition twice, and an
  // update's review carries the old object too, about 1 MiB here (the Kubernetes API server sends up to its own 3 MiB).
  const applied = (name: string) => ({
    metadata: {
      uid: spec.id,
      annotations: {
        'kubectl.kubernetes.io/last-applied-configuration': JSON.stringify({ metadata: { name }, spec }),
      },
    },
    spec,
  });
  const verdict = await admit('UPDATE', applied('at-the-limit'), applied('at-the-limit'));
  t.true(verdict.allowed, JSON.stringify(verdict.status));
});
