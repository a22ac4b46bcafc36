/**
 * Queues, schedules and AI agents through HTTP: operations 34-48 (create, list, get, update, delete of each), the
 * `Queue` custom resource the queue operations write, the refusal to delete (409 `in_use`) what a routing plan's
 * newest or published version names, and the credentials these operations take.
 *
 * One service running the API role only. Every test makes its own application and workspace, so tests run
 * concurrently without seeing each other's data. Schedule expectations are written from the published rules of
 * America/New_York (UTC-5 in winter, UTC-4 from the second Sunday of March 02:00 to the first Sunday of November
 * 02:00; in 2026: 2026-03-08 and 2026-11-01), not from the code under test.
 */
import { randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import { createMember } from '../../core/identity/members.ts';
import type { Scope } from '../../core/scopes.ts';
import { loadSigningKeys } from '../../core/service-secret.ts';
import { openSecret } from '../../core/sealing.ts';
import { mintToken } from '../../api/tokens.ts';
import {
  type Answer,
  type RequestOptions,
  startService,
  type TestService,
  workspaceWithUser,
  isError,
} from '../helpers/service.ts';

let service: TestService;

test.before(async () => {
  service = await startService({}, ['api']);
});

test.after.always(async () => {
  await service?.close();
});

// ---------------------------------------------------------------------------------------------------------------
// Helpers

interface Tenant {
  apiKey: string;
  applicationId: string;
  workspaceId: string;
  externalWorkspaceId: string;
}

/** A new application with one workspace (and its user `alice`). */
async function tenant(): Promise<Tenant> {
  const made = await workspaceWithUser(service);
  return {
    apiKey: made.apiKey,
    applicationId: made.applicationId,
    workspaceId: made.workspace.id as string,
    externalWorkspaceId: made.workspace.externalWorkspaceId as string,
  };
}

/** Another workspace of the same application. */
async function secondWorkspace(owner: Tenant): Promise<Tenant> {
  const externalWorkspaceId = `ws-${randomUUID()}`;
  const answer = await service.request('POST', '/api/v1/workspaces', {
    auth: owner.apiKey,
    body: { externalWorkspaceId, name: 'Other Support', timezone: 'UTC' },
  });
  if (answer.status !== 201) throw new Error(`workspace: ${answer.status} ${answer.text}`);
  return { ...owner, workspaceId: answer.body.id, externalWorkspaceId };
}

/** A request of the tenant's application key in its workspace. */
function call(who: Tenant, method: string, path: string, body?: unknown, options: RequestOptions = {}) {
  return service.request(method, `/api/v1${path}`, {
    auth: who.apiKey,
    workspaceId: who.workspaceId,
    ...(body === undefined ? {} : { body }),
    ...options,
  });
}

/** 400 `invalid_request` whose message names the field (`pattern`). */
function isInvalid(t: ExecutionContext, answer: Answer, pattern: RegExp, label = '') {
  isError(t, answer, 400, 'invalid_request', label);
  t.regex(String(answer.body?.error?.message), pattern, `${label} ${answer.text}`);
}

const uuidRegex = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const isoRegex = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

async function created(what: string, answer: Answer) {
  if (answer.status !== 201) throw new Error(`${what}: ${answer.status} ${answer.text}`);
  return answer.body;
}

function createQueue(who: Tenant, body: Record<string, unknown>) {
  return call(who, 'POST', '/queues', body).then((answer) => created('queue', answer));
}

async function member(who: Tenant, email = `agent-${randomUUID()}@example.com`, scopes: Scope[] = ['routing:*']) {
  return createMember(service.pool, { workspaceId: who.workspaceId, email, scopes });
}

const hangup = { type: 'hangup', message: null };

function queuePlan(queueId: string) {
  return {
    entry: 'q',
    steps: { q: { type: 'queue', queueId, maxWaitSecs: 60, overflow: 'bye', offerCallback: false }, bye: hangup },
  };
}

function hoursPlan(scheduleId: string) {
  return { entry: 'h', steps: { h: { type: 'hours', scheduleId, open: 'bye', closed: 'bye' }, bye: hangup } };
}

function aiPlan(agentId: string, provider: string) {
  return {
    entry: 'ai',
    steps: { ai: { type: 'ai_answer', provider, agentId, onCap: 'bye', next: 'bye' }, bye: hangup },
  };
}

const hangupPlan = { entry: 'bye', steps: { bye: hangup } };

async function createPlan(t: ExecutionContext, who: Tenant, name: string, definition: unknown, publish = false) {
  const answer = await call(who, 'POST', '/routing-plans', { name, definition, ...(publish ? { publish } : {}) });
  t.is(answer.status, 201, answer.text);
  t.deepEqual(answer.body.definition, definition);
  return answer.body.id as string;
}

async function archivePlan(t: ExecutionContext, who: Tenant, planId: string) {
  const answer = await call(who, 'DELETE', `/routing-plans/${planId}`);
  t.is(answer.status, 200, answer.text);
}

/** 409 `in_use` naming the plan (its name and id). */
function isInUse(t: ExecutionContext, answer: Answer, planId: string, planName: string, label = '') {
  isError(t, answer, 409, 'in_use', label);
  const message = String(answer.body?.error?.message);
  t.true(message.includes(planName), `${label} names the plan: ${message}`);
  t.true(message.includes(planId), `${label} gives the plan id: ${message}`);
  t.deepEqual(answer.body?.error?.routingPlanIds, [planId], label);
}

interface ResourceRow {
  namespace: string;
  generation: string;
  labels: Record<string, string>;
  spec: Record<string, unknown>;
  deleted: boolean;
  deletion_timestamp: Date | null;
}

async function queueResource(queueId: string): Promise<ResourceRow | undefined> {
  const result = await service.pool.query<ResourceRow>(
    `SELECT namespace, generation::text, labels, spec, deleted, deletion_timestamp FROM resources
      WHERE kind = 'Queue' AND name = $1`,
    [queueId],
  );
  if (result.rows.length > 1) throw new Error(`${result.rows.length} Queue resources named ${queueId}`);
  return result.rows[0];
}

// ---------------------------------------------------------------------------------------------------------------
// Queues

test('a queue is created with defaults, or with strategy, wrap-up time and members of the workspace', async (t) => {
  const owner = await tenant();
  const before = Date.now();
  const plain = await call(owner, 'POST', '/queues', { name: 'Support' });
  t.is(plain.status, 201, plain.text);
  t.regex(plain.body.id, uuidRegex);
  t.like(plain.body, {
    workspaceId: owner.workspaceId,
    name: 'Support',
    strategy: 'longest_idle',
    wrapUpSecs: 0,
    members: [],
  });
  t.regex(plain.body.createdAt, isoRegex);
  t.is(plain.body.updatedAt, plain.body.createdAt);
  t.true(Date.parse(plain.body.createdAt) >= before - 1000);
  t.deepEqual(Object.keys(plain.body).sort(), [
    'createdAt',
    'id',
    'members',
    'name',
    'strategy',
    'updatedAt',
    'workspaceId',
    'wrapUpSecs',
  ]);

  const [ann, bob] = await Promise.all([member(owner), member(owner)]);
  const full = await call(owner, 'POST', '/queues', {
    name: 'Sales',
    strategy: 'round_robin',
    wrapUpSecs: 3600,
    members: [bob.id, ann.id],
  });
  t.is(full.status, 201, full.text);
  t.like(full.body, { name: 'Sales', strategy: 'round_robin', wrapUpSecs: 3600, members: [bob.id, ann.id] });

  for (const strategy of ['ring_all', 'fewest_calls']) {
    const answer = await call(owner, 'POST', '/queues', { name: strategy, strategy, wrapUpSecs: 0 });
    t.is(answer.status, 201, answer.text);
    t.is(answer.body.strategy, strategy);
  }

  const read = await call(owner, 'GET', `/queues/${full.body.id}`);
  t.is(read.status, 200, read.text);
  t.deepEqual(read.body, full.body);
});

test('a retried queue creation (same idempotency key) answers the first queue and makes no second one', async (t) => {
  const owner = await tenant();
  const key = randomUUID();
  const first = await call(owner, 'POST', '/queues', { name: 'Once' }, { idempotencyKey: key });
  t.is(first.status, 201, first.text);
  const again = await call(owner, 'POST', '/queues', { name: 'Once' }, { idempotencyKey: key });
  t.is(again.status, 201, again.text);
  t.is(again.headers.get('idempotent-replayed'), 'true');
  t.deepEqual(again.body, first.body);
  const list = await call(owner, 'GET', '/queues');
  t.deepEqual(
    list.body.data.map((queue: { id: string }) => queue.id),
    [first.body.id],
  );
});

test('queue members must be members of the workspace', async (t) => {
  const owner = await tenant();
  const other = await secondWorkspace(owner);
  const [mine, theirs] = await Promise.all([member(owner), member(other)]);

  const foreign = await call(owner, 'POST', '/queues', { name: 'Q', members: [mine.id, theirs.id] });
  isInvalid(t, foreign, /members/, 'member of another workspace');
  t.true(foreign.body.error.message.includes(theirs.id), foreign.text);
  t.false(foreign.body.error.message.includes(mine.id), foreign.text);

  const unknown = randomUUID();
  const made = await call(owner, 'POST', '/queues', { name: 'Q', members: [unknown] });
  isInvalid(t, made, /members/, 'random uuid');
  t.true(made.body.error.message.includes(unknown), made.text);

  isInvalid(t, await call(owner, 'POST', '/queues', { name: 'Q', members: ['alice'] }), /members\[0\]/, 'not a uuid');
  isInvalid(
    t,
    await call(owner, 'POST', '/queues', { name: 'Q', members: [mine.id, mine.id] }),
    /members/,
    'listed twice',
  );

  // Nothing was created by the refused requests.
  const list = await call(owner, 'GET', '/queues');
  t.is(list.status, 200, list.text);
  t.deepEqual(list.body.data, []);

  // PATCH checks the members the same way and leaves the queue as it was.
  const queue = await createQueue(owner, { name: 'Q', members: [mine.id] });
  isInvalid(t, await call(owner, 'PATCH', `/queues/${queue.id}`, { members: [theirs.id] }), /members/, 'PATCH');
  const read = await call(owner, 'GET', `/queues/${queue.id}`);
  t.deepEqual(read.body.members, [mine.id]);

  // Ids are UUIDs, whatever the case of their hex digits (a member id in capitals is the same member).
  const [ann, bob] = await Promise.all([member(owner), member(owner)]);
  const upper = await call(owner, 'POST', '/queues', { name: 'Upper', members: [ann.id.toUpperCase()] });
  t.is(upper.status, 201, upper.text);
  t.deepEqual(upper.body.members, [ann.id]);
  const patched = await call(owner, 'PATCH', `/queues/${queue.id}`, { members: [bob.id.toUpperCase(), mine.id] });
  t.is(patched.status, 200, patched.text);
  t.deepEqual(patched.body.members, [bob.id, mine.id]);
  t.deepEqual((await queueResource(queue.id))?.spec.members, [bob.id, mine.id]);
  isInvalid(
    t,
    await call(owner, 'POST', '/queues', { name: 'Twice', members: [ann.id, ann.id.toUpperCase()] }),
    /members/,
    'listed twice in two cases',
  );
  isInvalid(
    t,
    await call(owner, 'PATCH', `/queues/${queue.id}`, { members: [ann.id.toUpperCase(), ann.id] }),
    /members/,
    'PATCH listing one twice in two cases',
  );
  t.deepEqual((await call(owner, 'GET', `/queues/${queue.id}`)).body.members, [bob.id, mine.id]);
});

test('queue fields are checked: strategy, wrap-up time 0 to 3600, name, unknown fields', async (t) => {
  const owner = await tenant();
  isInvalid(t, await call(owner, 'POST', '/queues', { name: 'Q', strategy: 'random' }), /strategy/, 'strategy');
  for (const wrapUpSecs of [-1, 3601, 1.5, '30']) {
    isInvalid(
      t,
      await call(owner, 'POST', '/queues', { name: 'Q', wrapUpSecs }),
      /wrapUpSecs/,
      `wrapUpSecs ${wrapUpSecs}`,
    );
  }
  isInvalid(t, await call(owner, 'POST', '/queues', {}), /name/, 'no name');
  isInvalid(t, await call(owner, 'POST', '/queues', { name: '' }), /name/, 'empty name');
  isInvalid(t, await call(owner, 'POST', '/queues', { name: 'Q', colour: 'blue' }), /colour/, 'unknown field');

  const queue = await createQueue(owner, { name: 'Q' });
  isInvalid(t, await call(owner, 'PATCH', `/queues/${queue.id}`, { strategy: 'random' }), /strategy/, 'PATCH');
  isInvalid(t, await call(owner, 'PATCH', `/queues/${queue.id}`, { wrapUpSecs: 3601 }), /wrapUpSecs/, 'PATCH');
  const list = await call(owner, 'GET', '/queues');
  t.deepEqual(list.body.data, [queue], 'only the valid queue exists, unchanged');
});

test('queues are listed newest first, a page at a time', async (t) => {
  const owner = await tenant();
  const made: string[] = [];
  for (const name of ['first', 'second', 'third']) made.push((await createQueue(owner, { name })).id);
  const newestFirst = [...made].reverse();

  const all = await call(owner, 'GET', '/queues');
  t.is(all.status, 200, all.text);
  t.deepEqual(
    all.body.data.map((queue: { id: string }) => queue.id),
    newestFirst,
  );
  t.is(all.body.nextCursor, null);

  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const query: string = cursor === null ? '?limit=1' : `?limit=1&cursor=${encodeURIComponent(cursor)}`;
    const page = await call(owner, 'GET', `/queues${query}`);
    t.is(page.status, 200, page.text);
    t.is(page.body.data.length, 1);
    seen.push(page.body.data[0].id);
    cursor = page.body.nextCursor;
    pages += 1;
    if (pages < 3) t.is(typeof cursor, 'string');
  } while (cursor !== null && pages < 5);
  t.is(pages, 3);
  t.deepEqual(seen, newestFirst);

  isInvalid(t, await call(owner, 'GET', '/queues?limit=0'), /limit/, 'limit 0');
  isError(t, await call(owner, 'GET', '/queues?cursor=nonsense'), 400, 'invalid_cursor');
});

test('PATCH changes only the fields it names; an empty PATCH is refused', async (t) => {
  const owner = await tenant();
  const ann = await member(owner);
  const queue = await createQueue(owner, { name: 'Support', strategy: 'ring_all', wrapUpSecs: 10, members: [ann.id] });

  const wrap = await call(owner, 'PATCH', `/queues/${queue.id}`, { wrapUpSecs: 45 });
  t.is(wrap.status, 200, wrap.text);
  t.deepEqual(
    { ...wrap.body, updatedAt: undefined },
    { ...queue, wrapUpSecs: 45, updatedAt: undefined },
    'only wrapUpSecs changed',
  );
  t.true(Date.parse(wrap.body.updatedAt) >= Date.parse(queue.updatedAt));
  t.is(wrap.body.createdAt, queue.createdAt);

  const renamed = await call(owner, 'PATCH', `/queues/${queue.id}`, { name: 'Help desk', strategy: 'fewest_calls' });
  t.is(renamed.status, 200, renamed.text);
  t.like(renamed.body, { name: 'Help desk', strategy: 'fewest_calls', wrapUpSecs: 45, members: [ann.id] });

  const emptied = await call(owner, 'PATCH', `/queues/${queue.id}`, { members: [] });
  t.is(emptied.status, 200, emptied.text);
  t.like(emptied.body, { name: 'Help desk', strategy: 'fewest_calls', wrapUpSecs: 45, members: [] });

  const zero = await call(owner, 'PATCH', `/queues/${queue.id}`, { wrapUpSecs: 0 });
  t.is(zero.status, 200, zero.text);
  t.is(zero.body.wrapUpSecs, 0);

  isInvalid(t, await call(owner, 'PATCH', `/queues/${queue.id}`, {}), /body/, 'empty PATCH');
  isError(t, await call(owner, 'PATCH', `/queues/${randomUUID()}`, { name: 'x' }), 404, 'not_found', 'unknown id');

  const read = await call(owner, 'GET', `/queues/${queue.id}`);
  t.deepEqual(read.body, zero.body);
});

test('another workspace cannot see, change or delete a queue', async (t) => {
  const owner = await tenant();
  const sibling = await secondWorkspace(owner);
  const stranger = await tenant();
  const queue = await createQueue(owner, { name: 'Private' });

  isError(t, await call(sibling, 'GET', `/queues/${queue.id}`), 404, 'not_found', 'GET');
  isError(t, await call(sibling, 'PATCH', `/queues/${queue.id}`, { name: 'Mine' }), 404, 'not_found', 'PATCH');
  isError(t, await call(sibling, 'DELETE', `/queues/${queue.id}`), 404, 'not_found', 'DELETE');
  const list = await call(sibling, 'GET', '/queues');
  t.is(list.status, 200, list.text);
  t.deepEqual(list.body.data, []);

  // Another application cannot even name the workspace.
  isError(t, await call({ ...stranger, workspaceId: owner.workspaceId }, 'GET', '/queues'), 403, 'workspace_forbidden');
  isError(t, await call(stranger, 'GET', `/queues/${queue.id}`), 404, 'not_found', 'other application');

  // A cursor of one workspace's list is not one of another's.
  await createQueue(owner, { name: 'Second' });
  const page = await call(owner, 'GET', '/queues?limit=1');
  t.is(typeof page.body.nextCursor, 'string');
  isError(
    t,
    await call(sibling, 'GET', `/queues?cursor=${encodeURIComponent(page.body.nextCursor)}`),
    400,
    'invalid_cursor',
  );

  const read = await call(owner, 'GET', `/queues/${queue.id}`);
  t.deepEqual(read.body, queue);
});

test('a queue is a Queue custom resource that follows PATCH and DELETE', async (t) => {
  const owner = await tenant();
  const ann = await member(owner);
  const queue = await createQueue(owner, { name: 'Support', members: [ann.id] });

  const resource = await queueResource(queue.id);
  t.truthy(resource, 'the resource exists');
  t.is(resource?.namespace, 'switchboard');
  t.is(resource?.generation, '1');
  t.false(resource?.deleted);
  t.deepEqual(resource?.labels, {
    'switchboard.dev/application': owner.applicationId,
    'switchboard.dev/workspace': owner.workspaceId,
  });
  t.deepEqual(resource?.spec, {
    id: queue.id,
    applicationId: owner.applicationId,
    workspaceId: owner.workspaceId,
    name: 'Support',
    strategy: 'longest_idle',
    wrapUpSecs: 0,
    members: [ann.id],
  });

  const patched = await call(owner, 'PATCH', `/queues/${queue.id}`, { strategy: 'round_robin', members: [] });
  t.is(patched.status, 200, patched.text);
  const changed = await queueResource(queue.id);
  t.is(changed?.generation, '2');
  t.like(changed?.spec, { name: 'Support', strategy: 'round_robin', wrapUpSecs: 0, members: [] });

  // A PATCH that changes nothing leaves the spec, and so the generation, as they were.
  const same = await call(owner, 'PATCH', `/queues/${queue.id}`, { strategy: 'round_robin' });
  t.is(same.status, 200, same.text);
  t.is((await queueResource(queue.id))?.generation, '2');

  const deleted = await call(owner, 'DELETE', `/queues/${queue.id}`);
  t.is(deleted.status, 200, deleted.text);
  t.like(deleted.body, { id: queue.id, name: 'Support', strategy: 'round_robin', members: [] });
  const gone = await queueResource(queue.id);
  t.true(gone?.deleted, 'the resource is marked deleted');
  t.not(gone?.deletion_timestamp, null);
  const row = await service.pool.query('SELECT 1 FROM queues WHERE id = $1', [queue.id]);
  t.is(row.rowCount, 0);
  isError(t, await call(owner, 'GET', `/queues/${queue.id}`), 404, 'not_found');
  isError(t, await call(owner, 'PATCH', `/queues/${queue.id}`, { name: 'Back' }), 404, 'not_found');
});

test('a queue a routing plan uses cannot be deleted until the plan is archived', async (t) => {
  const owner = await tenant();
  const queue = await createQueue(owner, { name: 'Support' });
  const planName = `Main line ${randomUUID().slice(0, 8)}`;
  const planId = await createPlan(t, owner, planName, queuePlan(queue.id));

  isInUse(t, await call(owner, 'DELETE', `/queues/${queue.id}`), planId, planName);
  const still = await call(owner, 'GET', `/queues/${queue.id}`);
  t.is(still.status, 200, still.text);
  t.deepEqual(still.body, queue);
  t.false((await queueResource(queue.id))?.deleted, 'the refused delete left the resource');

  // Changing the queue is fine while the plan uses it.
  const renamed = await call(owner, 'PATCH', `/queues/${queue.id}`, { name: 'Support (EU)' });
  t.is(renamed.status, 200, renamed.text);

  await archivePlan(t, owner, planId);
  const deleted = await call(owner, 'DELETE', `/queues/${queue.id}`);
  t.is(deleted.status, 200, deleted.text);
  t.like(deleted.body, { id: queue.id, name: 'Support (EU)' });
  isError(t, await call(owner, 'DELETE', `/queues/${queue.id}`), 404, 'not_found', 'deleted twice');
  isError(t, await call(owner, 'DELETE', `/queues/${randomUUID()}`), 404, 'not_found', 'unknown id');
  isInvalid(t, await call(owner, 'DELETE', '/queues/not-a-uuid'), /id/, 'not a uuid');
});

test("a queue is in use while a plan's newest or published version names it", async (t) => {
  const owner = await tenant();
  const [published, draft] = await Promise.all([
    createQueue(owner, { name: 'Published' }),
    createQueue(owner, { name: 'Draft' }),
  ]);
  const planName = 'Versions';
  const planId = await createPlan(t, owner, planName, queuePlan(published.id), true);

  // Version 2 (newest, not published) names the other queue: both are in use.
  const saved = await call(owner, 'PATCH', `/routing-plans/${planId}`, { definition: queuePlan(draft.id) });
  t.is(saved.status, 200, saved.text);
  t.like(saved.body, { newestVersion: 2, publishedVersion: 1 });
  isInUse(t, await call(owner, 'DELETE', `/queues/${published.id}`), planId, planName, 'published version');
  isInUse(t, await call(owner, 'DELETE', `/queues/${draft.id}`), planId, planName, 'newest version');

  // Version 3 uses neither; version 2 is published: only the draft queue is used now.
  const third = await call(owner, 'PATCH', `/routing-plans/${planId}`, { definition: hangupPlan });
  t.is(third.status, 200, third.text);
  isInUse(t, await call(owner, 'DELETE', `/queues/${published.id}`), planId, planName, 'still published');
  const publish = await call(owner, 'POST', `/routing-plans/${planId}/publish`, { version: 2 });
  t.is(publish.status, 200, publish.text);
  const freed = await call(owner, 'DELETE', `/queues/${published.id}`);
  t.is(freed.status, 200, freed.text);
  isInUse(t, await call(owner, 'DELETE', `/queues/${draft.id}`), planId, planName, 'published version 2');
});

// ---------------------------------------------------------------------------------------------------------------
// Schedules

const workdays = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday'];
const allDays = [...workdays, 'saturday', 'sunday'];

/** New York office hours, a Sunday night range 01:00-03:00 across both daylight-saving changes, two exceptions. */
const newYork = {
  name: 'New York office',
  timezone: 'America/New_York',
  weeklyHours: [
    ...workdays.map((day) => ({ day, open: '09:00', close: '17:00' })),
    { day: 'sunday', open: '01:00', close: '03:00' },
  ],
  exceptions: [
    { date: '2026-12-24', name: 'Christmas Eve', hours: [{ open: '09:00', close: '12:00' }] },
    { date: '2026-12-25', name: 'Christmas Day', hours: [] },
  ],
};

async function createSchedule(who: Tenant, body: Record<string, unknown> = newYork) {
  return created('schedule', await call(who, 'POST', '/schedules', body));
}

test('a schedule is created with its time zone, weekly hours and exceptions', async (t) => {
  const owner = await tenant();
  const before = Date.now();
  const answer = await call(owner, 'POST', '/schedules', newYork);
  const after = Date.now();
  t.is(answer.status, 201, answer.text);
  t.regex(answer.body.id, uuidRegex);
  t.like(answer.body, {
    workspaceId: owner.workspaceId,
    name: newYork.name,
    timezone: newYork.timezone,
    weeklyHours: newYork.weeklyHours,
    exceptions: newYork.exceptions,
  });
  t.is(typeof answer.body.openNow, 'boolean');
  t.true(answer.body.nextChangeAt === null || isoRegex.test(answer.body.nextChangeAt), answer.text);
  t.regex(answer.body.evaluatedAt, isoRegex);
  const evaluated = Date.parse(answer.body.evaluatedAt);
  t.true(evaluated >= before - 1000 && evaluated <= after + 1000, 'evaluated now');
  t.regex(answer.body.createdAt, isoRegex);

  const withoutExceptions = await call(owner, 'POST', '/schedules', {
    name: 'Plain',
    timezone: 'UTC',
    weeklyHours: [{ day: 'monday', open: '00:00', close: '24:00' }],
  });
  t.is(withoutExceptions.status, 201, withoutExceptions.text);
  t.deepEqual(withoutExceptions.body.exceptions, []);

  const leapDay = await call(owner, 'POST', '/schedules', {
    name: 'Leap',
    timezone: 'Europe/Paris',
    weeklyHours: [],
    exceptions: [{ date: '2028-02-29', hours: [] }],
  });
  t.is(leapDay.status, 201, leapDay.text);

  const list = await call(owner, 'GET', '/schedules');
  t.is(list.status, 200, list.text);
  t.deepEqual(
    list.body.data.map((schedule: { id: string }) => schedule.id),
    [leapDay.body.id, withoutExceptions.body.id, answer.body.id],
  );
  const page = await call(owner, 'GET', '/schedules?limit=2');
  t.is(page.body.data.length, 2);
  const rest = await call(owner, 'GET', `/schedules?limit=2&cursor=${encodeURIComponent(page.body.nextCursor)}`);
  t.deepEqual(
    rest.body.data.map((schedule: { id: string }) => schedule.id),
    [answer.body.id],
  );
  t.is(rest.body.nextCursor, null);
});

test('GET with at= says whether the schedule is open then and when that next changes, across daylight saving', async (t) => {
  const owner = await tenant();
  const schedule = await createSchedule(owner);
  // [at, open then, next change]
  const cases: [string, boolean, string | null][] = [
    // Tuesday 2026-01-13, winter (UTC-5).
    ['2026-01-13T13:59:59Z', false, '2026-01-13T14:00:00.000Z'],
    ['2026-01-13T09:00:00-05:00', true, '2026-01-13T22:00:00.000Z'],
    ['2026-01-13T21:59:59.999Z', true, '2026-01-13T22:00:00.000Z'],
    // Friday 17:00 closes until Sunday 01:00.
    ['2026-01-16T22:00:00Z', false, '2026-01-18T06:00:00.000Z'],
    // Tuesday 2026-07-14, summer (UTC-4).
    ['2026-07-14T13:00:00Z', true, '2026-07-14T21:00:00.000Z'],
    ['2026-07-14T21:30:00Z', false, '2026-07-15T13:00:00.000Z'],
    // Sunday 2026-03-08: 02:00 EST becomes 03:00 EDT, so 01:00-03:00 lasts one real hour.
    ['2026-03-08T05:59:59Z', false, '2026-03-08T06:00:00.000Z'],
    ['2026-03-08T06:30:00Z', true, '2026-03-08T07:00:00.000Z'],
    ['2026-03-08T07:00:00Z', false, '2026-03-09T13:00:00.000Z'],
    // Friday 2026-03-06 09:00 EST is 14:00Z; Monday 2026-03-09 09:00 EDT is 13:00Z.
    ['2026-03-06T13:30:00Z', false, '2026-03-06T14:00:00.000Z'],
    ['2026-03-09T13:30:00Z', true, '2026-03-09T21:00:00.000Z'],
    // Sunday 2026-11-01: 02:00 EDT becomes 01:00 EST, so 01:00-03:00 lasts three real hours.
    ['2026-11-01T04:59:59Z', false, '2026-11-01T05:00:00.000Z'],
    ['2026-11-01T05:00:00Z', true, '2026-11-01T08:00:00.000Z'],
    ['2026-11-01T06:30:00Z', true, '2026-11-01T08:00:00.000Z'],
    ['2026-11-01T08:00:00Z', false, '2026-11-02T14:00:00.000Z'],
    // Christmas Eve (Thursday) 09:00-12:00 only; Christmas Day (Friday) closed; Sunday 01:00 opens next.
    ['2026-12-24T16:00:00Z', true, '2026-12-24T17:00:00.000Z'],
    ['2026-12-24T18:00:00Z', false, '2026-12-27T06:00:00.000Z'],
    ['2026-12-25T15:00:00Z', false, '2026-12-27T06:00:00.000Z'],
  ];
  for (const [at, open, next] of cases) {
    const answer = await call(owner, 'GET', `/schedules/${schedule.id}?at=${encodeURIComponent(at)}`);
    t.is(answer.status, 200, answer.text);
    t.is(answer.body.openNow, open, `open at ${at}`);
    t.is(answer.body.nextChangeAt, next, `next change after ${at}`);
    t.is(answer.body.evaluatedAt, new Date(at).toISOString(), `evaluated at ${at}`);
    t.like(answer.body, { id: schedule.id, timezone: 'America/New_York', weeklyHours: newYork.weeklyHours });
  }

  const before = Date.now();
  const now = await call(owner, 'GET', `/schedules/${schedule.id}`);
  t.is(now.status, 200, now.text);
  const evaluated = Date.parse(now.body.evaluatedAt);
  t.true(evaluated >= before - 1000 && evaluated <= Date.now() + 1000, 'without at: evaluated now');

  isInvalid(t, await call(owner, 'GET', `/schedules/${schedule.id}?at=tomorrow`), /at/, 'at not an instant');
  // Instants the date-time format lets through but a Date cannot hold: a leap second, an offset without minutes.
  for (const at of ['2026-12-31T23:59:60Z', '2026-01-13T14:00:00+05']) {
    isInvalid(t, await call(owner, 'GET', `/schedules/${schedule.id}?at=${encodeURIComponent(at)}`), /at/, at);
  }
  isInvalid(t, await call(owner, 'GET', `/schedules/${schedule.id}?when=now`), /when/, 'unknown query field');
  isError(t, await call(owner, 'GET', `/schedules/${randomUUID()}`), 404, 'not_found');
  const other = await secondWorkspace(owner);
  isError(t, await call(other, 'GET', `/schedules/${schedule.id}`), 404, 'not_found', 'other workspace');
});

test('schedule problems are refused with 400 naming the field', async (t) => {
  const owner = await tenant();
  const base = { name: 'S', timezone: 'Europe/Paris', weeklyHours: [], exceptions: [] };
  const monday = (open: string, close: string) => [{ day: 'monday', open, close }];
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['unknown time zone', { timezone: 'Mars/Olympus_Mons' }, /timezone/],
    ['UTC offset', { timezone: '+01:00' }, /timezone/],
    ['no time zone', { timezone: undefined }, /timezone/],
    ['close 25:00', { weeklyHours: monday('09:00', '25:00') }, /weeklyHours\[0\]\.close/],
    [
      'open 25:00',
      { weeklyHours: [...monday('08:00', '09:00'), ...monday('25:00', '26:00')] },
      /weeklyHours\[1\]\.open/,
    ],
    ['open 24:00', { weeklyHours: monday('24:00', '02:00') }, /weeklyHours\[0\]\.open/],
    ['minute 60', { weeklyHours: monday('09:60', '10:00') }, /weeklyHours\[0\]\.open/],
    ['open equals close', { weeklyHours: monday('09:00', '09:00') }, /weeklyHours\[0\]\.close/],
    ['not a time', { weeklyHours: monday('9am', '17:00') }, /weeklyHours\[0\]\.open/],
    ['unknown weekday', { weeklyHours: [{ day: 'funday', open: '09:00', close: '17:00' }] }, /weeklyHours\[0\]\.day/],
    ['2026-02-30', { exceptions: [{ date: '2026-02-30', hours: [] }] }, /exceptions\[0\]\.date/],
    ['2027-02-29', { exceptions: [{ date: '2027-02-29', hours: [] }] }, /exceptions\[0\]\.date/],
    ['month 13', { exceptions: [{ date: '2026-13-01', hours: [] }] }, /exceptions\[0\]\.date/],
    ['not a date', { exceptions: [{ date: '25/12/2026', hours: [] }] }, /exceptions\[0\]\.date/],
    [
      'duplicated date',
      {
        exceptions: [
          { date: '2026-12-25', hours: [] },
          { date: '2026-12-26', hours: [] },
          { date: '2026-12-25', hours: [{ open: '10:00', close: '12:00' }] },
        ],
      },
      /exceptions\[2\]\.date/,
    ],
    [
      'exception hours',
      { exceptions: [{ date: '2026-12-25', hours: [{ open: '10:00', close: '24:01' }] }] },
      /exceptions\[0\]\.hours\[0\]\.close/,
    ],
  ];
  for (const [label, change, field] of cases) {
    const body: Record<string, unknown> = { ...base, ...change };
    if (body.timezone === undefined) delete body.timezone;
    isInvalid(t, await call(owner, 'POST', '/schedules', body), field, label);
  }
  const list = await call(owner, 'GET', '/schedules');
  t.deepEqual(list.body.data, [], 'no schedule was made');

  // PATCH is checked against the schedule it would make, and a refused PATCH changes nothing.
  const schedule = await createSchedule(owner);
  isInvalid(t, await call(owner, 'PATCH', `/schedules/${schedule.id}`, { timezone: 'Nowhere/Town' }), /timezone/);
  isInvalid(
    t,
    await call(owner, 'PATCH', `/schedules/${schedule.id}`, {
      exceptions: [...newYork.exceptions, { date: '2026-12-24', hours: [] }],
    }),
    /exceptions\[2\]\.date/,
  );
  isInvalid(
    t,
    await call(owner, 'PATCH', `/schedules/${schedule.id}`, { weeklyHours: monday('10:00', '25:00') }),
    /close/,
  );
  isInvalid(t, await call(owner, 'PATCH', `/schedules/${schedule.id}`, {}), /body/, 'empty PATCH');
  const read = await call(owner, 'GET', `/schedules/${schedule.id}`);
  t.like(read.body, {
    name: newYork.name,
    timezone: newYork.timezone,
    weeklyHours: newYork.weeklyHours,
    exceptions: newYork.exceptions,
    updatedAt: schedule.updatedAt,
  });
});

test('PATCH replacing the weekly hours changes whether the schedule is open', async (t) => {
  const owner = await tenant();
  const closed = await createSchedule(owner, { name: 'Never', timezone: 'UTC', weeklyHours: [] });
  t.false(closed.openNow);
  t.is(closed.nextChangeAt, null, 'never opens');

  const always = allDays.map((day) => ({ day, open: '00:00', close: '24:00' }));
  const opened = await call(owner, 'PATCH', `/schedules/${closed.id}`, { weeklyHours: always });
  t.is(opened.status, 200, opened.text);
  t.true(opened.body.openNow);
  t.is(opened.body.nextChangeAt, null, 'never closes');
  t.like(opened.body, { name: 'Never', timezone: 'UTC', weeklyHours: always, exceptions: [] });
  t.is(opened.body.createdAt, closed.createdAt);

  // Mondays 09:00-17:00 UTC only: 2026-01-12 is a Monday.
  const monday = await call(owner, 'PATCH', `/schedules/${closed.id}`, {
    name: 'Mondays',
    weeklyHours: [{ day: 'monday', open: '09:00', close: '17:00' }],
  });
  t.is(monday.status, 200, monday.text);
  const at = (iso: string) => call(owner, 'GET', `/schedules/${closed.id}?at=${encodeURIComponent(iso)}`);
  const mondayNoon = await at('2026-01-12T12:00:00Z');
  t.like(mondayNoon.body, { name: 'Mondays', openNow: true, nextChangeAt: '2026-01-12T17:00:00.000Z' });
  const tuesdayNoon = await at('2026-01-13T12:00:00Z');
  t.like(tuesdayNoon.body, { openNow: false, nextChangeAt: '2026-01-19T09:00:00.000Z' });

  // Changing the time zone alone moves the same wall-clock hours.
  const tokyo = await call(owner, 'PATCH', `/schedules/${closed.id}`, { timezone: 'Asia/Tokyo' });
  t.is(tokyo.status, 200, tokyo.text);
  t.deepEqual(tokyo.body.weeklyHours, [{ day: 'monday', open: '09:00', close: '17:00' }]);
  const tokyoMorning = await at('2026-01-12T01:00:00Z'); // 10:00 in Tokyo
  t.like(tokyoMorning.body, { openNow: true, nextChangeAt: '2026-01-12T08:00:00.000Z' });

  // An exception closing that Monday.
  const holiday = await call(owner, 'PATCH', `/schedules/${closed.id}`, {
    exceptions: [{ date: '2026-01-12', name: 'Coming of Age Day', hours: [] }],
  });
  t.is(holiday.status, 200, holiday.text);
  const holidayMorning = await at('2026-01-12T01:00:00Z');
  t.like(holidayMorning.body, { openNow: false, nextChangeAt: '2026-01-19T00:00:00.000Z' });

  isError(t, await call(owner, 'PATCH', `/schedules/${randomUUID()}`, { name: 'x' }), 404, 'not_found');
});

test('a schedule an hours step uses cannot be deleted until the plan is archived', async (t) => {
  const owner = await tenant();
  const schedule = await createSchedule(owner);
  const unused = await createSchedule(owner, { ...newYork, name: 'Unused' });
  const planName = 'After hours';
  const planId = await createPlan(t, owner, planName, hoursPlan(schedule.id));

  isInUse(t, await call(owner, 'DELETE', `/schedules/${schedule.id}`), planId, planName);
  const still = await call(owner, 'GET', `/schedules/${schedule.id}`);
  t.is(still.status, 200, still.text);

  const other = await secondWorkspace(owner);
  isError(t, await call(other, 'DELETE', `/schedules/${unused.id}`), 404, 'not_found', 'other workspace');
  const deletedUnused = await call(owner, 'DELETE', `/schedules/${unused.id}`);
  t.is(deletedUnused.status, 200, deletedUnused.text);
  t.like(deletedUnused.body, { id: unused.id, name: 'Unused', timezone: 'America/New_York' });

  await archivePlan(t, owner, planId);
  const deleted = await call(owner, 'DELETE', `/schedules/${schedule.id}`);
  t.is(deleted.status, 200, deleted.text);
  t.like(deleted.body, { id: schedule.id, name: newYork.name });
  isError(t, await call(owner, 'GET', `/schedules/${schedule.id}`), 404, 'not_found');
  isError(t, await call(owner, 'DELETE', `/schedules/${schedule.id}`), 404, 'not_found', 'deleted twice');
  const list = await call(owner, 'GET', '/schedules');
  t.deepEqual(list.body.data, []);
});

// ---------------------------------------------------------------------------------------------------------------
// AI agents

const connection = { url: 'wss://realtime.example.com/v1/voice', model: 'voice-large-2' };

function agentBody(apiKey = `sk-live-${randomUUID()}`) {
  return { name: 'Receptionist', provider: 'provider_a', connection, apiKey, minuteCap: 600 };
}

test('an AI agent is created; its API key is never shown, only hasApiKey', async (t) => {
  const owner = await tenant();
  const apiKey = `sk-live-${randomUUID()}`;
  const answer = await call(owner, 'POST', '/ai-agents', agentBody(apiKey));
  t.is(answer.status, 201, answer.text);
  t.regex(answer.body.id, uuidRegex);
  t.like(answer.body, {
    workspaceId: owner.workspaceId,
    name: 'Receptionist',
    provider: 'provider_a',
    connection,
    hasApiKey: true,
    minuteCap: 600,
    minutesUsed: 0,
  });
  t.false(answer.text.includes(apiKey), 'the create answer holds no API key');
  t.false('apiKey' in answer.body);

  const read = await call(owner, 'GET', `/ai-agents/${answer.body.id}`);
  t.is(read.status, 200, read.text);
  t.deepEqual(read.body, answer.body);
  t.false(read.text.includes(apiKey), 'GET holds no API key');
  const list = await call(owner, 'GET', '/ai-agents');
  t.is(list.status, 200, list.text);
  t.deepEqual(list.body.data, [answer.body]);
  t.false(list.text.includes(apiKey), 'the list holds no API key');
  t.false(
    service.logs.some((line) => line.includes(apiKey)),
    'no log line holds the API key',
  );

  // Stored sealed, and opened with the service's key.
  const row = await service.pool.query<{ api_key: string }>('SELECT api_key FROM ai_agents WHERE id = $1', [
    answer.body.id,
  ]);
  const stored = row.rows[0]?.api_key as string;
  t.false(stored.includes(apiKey), 'not stored in clear');
  const keys = await loadSigningKeys(service.pool, undefined);
  t.is(openSecret(keys.providerSecrets, stored), apiKey);

  const keyless = await call(owner, 'POST', '/ai-agents', {
    name: 'No key',
    provider: 'provider_b',
    connection: { url: 'https://api.example.com/realtime', instructions: 'Be brief.', voice: 'alloy' },
  });
  t.is(keyless.status, 201, keyless.text);
  t.like(keyless.body, { hasApiKey: false, minuteCap: null, minutesUsed: 0, provider: 'provider_b' });
});

test('AI agent fields are checked: https or wss url, known provider, minute cap', async (t) => {
  const owner = await tenant();
  const body = agentBody();
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['http url', { connection: { url: 'http://realtime.example.com/v1' } }, /connection\.url/],
    ['ws url', { connection: { url: 'ws://realtime.example.com/v1' } }, /connection\.url/],
    ['not a url', { connection: { url: 'wss://realtime example.com/v1' } }, /connection\.url/],
    ['unknown connection field', { connection: { ...connection, token: 'x' } }, /token/],
    ['unknown provider', { provider: 'provider_z' }, /provider/],
    ['minute cap 0', { minuteCap: 0 }, /minuteCap/],
    ['empty API key', { apiKey: '' }, /apiKey/],
    ['API key null on create', { apiKey: null }, /apiKey/],
  ];
  for (const [label, change, field] of cases) {
    isInvalid(t, await call(owner, 'POST', '/ai-agents', { ...body, ...change }), field, label);
  }
  const list = await call(owner, 'GET', '/ai-agents');
  t.deepEqual(list.body.data, [], 'no agent was made');
  t.false(list.text.includes(body.apiKey));

  const agent = await created('agent', await call(owner, 'POST', '/ai-agents', body));
  isInvalid(
    t,
    await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { connection: { url: 'http://x.example.com' } }),
    /connection\.url/,
  );
  isInvalid(t, await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { provider: 'provider_z' }), /provider/);
  isInvalid(t, await call(owner, 'PATCH', `/ai-agents/${agent.id}`, {}), /body/, 'empty PATCH');
  const read = await call(owner, 'GET', `/ai-agents/${agent.id}`);
  t.deepEqual(read.body, agent);
});

test('PATCH of an AI agent: the API key can be removed and set again; other fields keep their values', async (t) => {
  const owner = await tenant();
  const agent = await created('agent', await call(owner, 'POST', '/ai-agents', agentBody()));

  const renamed = await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { name: 'Front desk' });
  t.is(renamed.status, 200, renamed.text);
  t.like(renamed.body, { name: 'Front desk', hasApiKey: true, minuteCap: 600, connection, provider: 'provider_a' });

  const removed = await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { apiKey: null });
  t.is(removed.status, 200, removed.text);
  t.like(removed.body, { name: 'Front desk', hasApiKey: false, minuteCap: 600 });
  const stored = await service.pool.query('SELECT 1 FROM ai_agents WHERE id = $1 AND api_key IS NULL', [agent.id]);
  t.is(stored.rowCount, 1, 'the key is gone from the database');

  const newKey = `sk-new-${randomUUID()}`;
  const set = await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { apiKey: newKey, minuteCap: null });
  t.is(set.status, 200, set.text);
  t.like(set.body, { hasApiKey: true, minuteCap: null });
  t.false(set.text.includes(newKey));

  const moved = await call(owner, 'PATCH', `/ai-agents/${agent.id}`, {
    provider: 'provider_c',
    connection: { url: 'https://c.example.com/rt' },
  });
  t.is(moved.status, 200, moved.text);
  t.like(moved.body, { provider: 'provider_c', connection: { url: 'https://c.example.com/rt' }, hasApiKey: true });
  t.is(moved.body.createdAt, agent.createdAt);

  const read = await call(owner, 'GET', `/ai-agents/${agent.id}`);
  t.deepEqual(read.body, moved.body);
  isError(t, await call(owner, 'PATCH', `/ai-agents/${randomUUID()}`, { name: 'x' }), 404, 'not_found');
  const other = await secondWorkspace(owner);
  isError(t, await call(other, 'GET', `/ai-agents/${agent.id}`), 404, 'not_found', 'other workspace');
  isError(t, await call(other, 'PATCH', `/ai-agents/${agent.id}`, { apiKey: null }), 404, 'not_found');
});

test('an AI agent an ai_answer step uses cannot be deleted, nor its provider changed, until the plan is archived', async (t) => {
  const owner = await tenant();
  const apiKey = `sk-live-${randomUUID()}`;
  const agent = await created('agent', await call(owner, 'POST', '/ai-agents', agentBody(apiKey)));

  // The step's provider must be the agent's.
  const mismatch = await call(owner, 'POST', '/routing-plans', {
    name: 'Wrong',
    definition: aiPlan(agent.id, 'provider_b'),
  });
  isError(t, mismatch, 422, 'invalid_plan', 'provider mismatch');

  const planName = 'AI first';
  const planId = await createPlan(t, owner, planName, aiPlan(agent.id, 'provider_a'));
  isInUse(t, await call(owner, 'DELETE', `/ai-agents/${agent.id}`), planId, planName, 'DELETE');
  isInUse(
    t,
    await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { provider: 'provider_b' }),
    planId,
    planName,
    'PATCH',
  );
  isInUse(
    t,
    await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { provider: 'provider_c', name: 'Renamed too' }),
    planId,
    planName,
    'PATCH with a name',
  );
  const unchanged = await call(owner, 'GET', `/ai-agents/${agent.id}`);
  t.deepEqual(unchanged.body, agent, 'the refused changes changed nothing');

  // Other changes, and naming the same provider, are fine.
  const same = await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { provider: 'provider_a', name: 'Still A' });
  t.is(same.status, 200, same.text);
  t.like(same.body, { provider: 'provider_a', name: 'Still A' });

  await archivePlan(t, owner, planId);
  const moved = await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { provider: 'provider_b' });
  t.is(moved.status, 200, moved.text);
  t.is(moved.body.provider, 'provider_b');
  const deleted = await call(owner, 'DELETE', `/ai-agents/${agent.id}`);
  t.is(deleted.status, 200, deleted.text);
  t.like(deleted.body, { id: agent.id, provider: 'provider_b', hasApiKey: true });
  t.false(deleted.text.includes(apiKey), 'no key in the delete answer');
  isError(t, await call(owner, 'GET', `/ai-agents/${agent.id}`), 404, 'not_found');
  isError(t, await call(owner, 'DELETE', `/ai-agents/${agent.id}`), 404, 'not_found', 'deleted twice');
});

// ---------------------------------------------------------------------------------------------------------------
// Credentials

test('user tokens are refused; application keys and member tokens with routing:* are taken', async (t) => {
  const owner = await tenant();
  const queue = await createQueue(owner, { name: 'Q' });
  const schedule = await createSchedule(owner);
  const agent = await created('agent', await call(owner, 'POST', '/ai-agents', agentBody()));

  const session = await service.request('POST', '/api/v1/sessions', {
    auth: owner.apiKey,
    body: { externalWorkspaceId: owner.externalWorkspaceId, externalUserId: 'alice', scopes: ['routing:*'] },
  });
  t.is(session.status, 201, session.text);
  t.deepEqual(session.body.scopes, ['routing:*']);
  const userToken = session.body.token as string;

  const operations: [string, string, unknown][] = [];
  const cases: [string, string, Record<string, unknown>, Record<string, unknown>][] = [
    ['queues', queue.id, { name: 'By user' }, { name: 'By user' }],
    ['schedules', schedule.id, { ...newYork, name: 'By user' }, { name: 'By user' }],
    ['ai-agents', agent.id, { ...agentBody(), name: 'By user' }, { name: 'By user' }],
  ];
  for (const [collection, id, createBody, patchBody] of cases) {
    operations.push(
      ['POST', `/${collection}`, createBody],
      ['GET', `/${collection}`, undefined],
      ['GET', `/${collection}/${id}`, undefined],
      ['PATCH', `/${collection}/${id}`, patchBody],
      ['DELETE', `/${collection}/${id}`, undefined],
    );
  }
  t.is(operations.length, 15);
  for (const [method, path, body] of operations) {
    const answer = await service.request(method, `/api/v1${path}`, {
      auth: userToken,
      workspaceId: owner.workspaceId,
      ...(body === undefined ? {} : { body }),
    });
    isError(t, answer, 403, 'forbidden', `${method} ${path}`);
    t.regex(answer.body.error.message, /member token/, `${method} ${path}`);
  }

  // Nothing changed.
  t.deepEqual((await call(owner, 'GET', `/queues/${queue.id}`)).body, queue);
  t.like((await call(owner, 'GET', `/schedules/${schedule.id}`)).body, { name: newYork.name });
  t.deepEqual((await call(owner, 'GET', `/ai-agents/${agent.id}`)).body, agent);
  t.is((await call(owner, 'GET', '/queues')).body.data.length, 1);
  t.is((await call(owner, 'GET', '/schedules')).body.data.length, 1);
  t.is((await call(owner, 'GET', '/ai-agents')).body.data.length, 1);

  // A member token of the workspace is taken with routing:*, and refused without it.
  const keys = await loadSigningKeys(service.pool, undefined);
  const memberToken = async (scopes: Scope[]) => {
    const row = await member(owner, `member-${randomUUID()}@example.com`, scopes);
    const claims = {
      kind: 'member' as const,
      applicationId: owner.applicationId,
      workspaceId: owner.workspaceId,
      externalWorkspaceId: owner.externalWorkspaceId,
      subjectId: row.id,
      externalUserId: null,
      scopes,
    };
    return (await mintToken(keys.tokens, claims)).token;
  };
  const routing = await memberToken(['routing:*']);
  const listed = await service.request('GET', '/api/v1/queues', { auth: routing });
  t.is(listed.status, 200, listed.text);
  t.deepEqual(listed.body.data, [queue]);
  const made = await service.request('POST', '/api/v1/queues', { auth: routing, body: { name: 'By member' } });
  t.is(made.status, 201, made.text);
  t.is(made.body.workspaceId, owner.workspaceId);

  const numbersOnly = await memberToken(['numbers:*']);
  isError(t, await service.request('GET', '/api/v1/schedules', { auth: numbersOnly }), 403, 'insufficient_scope');
  isError(t, await service.request('GET', '/api/v1/ai-agents'), 401, 'unauthorized', 'no credential');
});
