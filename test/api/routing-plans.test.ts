/**
 * Routing plans through HTTP: operations 25-33 (validate, create, list, get, save versions, publish, assign, list
 * versions, archive), the workspace checks of the validator, the `RoutingPlan` custom resource written beside the
 * records, and the concurrency rules: concurrent saves get distinct versions; a publish racing the delete of a queue
 * it needs ends with one of them refused, never with a published plan pointing at a deleted queue.
 *
 * One service for the file (API role); every test makes its own application and workspace. The table of invalid
 * definitions and the property test of the graph rules are in plan-validation.test.ts (the validator as a function).
 */
import { randomInt } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import { createMember } from '../../core/identity/members.ts';
import { importNumbers } from '../../core/numbers/numbers.ts';
import {
  type Answer,
  workspaceWithUser,
  isError,
  serviceForFile,
  workspaceClient,
  type WorkspaceSetup,
} from '../helpers/service.ts';

const service = serviceForFile(test);

const client = (setup: WorkspaceSetup) => workspaceClient(service, setup);

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- answers are JSON checked by the tests themselves
async function created(t: ExecutionContext, answer: Promise<Answer>): Promise<{ id: string } & Record<string, any>> {
  const result = await answer;
  t.is(result.status, 201, result.text);
  return result.body;
}

const hangup = { type: 'hangup', message: null };

/** A workspace with a queue, a schedule, an AI agent and a member: what definitions refer to. */
async function workspaceWithResources(t: ExecutionContext) {
  const setup = await workspaceWithUser(service);
  const api = client(setup);
  const member = await createMember(service.pool, {
    workspaceId: setup.workspace.id,
    email: `agent-${randomInt(1e9)}@example.com`,
    scopes: ['calls:*'],
  });
  const queue = await created(t, api('POST', '/queues', { name: 'Support', members: [member.id] }));
  const schedule = await created(
    t,
    api('POST', '/schedules', {
      name: 'Office hours',
      timezone: 'Europe/Paris',
      weeklyHours: [{ day: 'monday', open: '09:00', close: '17:00' }],
    }),
  );
  const agent = await created(
    t,
    api('POST', '/ai-agents', {
      name: 'Receptionist',
      provider: 'provider_b',
      connection: { url: 'wss://ai.example.com/realtime' },
    }),
  );
  return { setup, api, member, queue, schedule, agent };
}

function fullDefinition(ids: {
  queueId: string;
  scheduleId: string;
  agentId: string;
  memberId: string;
  userId: string;
}) {
  return {
    entry: 'hours',
    steps: {
      hours: { type: 'hours', scheduleId: ids.scheduleId, open: 'menu', closed: 'voicemail' },
      menu: {
        type: 'menu',
        prompt: { tts: 'Press 1 for sales, 2 for support, 3 for our assistant.' },
        options: { '1': 'ring', '2': 'queue', '3': 'ai', '#': 'split' },
        noInput: 'voicemail',
        timeoutSecs: 5,
        maxRetries: 2,
      },
      ring: {
        type: 'ring',
        targets: [{ memberId: ids.memberId }, { userId: ids.userId, mode: 'silent' }, { cell: '+14155550123' }],
        strategy: 'simultaneous',
        timeoutSecs: 20,
        next: 'voicemail',
      },
      queue: { type: 'queue', queueId: ids.queueId, maxWaitSecs: 300, overflow: 'voicemail', offerCallback: true },
      ai: { type: 'ai_answer', provider: 'provider_b', agentId: ids.agentId, onCap: 'forward', next: 'voicemail' },
      forward: { type: 'forward', to: '+14155550199', timeoutSecs: 30, next: 'voicemail' },
      split: { type: 'split', percentToA: 30, a: 'bye', b: 'voicemail' },
      voicemail: { type: 'voicemail', greeting: null },
      bye: { type: 'hangup', message: 'Goodbye.' },
    },
    recording: { enabled: true, disclosure: true },
  };
}

async function numberIn(t: ExecutionContext, setup: WorkspaceSetup) {
  const e164 = `+1628${randomInt(1_000_000, 9_999_999)}`;
  await importNumbers(service.pool, 'acme', [e164], ['voice', 'sms']);
  return created(t, client(setup)('POST', '/numbers', { e164 }));
}

test('validate checks a definition against the workspace without saving anything', async (t) => {
  const { setup, api, member, queue, schedule, agent } = await workspaceWithResources(t);
  const ids = {
    queueId: queue.id,
    scheduleId: schedule.id,
    agentId: agent.id,
    memberId: member.id,
    userId: setup.user.id,
  };
  const valid = await api('POST', '/routing-plans/validate', { definition: fullDefinition(ids) });
  t.is(valid.status, 200, valid.text);
  t.deepEqual(valid.body, { valid: true, issues: [] });

  const other = await workspaceWithResources(t);
  const foreign = fullDefinition({
    queueId: other.queue.id,
    scheduleId: other.schedule.id,
    agentId: other.agent.id,
    memberId: other.member.id,
    userId: other.setup.user.id,
  });
  foreign.steps.forward.to = '+1911';
  foreign.steps.ai.provider = 'provider_a';
  const answer = await api('POST', '/routing-plans/validate', { definition: foreign });
  t.is(answer.status, 200, answer.text);
  t.false(answer.body.valid);
  const found = (answer.body.issues as { stepId: string; code: string }[]).map(
    (issue) => `${issue.stepId} ${issue.code}`,
  );
  for (const expected of [
    'hours unknown_schedule',
    'queue unknown_queue',
    'ai unknown_agent',
    'ring unknown_member',
    'ring unknown_user',
    'forward emergency_number',
  ]) {
    t.true(found.includes(expected), `${expected} in ${found.join(', ')}`);
  }

  // The workspace's destination policy decides where forwards and cells may go.
  const policy = await service.request('PATCH', `/api/v1/workspaces/${setup.workspace.id}`, {
    auth: setup.apiKey,
    body: { destinationPolicy: { allowedPrefixes: ['+1'], blockedPrefixes: ['+1415555'] } },
  });
  t.is(policy.status, 200, policy.text);
  const blocked = await api('POST', '/routing-plans/validate', { definition: fullDefinition(ids) });
  t.deepEqual(
    (blocked.body.issues as { stepId: string; code: string }[]).map((issue) => `${issue.stepId} ${issue.code}`).sort(),
    ['forward destination_blocked', 'ring destination_blocked'],
  );

  const structural = await api('POST', '/routing-plans/validate', { definition: 'not a plan' });
  t.is(structural.status, 200, structural.text);
  t.false(structural.body.valid);
  t.is(structural.body.issues[0].code, 'invalid_definition');
  isError(t, await api('POST', '/routing-plans/validate', {}), 400, 'invalid_request', 'no definition');

  const plans = await api('GET', '/routing-plans');
  t.deepEqual(plans.body.data, [], 'validate saved nothing');
});

test('create makes a draft or a published first version; PATCH saves immutable versions; versions list newest first', async (t) => {
  const { setup, api, queue } = await workspaceWithResources(t);
  const first = {
    entry: 'q',
    steps: {
      q: { type: 'queue', queueId: queue.id, maxWaitSecs: 60, overflow: 'bye', offerCallback: false },
      bye: hangup,
    },
  };
  const draft = await created(t, api('POST', '/routing-plans', { name: 'Main line', definition: first }));
  t.like(draft, {
    name: 'Main line',
    state: 'draft',
    newestVersion: 1,
    publishedVersion: null,
    publishedAt: null,
    assignments: [],
  });
  t.deepEqual(draft.definition, first);

  const published = await created(
    t,
    api('POST', '/routing-plans', {
      name: 'After hours',
      definition: { entry: 'bye', steps: { bye: hangup } },
      publish: true,
    }),
  );
  t.like(published, { state: 'published', newestVersion: 1, publishedVersion: 1 });
  t.truthy(published.publishedAt);

  const second = { entry: 'vm', steps: { vm: { type: 'voicemail', greeting: { tts: 'Leave a message.' } } } };
  const saved = await api('PATCH', `/routing-plans/${draft.id}`, { definition: second, name: 'Main line v2' });
  t.is(saved.status, 200, saved.text);
  t.like(saved.body, { name: 'Main line v2', newestVersion: 2, publishedVersion: null });
  t.deepEqual(saved.body.definition, second);
  const renamed = await api('PATCH', `/routing-plans/${draft.id}`, { name: 'Main' });
  t.like(renamed.body, { name: 'Main', newestVersion: 2 }, 'a rename saves no version');

  const versions = await api('GET', `/routing-plans/${draft.id}/versions`);
  t.is(versions.status, 200, versions.text);
  t.deepEqual(
    versions.body.data.map((v: { version: number; state: string }) => [v.version, v.state]),
    [
      [2, 'draft'],
      [1, 'draft'],
    ],
  );
  t.deepEqual(versions.body.data[1].definition, first, 'version 1 is unchanged');
  const page = await api('GET', `/routing-plans/${draft.id}/versions?limit=1`);
  t.deepEqual(
    page.body.data.map((v: { version: number }) => v.version),
    [2],
  );
  const rest = await api(
    'GET',
    `/routing-plans/${draft.id}/versions?limit=1&cursor=${encodeURIComponent(page.body.nextCursor)}`,
  );
  t.deepEqual(
    rest.body.data.map((v: { version: number }) => v.version),
    [1],
  );
  t.is(rest.body.nextCursor, null);
  isError(
    t,
    await api('GET', `/routing-plans/${published.id}/versions?cursor=${encodeURIComponent(page.body.nextCursor)}`),
    400,
    'invalid_cursor',
    'cursor of another plan',
  );

  // Publish an older version by number, then the newest by default.
  const publishOld = await api('POST', `/routing-plans/${draft.id}/publish`, { version: 1 });
  t.is(publishOld.status, 200, publishOld.text);
  t.like(publishOld.body, { state: 'published', publishedVersion: 1, newestVersion: 2 });
  const listed = await api('GET', `/routing-plans/${draft.id}/versions`);
  t.deepEqual(
    listed.body.data.map((v: { version: number; state: string }) => [v.version, v.state]),
    [
      [2, 'draft'],
      [1, 'published'],
    ],
  );
  const publishNewest = await service.request('POST', `/api/v1/routing-plans/${draft.id}/publish`, {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
  });
  t.is(publishNewest.status, 200, publishNewest.text);
  t.like(publishNewest.body, { publishedVersion: 2 });
  isError(t, await api('POST', `/routing-plans/${draft.id}/publish`, { version: 9 }), 404, 'not_found', 'no version 9');

  const list = await api('GET', '/routing-plans');
  t.deepEqual(
    list.body.data.map((plan: { id: string }) => plan.id),
    [published.id, draft.id],
  );
  const get = await api('GET', `/routing-plans/${draft.id}`);
  t.like(get.body, { id: draft.id, name: 'Main', newestVersion: 2, publishedVersion: 2, state: 'published' });
});

test('save and publish of an invalid definition are 422 invalid_plan with the issues; nothing changes', async (t) => {
  const { setup, api } = await workspaceWithResources(t);
  const looping = {
    entry: 'a',
    steps: {
      a: { type: 'split', percentToA: 50, a: 'b', b: 'bye' },
      b: { type: 'split', percentToA: 50, a: 'a', b: 'bye' },
      bye: hangup,
    },
  };
  const refused = await api('POST', '/routing-plans', { name: 'Loop', definition: looping });
  isError(t, refused, 422, 'invalid_plan');
  t.true(
    (refused.body.error.issues as { code: string }[]).some((issue) => issue.code === 'cycle'),
    refused.text,
  );
  t.deepEqual((await api('GET', '/routing-plans')).body.data, [], 'nothing saved');

  const plan = await created(
    t,
    api('POST', '/routing-plans', {
      name: 'Forward',
      definition: {
        entry: 'f',
        steps: { f: { type: 'forward', to: '+33612345678', timeoutSecs: 20, next: 'bye' }, bye: hangup },
      },
    }),
  );
  const badSave = await api('PATCH', `/routing-plans/${plan.id}`, {
    definition: { entry: 'missing', steps: { bye: hangup } },
  });
  isError(t, badSave, 422, 'invalid_plan');
  t.deepEqual(
    badSave.body.error.issues.map((issue: { stepId: string | null; code: string }) => [issue.stepId, issue.code]),
    [[null, 'unknown_entry']],
  );
  t.like((await api('GET', `/routing-plans/${plan.id}`)).body, { newestVersion: 1 });

  // The workspace changed since the save: publish re-checks and refuses.
  await service.request('PATCH', `/api/v1/workspaces/${setup.workspace.id}`, {
    auth: setup.apiKey,
    body: { destinationPolicy: { allowedPrefixes: ['+1'], blockedPrefixes: [] } },
  });
  const badPublish = await api('POST', `/routing-plans/${plan.id}/publish`, {});
  isError(t, badPublish, 422, 'invalid_plan');
  t.deepEqual(
    badPublish.body.error.issues.map((issue: { stepId: string; code: string }) => [issue.stepId, issue.code]),
    [['f', 'destination_blocked']],
  );
  t.like((await api('GET', `/routing-plans/${plan.id}`)).body, { publishedVersion: null, state: 'draft' });
});

test('assign needs a published version and a number on the voice lane; it emits number.updated', async (t) => {
  const { setup, api } = await workspaceWithResources(t);
  const plan = await created(
    t,
    api('POST', '/routing-plans', { name: 'Main', definition: { entry: 'bye', steps: { bye: hangup } } }),
  );
  const number = await numberIn(t, setup);
  isError(t, await api('POST', `/routing-plans/${plan.id}/assign`, { phoneNumberId: number.id }), 409, 'not_published');
  await api('POST', `/routing-plans/${plan.id}/publish`, {});

  await api('PATCH', `/numbers/${number.id}`, { voiceLane: 'off' });
  const offLane = await api('POST', `/routing-plans/${plan.id}/assign`, { phoneNumberId: number.id });
  isError(t, offLane, 409, 'voice_lane_off');
  t.regex(offLane.body.error.message, /voice lane/);
  await api('PATCH', `/numbers/${number.id}`, { voiceLane: 'service' });

  const other = await workspaceWithUser(service);
  const foreignNumber = await numberIn(t, other);
  isError(
    t,
    await api('POST', `/routing-plans/${plan.id}/assign`, { phoneNumberId: foreignNumber.id }),
    404,
    'not_found',
    'number of another workspace',
  );

  const assigned = await api('POST', `/routing-plans/${plan.id}/assign`, { phoneNumberId: number.id });
  t.is(assigned.status, 200, assigned.text);
  t.like(assigned.body, { routingPlanId: plan.id, phoneNumberId: number.id, e164: number.e164 });
  t.like((await api('GET', `/numbers/${number.id}`)).body, { routingPlanId: plan.id });
  t.deepEqual(
    (await api('GET', `/routing-plans/${plan.id}`)).body.assignments.map(
      (a: { phoneNumberId: string }) => a.phoneNumberId,
    ),
    [number.id],
  );

  // The log serves what committed below the oldest running transaction: wait for the fourth event to show.
  let changes: (string | null)[][] = [];
  for (const deadline = Date.now() + 10_000; changes.length < 4 && Date.now() < deadline;) {
    const log = await service.request('GET', '/api/v1/events?type=number.updated&limit=500', { auth: setup.apiKey });
    changes = (log.body.data as { number: { id: string; changes: string[]; routingPlanId: string | null } }[])
      .filter((event) => event.number.id === number.id)
      .map((event) => [event.number.changes.join(','), event.number.routingPlanId]);
    if (changes.length < 4) await new Promise((resolve) => setTimeout(resolve, 20));
  }
  t.deepEqual(changes, [
    ['claimed', null],
    ['voiceLane', null],
    ['voiceLane', null],
    ['routingPlanId', plan.id],
  ]);

  // While assigned: the plan cannot be archived, the number cannot be released nor lose its voice lane.
  isError(t, await api('DELETE', `/routing-plans/${plan.id}`), 409, 'in_use', 'archive');
  isError(t, await api('DELETE', `/numbers/${number.id}`), 409, 'in_use', 'release');
  isError(t, await api('PATCH', `/numbers/${number.id}`, { voiceLane: 'off' }), 409, 'in_use', 'voice off');

  const unassigned = await api('PATCH', `/numbers/${number.id}`, { routingPlanId: null });
  t.like(unassigned.body, { routingPlanId: null, assignedAt: null });
  const archived = await api('DELETE', `/routing-plans/${plan.id}`);
  t.is(archived.status, 200, archived.text);
  isError(t, await api('GET', `/routing-plans/${plan.id}`), 404, 'not_found', 'archived');
  t.deepEqual((await api('GET', '/routing-plans')).body.data, []);
  isError(t, await api('POST', `/routing-plans/${plan.id}/publish`, {}), 404, 'not_found', 'publish archived');
});

test('the plan is a RoutingPlan custom resource with status conditions, following saves and archive', async (t) => {
  const { api } = await workspaceWithResources(t);
  const plan = await created(
    t,
    api('POST', '/routing-plans', { name: 'Main', definition: { entry: 'bye', steps: { bye: hangup } } }),
  );
  const resource = async () => {
    const result = await service.pool.query(
      `SELECT generation, spec, status, labels, deleted FROM resources
        WHERE kind = 'RoutingPlan' AND namespace = 'switchboard' AND name = $1`,
      [plan.id],
    );
    return result.rows[0];
  };
  const first = await resource();
  t.like(first, { generation: '1', deleted: false });
  t.like(first.spec, { id: plan.id, name: 'Main', publishedVersion: null, definition: { entry: 'bye' } });
  t.like(first.status, { observedGeneration: 1, newestVersion: 1, publishedVersion: null });
  t.deepEqual(
    first.status.conditions.map((c: { type: string; status: string }) => [c.type, c.status]),
    [
      ['Valid', 'True'],
      ['Published', 'False'],
      ['Ready', 'True'],
    ],
  );
  await api('PATCH', `/routing-plans/${plan.id}`, {
    definition: { entry: 'vm', steps: { vm: { type: 'voicemail', greeting: null } } },
  });
  await api('POST', `/routing-plans/${plan.id}/publish`, {});
  const second = await resource();
  t.is(second.generation, '3', 'a new definition and a publish each change the spec');
  t.like(second.status, { observedGeneration: 3, newestVersion: 2, publishedVersion: 2 });
  t.deepEqual(
    second.status.conditions.map((c: { type: string; status: string }) => [c.type, c.status]),
    [
      ['Valid', 'True'],
      ['Published', 'True'],
      ['Ready', 'True'],
    ],
  );
  await api('DELETE', `/routing-plans/${plan.id}`);
  t.like(await resource(), { deleted: true });
});

test('deleting a queue, schedule or AI agent a plan uses is 409 in_use, until the plan stops using it', async (t) => {
  const { setup, api, queue, schedule, agent, member } = await workspaceWithResources(t);
  const ids = {
    queueId: queue.id,
    scheduleId: schedule.id,
    agentId: agent.id,
    memberId: member.id,
    userId: setup.user.id,
  };
  const plan = await created(
    t,
    api('POST', '/routing-plans', { name: 'Everything', definition: fullDefinition(ids), publish: true }),
  );
  const refused = await api('DELETE', `/queues/${queue.id}`);
  isError(t, refused, 409, 'in_use', 'queue');
  t.regex(refused.body.error.message, /Everything/);
  isError(t, await api('DELETE', `/schedules/${schedule.id}`), 409, 'in_use', 'schedule');
  isError(t, await api('DELETE', `/ai-agents/${agent.id}`), 409, 'in_use', 'agent');

  // A new version without them: the published version still uses them.
  await api('PATCH', `/routing-plans/${plan.id}`, { definition: { entry: 'bye', steps: { bye: hangup } } });
  isError(t, await api('DELETE', `/queues/${queue.id}`), 409, 'in_use', 'published version uses it');
  await api('POST', `/routing-plans/${plan.id}/publish`, {});
  for (const path of [`/queues/${queue.id}`, `/schedules/${schedule.id}`, `/ai-agents/${agent.id}`]) {
    const deleted = await api('DELETE', path);
    t.is(deleted.status, 200, `${path} ${deleted.text}`);
  }
  // Version 1 names them still; publishing it again is refused now that they are gone.
  const republish = await api('POST', `/routing-plans/${plan.id}/publish`, { version: 1 });
  isError(t, republish, 422, 'invalid_plan');
  const codes = republish.body.error.issues.map((issue: { code: string }) => issue.code).sort();
  t.deepEqual(codes, ['unknown_agent', 'unknown_queue', 'unknown_schedule']);
});

test('concurrent saves of one plan make versions with distinct numbers', async (t) => {
  const { api } = await workspaceWithResources(t);
  const plan = await created(
    t,
    api('POST', '/routing-plans', { name: 'Busy', definition: { entry: 'bye', steps: { bye: hangup } } }),
  );
  const saves = await Promise.all(
    Array.from({ length: 6 }, (_, index) =>
      api('PATCH', `/routing-plans/${plan.id}`, {
        definition: { entry: 'bye', steps: { bye: { type: 'hangup', message: `save ${index}` } } },
      }),
    ),
  );
  for (const save of saves) t.is(save.status, 200, save.text);
  const versions = await api('GET', `/routing-plans/${plan.id}/versions`);
  t.deepEqual(
    versions.body.data.map((v: { version: number }) => v.version),
    [7, 6, 5, 4, 3, 2, 1],
  );
  const messages = versions.body.data
    .slice(0, 6)
    .map((v: { definition: { steps: { bye: { message: string } } } }) => v.definition.steps.bye.message)
    .sort();
  t.deepEqual(messages, ['save 0', 'save 1', 'save 2', 'save 3', 'save 4', 'save 5']);
});

test('publish racing the delete of its queue: one of them is refused, never a published plan without its queue', async (t) => {
  const { api } = await workspaceWithResources(t);
  const outcomes = new Set<string>();
  for (let round = 0; round < 8; round += 1) {
    const queue = await created(t, api('POST', '/queues', { name: `Race ${round}` }));
    // Version 1 uses the queue; version 2 (newest) does not and nothing is published, so the queue is free to go
    // until version 1 is published.
    const plan = await created(
      t,
      api('POST', '/routing-plans', {
        name: `Race ${round}`,
        definition: {
          entry: 'q',
          steps: {
            q: { type: 'queue', queueId: queue.id, maxWaitSecs: 60, overflow: 'bye', offerCallback: false },
            bye: hangup,
          },
        },
      }),
    );
    await api('PATCH', `/routing-plans/${plan.id}`, { definition: { entry: 'bye', steps: { bye: hangup } } });
    // Sent together, in alternating order.
    const publish = () => api('POST', `/routing-plans/${plan.id}/publish`, { version: 1 });
    const remove = () => api('DELETE', `/queues/${queue.id}`);
    const [published, deleted] =
      round % 2 === 0
        ? await Promise.all([publish(), remove()])
        : await Promise.all([remove(), publish()]).then(([d, p]) => [p, d] as const);
    const outcome = `${published.status}/${deleted.status}`;
    outcomes.add(outcome);
    t.true(['200/409', '422/200'].includes(outcome), `round ${round}: ${outcome} ${published.text} ${deleted.text}`);
    const state = await api('GET', `/routing-plans/${plan.id}`);
    const queueNow = await api('GET', `/queues/${queue.id}`);
    if (state.body.publishedVersion === 1) t.is(queueNow.status, 200, 'the published plan keeps its queue');
    else t.is(queueNow.status, 404);
  }
  t.log(`outcomes seen: ${[...outcomes].join(', ')}`);
});

test('a queue delete that waits for a publish holding the queue sees the publish and is refused', async (t) => {
  const { api } = await workspaceWithResources(t);
  const queue = await created(t, api('POST', '/queues', { name: 'Held' }));
  const plan = await created(
    t,
    api('POST', '/routing-plans', {
      name: 'Held',
      definition: {
        entry: 'q',
        steps: {
          q: { type: 'queue', queueId: queue.id, maxWaitSecs: 60, overflow: 'bye', offerCallback: false },
          bye: hangup,
        },
      },
    }),
  );
  await api('PATCH', `/routing-plans/${plan.id}`, { definition: { entry: 'bye', steps: { bye: hangup } } });
  // A publish of version 1 in progress, as the route does it: the queue share-locked, the plan being published.
  const publisher = await service.pool.connect();
  try {
    await publisher.query('BEGIN');
    await publisher.query('SELECT id FROM queues WHERE id = $1 FOR SHARE', [queue.id]);
    const deleting = api('DELETE', `/queues/${queue.id}`);
    // The delete is waiting for the lock (an observable state, no sleep).
    for (let tries = 0; ; tries += 1) {
      const waiting = await service.pool.query(
        `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FROM queues WHERE id = $1%FOR UPDATE%'`,
      );
      if (waiting.rowCount === 1) break;
      if (tries > 500) throw new Error('the delete never waited for the lock');
      await new Promise((resolve) => setImmediate(resolve));
    }
    await publisher.query('UPDATE routing_plans SET published_version = 1 WHERE id = $1', [plan.id]);
    await publisher.query('COMMIT');
    isError(t, await deleting, 409, 'in_use');
  } finally {
    publisher.release();
  }
  t.is((await api('GET', `/queues/${queue.id}`)).status, 200);
});

test('ids in a definition are UUIDs whatever their letter case', async (t) => {
  const { setup, api, member, queue, schedule, agent } = await workspaceWithResources(t);
  const upper = fullDefinition({
    queueId: queue.id.toUpperCase(),
    scheduleId: schedule.id.toUpperCase(),
    agentId: agent.id.toUpperCase(),
    memberId: member.id.toUpperCase(),
    userId: setup.user.id.toUpperCase(),
  });
  const answer = await api('POST', '/routing-plans/validate', { definition: upper });
  t.deepEqual(answer.body, { valid: true, issues: [] });
  const plan = await created(t, api('POST', '/routing-plans', { name: 'Upper', definition: upper }));
  isError(t, await api('DELETE', `/queues/${queue.id}`), 409, 'in_use', 'the saved version names the queue');
  t.deepEqual(plan.definition, upper, 'the definition is kept as written');
});
