/**
 * Operations 57 and 58 through HTTP (docs/contact-center.md, "Agents"): the workspace's members as agents, paged;
 * states set by an application key (any agent) and by a member token (its own only), each change one
 * `agent.state_changed` event with previousState, reason and actor; 404 for a member not in the workspace, 409
 * `agent_unreachable` without a live device, idempotent replays; a state set mid-offer or during wrap-up.
 *
 * One service for the file (API role only); every test makes its own application and workspace.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { agentOf } from '../../core/agents/agent-states.ts';
import { registerDevice } from '../../core/devices/devices.ts';
import { issueKey } from '../../core/identity/applications.ts';
import { answerEntry, enterQueue, entryById, queueCallsEnded } from '../../core/queues/entries.ts';
import { distribute } from '../../core/queues/distribution.ts';
import { createQueue } from '../../core/queues/queues.ts';
import { addAgent, agentEvents } from '../helpers/contact-center.ts';
import {
  type Answer,
  isError,
  liveCall,
  userToken,
  workspaceWithUser,
  serviceForFile,
  signingKeysForFile,
} from '../helpers/service.ts';

const service = serviceForFile(test);
const keys = signingKeysForFile(test, service);

const browser = { kind: 'browser' as const, name: null, clientId: null };

function list(auth: string, workspaceId?: string, query = ''): Promise<Answer> {
  return service.request('GET', `/api/v1/agents${query}`, { auth, ...(workspaceId ? { workspaceId } : {}) });
}

function put(
  auth: string,
  memberId: string,
  body: unknown,
  options: { workspaceId?: string; idempotencyKey?: string | null } = {},
): Promise<Answer> {
  return service.request('PUT', `/api/v1/agents/${memberId}/state`, { auth, body, ...options });
}

test('who may list agents and set states: keys and member tokens with calls:*, a member token for itself only', async (t) => {
  const setup = await workspaceWithUser(service);
  const ws = setup.workspace.id as string;
  const agent = await addAgent(service.pool, keys.tokens, setup);
  const colleague = await addAgent(service.pool, keys.tokens, setup);
  const noCalls = await addAgent(service.pool, keys.tokens, setup, { scopes: ['devices:*'] });
  const narrowKey = (
    await issueKey(service.pool, { applicationId: setup.applicationId, name: 'n', scopes: ['numbers:*'] })
  ).secret;
  const other = await workspaceWithUser(service);

  t.is((await list(setup.apiKey, ws)).status, 200);
  t.is((await list(agent.token)).status, 200, 'a member token: its own workspace');
  isError(t, await list(narrowKey, ws), 403, 'insufficient_scope', 'key without calls:*');
  isError(t, await list(noCalls.token), 403, 'insufficient_scope', 'member token without calls:*');
  isError(t, await list(await userToken(service, setup, ['calls:*'])), 403, 'forbidden', 'user token');
  isError(t, await list(other.apiKey, ws), 403, 'workspace_forbidden', "another application's key");
  isError(t, await list(agent.token, other.workspace.id), 403, 'workspace_forbidden', 'member token elsewhere');
  isError(t, await service.request('GET', '/api/v1/agents'), 401, 'unauthorized', 'no credential');

  const away = { state: 'away' };
  isError(t, await put(narrowKey, agent.id, away, { workspaceId: ws }), 403, 'insufficient_scope', 'PUT narrow key');
  isError(t, await put(noCalls.token, noCalls.id, away), 403, 'insufficient_scope', 'PUT member without calls:*');
  isError(t, await put(agent.token, colleague.id, away), 403, 'forbidden', "PUT a colleague's state");
  isError(t, await put(agent.token, agent.id, away, { idempotencyKey: null }), 400, 'idempotency_key_required');
  t.deepEqual(await agentEvents(service.pool, colleague.id), [], 'nothing written for the refused change');

  const own = await put(agent.token, agent.id.toUpperCase(), away);
  t.is(own.status, 200, own.text);
  t.like(own.body, { memberId: agent.id, state: 'away', actor: `member:${agent.id}` });
  const byKey = await put(setup.apiKey, colleague.id, { state: 'available' }, { workspaceId: ws });
  t.is(byKey.status, 200, byKey.text);
  t.like(byKey.body, { memberId: colleague.id, state: 'available', actor: 'application', reason: null });
});

test("the workspace's members as agents, paged newest first, with their state and devices", async (t) => {
  const setup = await workspaceWithUser(service);
  const ws = setup.workspace.id as string;
  const first = await addAgent(service.pool, keys.tokens, setup, { name: 'First' });
  const second = await addAgent(service.pool, keys.tokens, setup, { device: false });
  const third = await addAgent(service.pool, keys.tokens, setup);
  await addAgent(service.pool, keys.tokens, await workspaceWithUser(service));
  t.is((await put(setup.apiKey, first.id, { state: 'available' }, { workspaceId: ws })).status, 200);

  const page1 = await list(setup.apiKey, ws, '?limit=2');
  t.is(page1.status, 200, page1.text);
  t.deepEqual(
    page1.body.data.map((agent: { memberId: string }) => agent.memberId),
    [third.id, second.id],
  );
  t.is(typeof page1.body.nextCursor, 'string');
  const page2 = await list(setup.apiKey, ws, `?limit=2&cursor=${encodeURIComponent(page1.body.nextCursor)}`);
  t.is(page2.status, 200, page2.text);
  t.is(page2.body.nextCursor, null);
  t.is(page2.body.data.length, 1);
  const [agent] = page2.body.data;
  t.deepEqual(Object.keys(agent).sort(), [
    'actor',
    'callsAnswered',
    'changedAt',
    'email',
    'memberId',
    'missedOffers',
    'name',
    'reachable',
    'reason',
    'state',
    'wrapUpUntil',
  ]);
  t.like(agent, { memberId: first.id, email: first.email, name: 'First', state: 'available', reachable: true });
  t.like(page1.body.data[1], { state: 'offline', reachable: false, actor: null, changedAt: null, callsAnswered: 0 });
  isError(t, await list(setup.apiKey, ws, '?cursor=nonsense'), 400, 'invalid_cursor');
  isError(t, await list(setup.apiKey, ws, '?limit=0'), 400, 'invalid_request');
});

test('a state change is one agent.state_changed event; 404, 409 agent_unreachable and bad bodies change nothing', async (t) => {
  const setup = await workspaceWithUser(service);
  const ws = setup.workspace.id as string;
  const agent = await addAgent(service.pool, keys.tokens, setup);
  const phoneless = await addAgent(service.pool, keys.tokens, setup, { device: false });
  const elsewhere = await addAgent(service.pool, keys.tokens, await workspaceWithUser(service));

  t.is((await put(setup.apiKey, agent.id, { state: 'available' }, { workspaceId: ws })).status, 200);
  const lunch = await put(agent.token, agent.id, { state: 'away', reason: 'lunch' });
  t.is(lunch.status, 200, lunch.text);
  t.like(lunch.body, { state: 'away', reason: 'lunch', actor: `member:${agent.id}`, reachable: true });
  const again = await put(agent.token, agent.id, { state: 'away', reason: 'lunch' });
  t.is(again.status, 200, 'the same state again: answered, nothing written');
  t.is((await put(agent.token, agent.id, { state: 'offline', reason: null })).status, 200);
  t.deepEqual(await agentEvents(service.pool, agent.id), [
    'offline>available:application',
    `available>away:member:${agent.id}:lunch`,
    `away>offline:member:${agent.id}`,
  ]);
  // The log serves only what committed below the oldest running transaction: concurrent tests' transactions can
  // hold the event back for a moment, so it is read until it shows (or 10 s passed).
  let event: Record<string, unknown> | undefined;
  for (const deadline = Date.now() + 10_000; event === undefined && Date.now() < deadline;) {
    const log = await service.request('GET', '/api/v1/events?type=agent.state_changed', {
      auth: setup.apiKey,
      workspaceId: ws,
    });
    t.is(log.status, 200, log.text);
    [event] = log.body.data.filter(
      (item: { agent: { memberId: string; state: string } }) =>
        item.agent.memberId === agent.id && item.agent.state === 'away',
    );
    if (event === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
  }
  t.like(event, {
    type: 'agent.state_changed',
    externalUserId: agent.email,
    agent: { memberId: agent.id, state: 'away', previousState: 'available', reason: 'lunch' },
  });
  t.false(event !== undefined && 'callId' in event, 'agent events carry no callId');

  isError(t, await put(setup.apiKey, randomUUID(), { state: 'away' }, { workspaceId: ws }), 404, 'not_found');
  isError(t, await put(setup.apiKey, elsewhere.id, { state: 'away' }, { workspaceId: ws }), 404, 'not_found');
  const unreachable = await put(phoneless.token, phoneless.id, { state: 'available' });
  isError(t, unreachable, 409, 'agent_unreachable');
  t.deepEqual(Object.keys(unreachable.body), ['error']);
  t.is((await put(phoneless.token, phoneless.id, { state: 'away' })).status, 200, 'away needs no device');
  for (const [label, body] of [
    ['a system state', { state: 'on_call' }],
    ['no state', { reason: 'x' }],
    ['an empty reason', { state: 'away', reason: '' }],
    ['a reason of 201 characters', { state: 'away', reason: 'r'.repeat(201) }],
    ['an unknown field', { state: 'away', actor: 'system' }],
  ] as const) {
    isError(t, await put(agent.token, agent.id, body), 400, 'invalid_request', label);
  }
  t.is((await put(agent.token, agent.id, { state: 'away', reason: 'r'.repeat(200) })).status, 200);
  t.deepEqual(await agentEvents(service.pool, phoneless.id), [`offline>away:member:${phoneless.id}`]);
  t.is((await agentEvents(service.pool, agent.id)).length, 4);
});

test('an idempotent PUT replays its answer and writes one event; the same key with another body is refused', async (t) => {
  const setup = await workspaceWithUser(service);
  const agent = await addAgent(service.pool, keys.tokens, setup);
  const idempotencyKey = randomUUID();
  const first = await put(agent.token, agent.id, { state: 'available' }, { idempotencyKey });
  t.is(first.status, 200, first.text);
  t.is(first.headers.get('idempotent-replayed'), null);
  // Meanwhile the agent went away: the replay still answers what the first request did, and changes nothing.
  t.is((await put(agent.token, agent.id, { state: 'away', reason: 'break' })).status, 200);
  const replay = await put(agent.token, agent.id, { state: 'available' }, { idempotencyKey });
  t.is(replay.status, 200);
  t.is(replay.headers.get('idempotent-replayed'), 'true');
  t.deepEqual(replay.body, first.body);
  t.is((await agentOf(service.pool, setup.workspace.id, agent.id))?.state, 'away');
  isError(t, await put(agent.token, agent.id, { state: 'offline' }, { idempotencyKey }), 422, 'idempotency_key_reused');
  t.deepEqual(await agentEvents(service.pool, agent.id), [
    `offline>available:member:${agent.id}`,
    `available>away:member:${agent.id}:break`,
  ]);

  // A refusal is an answer too: replayed, even once the agent has a device.
  const phoneless = await addAgent(service.pool, keys.tokens, setup, { device: false });
  const refusedKey = randomUUID();
  isError(
    t,
    await put(phoneless.token, phoneless.id, { state: 'available' }, { idempotencyKey: refusedKey }),
    409,
    'agent_unreachable',
  );
  await registerDevice(service.pool, setup.workspace.id, { memberId: phoneless.id }, browser);
  const replayed = await put(phoneless.token, phoneless.id, { state: 'available' }, { idempotencyKey: refusedKey });
  isError(t, replayed, 409, 'agent_unreachable', 'replayed');
  t.is(replayed.headers.get('idempotent-replayed'), 'true');
  t.is(
    (await put(phoneless.token, phoneless.id, { state: 'available' })).status,
    200,
    'a new request: the device counts',
  );
});

test('set mid-offer, the caller goes back first in line; set during wrap-up, the wrap-up ends', async (t) => {
  const setup = await workspaceWithUser(service);
  const ws = setup.workspace.id as string;
  const agent = await addAgent(service.pool, keys.tokens, setup);
  const queue = await createQueue(service.pool, ws, {
    name: 'Support',
    strategy: 'longest_idle',
    wrapUpSecs: 300,
    memberIds: [agent.id],
  });
  t.is((await put(agent.token, agent.id, { state: 'available' })).status, 200);
  const call = await liveCall(service.pool, setup);
  const entry = await enterQueue(service.pool, { callId: call.id, queueId: queue.id, engineOwner: 'engine-test' });
  t.deepEqual((await distribute(service.pool, queue.id))?.memberIds, [agent.id]);

  const away = await put(setup.apiKey, agent.id, { state: 'away', reason: 'not now' }, { workspaceId: ws });
  t.is(away.status, 200, away.text);
  t.like(away.body, { state: 'away', missedOffers: 0 });
  t.is((await entryById(service.pool, entry?.id as string))?.state, 'waiting', 'back in line');
  t.is(await distribute(service.pool, queue.id), undefined, 'nobody to offer it to');

  t.is((await put(agent.token, agent.id, { state: 'available' })).status, 200);
  t.is((await distribute(service.pool, queue.id))?.entry.id, entry?.id);
  t.true(await answerEntry(service.pool, entry?.id as string, agent.id));
  await queueCallsEnded(service.pool, [
    { workspaceId: ws, memberId: agent.id, entryId: entry?.id as string, wrapUpSecs: 300 },
  ]);
  const wrapping = await list(agent.token);
  t.like(wrapping.body.data[0], { state: 'wrap_up', callsAnswered: 1, actor: 'system' });
  t.is(typeof wrapping.body.data[0].wrapUpUntil, 'string');
  const back = await put(agent.token, agent.id, { state: 'available' });
  t.like(back.body, { state: 'available', wrapUpUntil: null });
  t.deepEqual(await agentEvents(service.pool, agent.id), [
    `offline>available:member:${agent.id}`,
    'available>offered:system',
    'offered>away:application:not now',
    `away>available:member:${agent.id}`,
    'available>offered:system',
    'offered>on_call:system',
    'on_call>wrap_up:system',
    `wrap_up>available:member:${agent.id}`,
  ]);
});
