/**
 * Operation 81 and the queue gauges (docs/contact-center.md, "Live figures"): who may read them; the figures of
 * queues whose entries and agents were made with the core functions (enterQueue, distribute, answerEntry,
 * leaveQueue, setStateByPerson) and of calls in each state; another workspace's rows left out; the same figures as
 * Prometheus gauges on /metrics, at most `queueLimit` queues, quiet queues without series.
 *
 * One service for the file (API role only). Times in the past (a caller who entered 95 s ago, an entry that left 16
 * minutes ago) are the rows' timestamps moved back, instead of waiting.
 */
import test from 'ava';
import { queueLimit } from '../../api/queue-gauges.ts';
import { changeState, endCall } from '../../core/calls/calls.ts';
import { issueKey } from '../../core/identity/applications.ts';
import { answerEntry, enterQueue, leaveQueue, setStateByPerson } from '../../core/queues/entries.ts';
import { distribute } from '../../core/queues/distribution.ts';
import { createQueue } from '../../core/queues/queues.ts';
import { addAgent } from '../helpers/contact-center.ts';
import {
  type Answer,
  isError,
  liveCall,
  userToken,
  workspaceWithUser,
  type WorkspaceSetup,
  serviceForFile,
  signingKeysForFile,
} from '../helpers/service.ts';

const service = serviceForFile(test);
const keys = signingKeysForFile(test, service);

const noAgents = { offline: 0, available: 0, offered: 0, on_call: 0, wrap_up: 0, away: 0 };
const noCalls = { initiated: 0, routing: 0, queued: 0, offering: 0, connected: 0, voicemail: 0 };

function figures(auth: string, workspaceId?: string): Promise<Answer> {
  return service.request('GET', '/api/v1/metrics/realtime', { auth, ...(workspaceId ? { workspaceId } : {}) });
}

async function setState(setup: WorkspaceSetup, memberId: string, state: 'available' | 'away', reason?: string) {
  const set = await setStateByPerson(service.pool, {
    workspaceId: setup.workspace.id,
    memberId,
    state,
    reason: reason ?? null,
    actor: 'application',
  });
  if (set.outcome !== 'changed') throw new Error(`${state}: ${set.outcome}`);
}

/** A call of the setup's workspace entering the queue. */
async function enter(setup: WorkspaceSetup, queueId: string) {
  const call = await liveCall(service.pool, setup);
  const entry = await enterQueue(service.pool, { callId: call.id, queueId, engineOwner: 'engine-test' });
  if (entry === undefined) throw new Error('no entry');
  return entry;
}

async function moveBack(entryId: string, column: 'enqueued_at' | 'left_at', seconds: number) {
  await service.pool.query(`UPDATE queue_entries SET ${column} = ${column} - make_interval(secs => $2) WHERE id = $1`, [
    entryId,
    seconds,
  ]);
}

test('operation 81 takes keys and member tokens holding metrics:read, for their own workspace', async (t) => {
  const setup = await workspaceWithUser(service);
  const ws = setup.workspace.id as string;
  const reader = await addAgent(service.pool, keys.tokens, setup, { scopes: ['metrics:read'] });
  const agent = await addAgent(service.pool, keys.tokens, setup, { scopes: ['calls:*'] });
  const callsKey = (
    await issueKey(service.pool, { applicationId: setup.applicationId, name: 'calls', scopes: ['calls:*'] })
  ).secret;
  const other = await workspaceWithUser(service);

  const byKey = await figures(setup.apiKey, ws);
  t.is(byKey.status, 200, byKey.text);
  t.like(byKey.body, { intervalSecs: 900, serviceLevelSecs: 20, queues: [], calls: noCalls });
  t.true(Math.abs(Date.parse(byKey.body.at) - Date.now()) < 60_000);
  t.is((await figures(reader.token)).status, 200);
  isError(t, await figures(agent.token), 403, 'insufficient_scope', 'member token with calls:* only');
  isError(t, await figures(callsKey, ws), 403, 'insufficient_scope', 'key without metrics:read');
  isError(t, await figures(other.apiKey, ws), 403, 'workspace_forbidden', "another application's key");
  isError(t, await figures(reader.token, other.workspace.id), 403, 'workspace_forbidden', 'member token elsewhere');
  isError(t, await figures(await userToken(service, setup, ['metrics:read'])), 403, 'forbidden', 'user token');
  isError(t, await figures(setup.apiKey), 400, 'invalid_request', 'a key names its workspace');
});

/**
 * Billing [a, b, c]: a answered a caller in time, b one who had waited 60 s; one caller hung up mid-offer, one
 * overflowed, one left 16 minutes ago; one still waits (95 s). Accounts [b, d]: one caller waits, d is away. Empty:
 * no members. Calls: two queued, two connected, one routing, one voicemail, the rest ended; another workspace's
 * queue and calls are not counted.
 */
async function contactCenter() {
  const setup = await workspaceWithUser(service);
  const ws = setup.workspace.id as string;
  const [a, b, c, d] = await Promise.all([
    addAgent(service.pool, keys.tokens, setup),
    addAgent(service.pool, keys.tokens, setup),
    addAgent(service.pool, keys.tokens, setup),
    addAgent(service.pool, keys.tokens, setup),
  ]).then((agents) => agents.map((agent) => agent.id) as [string, string, string, string]);
  const queue = (name: string, memberIds: string[]) =>
    createQueue(service.pool, ws, { name, strategy: 'longest_idle', wrapUpSecs: 0, memberIds });
  const billing = await queue('Billing', [a, b, c]);
  const accounts = await queue('Accounts', [b, d]);
  const empty = await queue('Empty', []);
  await setState(setup, a, 'available');
  await setState(setup, b, 'available');
  await setState(setup, d, 'away', 'training');

  const inTime = await enter(setup, billing.id);
  const late = await enter(setup, billing.id);
  const hungUp = await enter(setup, billing.id);
  const waiting = await enter(setup, billing.id);
  expectOffer(await distribute(service.pool, billing.id), inTime.id, a);
  await answerEntry(service.pool, inTime.id, a);
  await moveBack(late.id, 'enqueued_at', 60);
  expectOffer(await distribute(service.pool, billing.id), late.id, b);
  await answerEntry(service.pool, late.id, b);
  await leaveQueue(service.pool, hungUp.id, 'abandoned', 3);
  await moveBack(waiting.id, 'enqueued_at', 95);
  const overflowed = await enter(setup, billing.id);
  await leaveQueue(service.pool, overflowed.id, 'overflowed', 3);
  const longAgo = await enter(setup, billing.id);
  await leaveQueue(service.pool, longAgo.id, 'abandoned', 3);
  await moveBack(longAgo.id, 'left_at', 16 * 60);
  const waitingAccounts = await enter(setup, accounts.id);
  if ((await distribute(service.pool, accounts.id)) !== undefined) throw new Error('b is on a call, d away');

  for (const entry of [waiting, waitingAccounts]) await changeState(service.pool, entry.call_id, 'queued');
  for (const entry of [inTime, late]) await changeState(service.pool, entry.call_id, 'connected', { answered: true });
  for (const entry of [hungUp, overflowed, longAgo]) await endCall(service.pool, entry.call_id, 'caller_hangup');
  await changeState(service.pool, (await liveCall(service.pool, setup)).id, 'routing');
  await changeState(service.pool, (await liveCall(service.pool, setup)).id, 'voicemail', { answered: true });

  const elsewhere = await workspaceWithUser(service);
  const elsewhereQueue = await createQueue(service.pool, elsewhere.workspace.id, {
    name: 'Elsewhere',
    strategy: 'longest_idle',
    wrapUpSecs: 0,
    memberIds: [],
  });
  await enter(elsewhere, elsewhereQueue.id);
  return { setup, a, b, c, d, billing, accounts, empty };
}

function expectOffer(offered: Awaited<ReturnType<typeof distribute>>, entryId: string, memberId: string) {
  if (offered?.entry.id !== entryId || offered.memberIds[0] !== memberId) {
    throw new Error(`expected ${entryId} offered to ${memberId}, got ${JSON.stringify(offered)}`);
  }
}

test('the figures of queues, agents and calls, from entries and agents made by the core functions', async (t) => {
  const center = await contactCenter();
  const answer = await figures(center.setup.apiKey, center.setup.workspace.id);
  t.is(answer.status, 200, answer.text);
  const { queues, calls } = answer.body;
  t.deepEqual(
    queues.map((queue: { name: string }) => queue.name),
    ['Accounts', 'Billing', 'Empty'],
  );
  const [accounts, billing, empty] = queues;
  t.like(billing, {
    queueId: center.billing.id,
    waiting: 1,
    agents: { ...noAgents, on_call: 2, offline: 1 },
    answered: 2,
    abandoned: 1,
  });
  t.true(billing.longestWaitSecs >= 95 && billing.longestWaitSecs < 95 + 120, `${billing.longestWaitSecs}`);
  t.is(billing.serviceLevel, 1 / 3, 'one of the three answered within 20 s');
  t.like(accounts, {
    queueId: center.accounts.id,
    waiting: 1,
    agents: { ...noAgents, on_call: 1, away: 1 },
    answered: 0,
    abandoned: 0,
    serviceLevel: null,
  });
  t.true(accounts.longestWaitSecs < 120);
  t.deepEqual(empty, {
    queueId: center.empty.id,
    name: 'Empty',
    waiting: 0,
    longestWaitSecs: 0,
    agents: noAgents,
    answered: 0,
    abandoned: 0,
    serviceLevel: null,
  });
  t.deepEqual(calls, { ...noCalls, routing: 1, queued: 2, connected: 2, voicemail: 1 });
  const member = await addAgent(service.pool, keys.tokens, center.setup, { scopes: ['metrics:read'] });
  // The same figures; a wait may have grown by a second between the two reads.
  type QueueFigures = { name: string; longestWaitSecs: number } & Record<string, unknown>;
  const before = queues as QueueFigures[];
  const again = (await figures(member.token)).body.queues as QueueFigures[];
  const withoutWaits = (list: QueueFigures[]) => list.map(({ longestWaitSecs: _wait, ...rest }) => rest);
  t.deepEqual(withoutWaits(again), withoutWaits(before), 'a member token reads the same');
  for (const [index, queue] of again.entries()) {
    const waited = before[index]!.longestWaitSecs;
    t.true(queue.longestWaitSecs >= waited && queue.longestWaitSecs <= waited + 1, `${queue.name}'s wait`);
  }
});

/** The gauges' values on /metrics as `name{labels}` → value (polled: the gauges are read at most once a second). */
async function gauges(until: (values: Map<string, number>) => boolean): Promise<Map<string, number>> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const answer = await service.request('GET', '/metrics');
    const values = new Map<string, number>();
    for (const line of answer.text.split('\n')) {
      const match = /^(switchboard_queue_\w+(?:\{[^}]*\})?) (\S+)$/.exec(line);
      if (match) values.set(match[1] as string, Number(match[2]));
    }
    if (until(values) || Date.now() > deadline) return values;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

test.serial(
  'the gauges report at most queueLimit queues, the busiest first, and say when they left some out',
  async (t) => {
    const setup = await workspaceWithUser(service);
    const entries = [];
    for (let index = 0; index <= queueLimit; index += 1) {
      const queue = await createQueue(service.pool, setup.workspace.id, {
        name: `q${index}`,
        strategy: 'longest_idle',
        wrapUpSecs: 0,
        memberIds: [],
      });
      entries.push(await enter(setup, queue.id));
    }
    const busiest = entries[0]?.queue_id as string;
    entries.push(await enter(setup, busiest));
    const capped = await gauges((values) => values.get('switchboard_queue_gauges_capped') === 1);
    t.is(capped.get('switchboard_queue_gauges_capped'), 1);
    const waitingSeries = [...capped.keys()].filter((key) => key.startsWith('switchboard_queue_waiting{'));
    t.is(waitingSeries.length, queueLimit);
    t.is(capped.get(`switchboard_queue_waiting{queue="${busiest}"}`), 2);
    t.is([...capped.keys()].filter((key) => key.startsWith('switchboard_queue_agents{')).length, queueLimit * 6);
    for (const entry of entries) await leaveQueue(service.pool, entry.id, 'abandoned', 3);
    const quiet = await gauges((values) => values.get('switchboard_queue_gauges_capped') === 0);
    t.is(quiet.get('switchboard_queue_gauges_capped'), 0);
    t.false(quiet.has(`switchboard_queue_waiting{queue="${busiest}"}`), 'a quiet queue has no series');
  },
);

test('the same figures as Prometheus gauges on /metrics, by queue id', async (t) => {
  const center = await contactCenter();
  const billing = (name: string, extra = '') => `${name}{queue="${center.billing.id}"${extra}}`;
  const accounts = (name: string, extra = '') => `${name}{queue="${center.accounts.id}"${extra}}`;
  const values = await gauges((read) => read.get(billing('switchboard_queue_waiting')) === 1);
  t.is(values.get(billing('switchboard_queue_waiting')), 1);
  const longest = values.get(billing('switchboard_queue_longest_wait_seconds')) ?? 0;
  t.true(longest >= 95 && longest < 95 + 120, `${longest}`);
  t.is(values.get(billing('switchboard_queue_agents', ',state="on_call"')), 2);
  t.is(values.get(billing('switchboard_queue_agents', ',state="offline"')), 1);
  t.is(values.get(billing('switchboard_queue_agents', ',state="available"')), 0);
  t.is(values.get(accounts('switchboard_queue_waiting')), 1);
  t.is(values.get(accounts('switchboard_queue_agents', ',state="away"')), 1);
  t.false(
    [...values.keys()].some((key) => key.includes(center.empty.id)),
    'a queue with no entries and no agents signed in has no series',
  );
  t.is(values.get('switchboard_queue_gauges_capped'), 0);

  // An agent signing in is seen at the next read.
  await setState(center.setup, center.c, 'available');
  const after = await gauges((read) => read.get(billing('switchboard_queue_agents', ',state="available"')) === 1);
  t.is(after.get(billing('switchboard_queue_agents', ',state="available"')), 1);
  t.is(after.get(billing('switchboard_queue_agents', ',state="offline"')), 0);
});
