/**
 * Queues through HTTP: operations 34-38 (create, list, get, update, delete), the `Queue` custom resource the queue
 * operations write, the refusal to delete (409 `in_use`) a queue a routing plan's newest or published version names,
 * and the credentials the queue, schedule and AI agent operations take. Schedules are in schedules.test.ts, AI agents
 * in ai-agents.test.ts; the setup the three share is in test/helpers/routing-config.ts.
 *
 * One service running the API role only. Every test makes its own application and workspace, so tests run
 * concurrently without seeing each other's data.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { createMember } from '../../core/identity/members.ts';
import type { Scope } from '../../core/scopes.ts';
import { loadSigningKeys } from '../../core/service-secret.ts';
import { mintToken } from '../../api/tokens.ts';
import { isError, serviceForFile } from '../helpers/service.ts';
import {
  agentBody,
  created,
  hangup,
  isInUse,
  isInvalid,
  isoRegex,
  newYork,
  routingConfigHelpers,
  type Tenant,
  uuidRegex,
} from '../helpers/routing-config.ts';

const service = serviceForFile(test);
const { tenant, secondWorkspace, call, createPlan, archivePlan, createSchedule } = routingConfigHelpers(() => service);

// ---------------------------------------------------------------------------------------------------------------
// Helpers

function createQueue(who: Tenant, body: Record<string, unknown>) {
  return call(who, 'POST', '/queues', body).then((answer) => created('queue', answer));
}

async function member(who: Tenant, email = `agent-${randomUUID()}@example.com`, scopes: Scope[] = ['routing:*']) {
  return createMember(service.pool, { workspaceId: who.workspaceId, email, scopes });
}

function queuePlan(queueId: string) {
  return {
    entry: 'q',
    steps: { q: { type: 'queue', queueId, maxWaitSecs: 60, overflow: 'bye', offerCallback: false }, bye: hangup },
  };
}

const hangupPlan = { entry: 'bye', steps: { bye: hangup } };

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
    'announceExpectedWait',
    'announceIntervalSecs',
    'announcePosition',
    'createdAt',
    'holdPrompt',
    'id',
    'members',
    'name',
    'strategy',
    'updatedAt',
    'workspaceId',
    'wrapUpSecs',
  ]);
  t.like(plain.body, {
    holdPrompt: null,
    announcePosition: false,
    announceExpectedWait: false,
    announceIntervalSecs: 60,
  });

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
