/**
 * Distribution in PostgreSQL (core/queues/entries.ts, distribution.ts, core/agents/agent-states.ts; docs/contact-center.md): queue
 * entries offered to agents under locks, raced by many connections at once as several engines would; missed offers,
 * an agent going away mid-offer, a caller hanging up mid-offer, wrap-up, a restarted engine's entries, callbacks;
 * every agent change is one `agent.state_changed` event, every entry's coming and going `queue.entered` /
 * `queue.left`; calls that end while callers wait offer their agents the next in the commit that frees them.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { agentOf, endWrapUps, missedOffersLimit } from '../../core/agents/agent-states.ts';
import { registerDevice } from '../../core/devices/devices.ts';
import {
  abandonOwnedEntries,
  answerEntry,
  enterQueue,
  entryById,
  leaveQueue,
  queueCallsEnded,
  releaseEntry,
  requestCallback,
  setStateByPerson,
} from '../../core/queues/entries.ts';
import { distribute, distributeMany, endCallsAndOffer } from '../../core/queues/distribution.ts';
import { createQueue } from '../../core/queues/queues.ts';
import { makeAvailable, newMember } from '../helpers/contact-center.ts';
import { liveCall, startService, type TestService, workspaceWithUser } from '../helpers/service.ts';

let service: TestService;

test.before(async () => {
  service = await startService({}, ['api']);
});

test.after.always(async () => {
  await service?.close();
});

/** A workspace with a queue of `agents` members, each with a live browser device, made available in order. */
async function contactCenter(agents: number, strategy = 'longest_idle', available = true) {
  const setup = await workspaceWithUser(service);
  const workspaceId = setup.workspace.id as string;
  const memberIds: string[] = [];
  for (let index = 0; index < agents; index += 1) {
    const memberId = await newMember(service.pool, workspaceId, `agent${index}`);
    memberIds.push(memberId);
    await registerDevice(service.pool, workspaceId, { memberId }, { kind: 'browser', name: null, clientId: null });
  }
  const queue = await createQueue(service.pool, workspaceId, { name: 'Support', strategy, wrapUpSecs: 0, memberIds });
  if (available) await makeAvailable(service.pool, workspaceId, memberIds);
  const enter = async () => {
    const call = await liveCall(service.pool, setup);
    const entry = await enterQueue(service.pool, { callId: call.id, queueId: queue.id, engineOwner: 'engine-test' });
    if (entry === undefined) throw new Error('no entry');
    return entry;
  };
  /** The queue call of agent `agent` (an index) on `entryId` is over, with `wrapUpSecs` of wrap-up. */
  const callEnded = (entryId: string, wrapUpSecs: number, agent = 0) =>
    queueCallsEnded(service.pool, [{ workspaceId, memberId: memberIds[agent] as string, entryId, wrapUpSecs }]);
  return { setup, workspaceId, memberIds, queue, enter, callEnded };
}

/** Runs `distribute` on `count` connections at once, as that many engines would. */
async function race(queueId: string, count = 8) {
  const results = await Promise.all(Array.from({ length: count }, () => distribute(service.pool, queueId)));
  return results.filter((result) => result !== undefined);
}

async function stateOf(workspaceId: string, memberId: string) {
  return (await agentOf(service.pool, workspaceId, memberId))?.state;
}

interface AgentPayload {
  agent: { state: string; previousState: string | null; actor: string; reason: string | null };
}

async function agentEvents(memberId: string) {
  const result = await service.pool.query<{ payload: string }>(
    'SELECT payload::text AS payload FROM events WHERE stream_key = $1 ORDER BY sequence',
    [`agent:${memberId}`],
  );
  return result.rows.map((row) => {
    const { state, previousState, actor, reason } = (JSON.parse(row.payload) as AgentPayload).agent;
    return `${previousState}>${state}:${actor}${reason === null ? '' : `:${reason}`}`;
  });
}

test('one caller, two agents available: eight racing distributions offer it once, to the agent idle longest', async (t) => {
  const center = await contactCenter(2);
  const entry = await center.enter();
  const offered = await race(center.queue.id);
  t.is(offered.length, 1);
  t.deepEqual(offered[0]?.memberIds, [center.memberIds[0]]);
  t.is((await entryById(service.pool, entry.id))?.state, 'offered');
  t.is(await stateOf(center.workspaceId, center.memberIds[0] as string), 'offered');
  t.is(await stateOf(center.workspaceId, center.memberIds[1] as string), 'available');
  t.deepEqual(await race(center.queue.id), [], 'nothing more to offer');

  t.true(await answerEntry(service.pool, entry.id, center.memberIds[0] as string));
  t.false(await answerEntry(service.pool, entry.id, center.memberIds[0] as string), 'answered once');
  t.is((await entryById(service.pool, entry.id))?.state, 'connected');
  await center.callEnded(entry.id, 0);
  t.deepEqual(await agentEvents(center.memberIds[0] as string), [
    'offline>available:application',
    'available>offered:system',
    'offered>on_call:system',
    'on_call>available:system',
  ]);
  // Told twice, or for an agent no longer on that call: nothing more changes.
  await center.callEnded(entry.id, 30);
  t.is(await stateOf(center.workspaceId, center.memberIds[0] as string), 'available');
  t.is((await agentEvents(center.memberIds[0] as string)).length, 4);
  const queueEvents = await service.pool.query<{ type: string; state: string }>(
    "SELECT type, (payload::jsonb)->'queue'->>'state' AS state FROM events WHERE stream_key = $1 AND type LIKE $2 ORDER BY sequence",
    [`call:${entry.call_id}`, 'queue.%'],
  );
  t.deepEqual(
    queueEvents.rows.map((row) => `${row.type}:${row.state}`),
    ['queue.entered:waiting', 'queue.left:connected'],
  );
});

test('one agent, two callers: the first in line is offered; the second once the agent is free again', async (t) => {
  const center = await contactCenter(1);
  const first = await center.enter();
  const second = await center.enter();
  const offered = await race(center.queue.id);
  t.is(offered.length, 1);
  t.is(offered[0]?.entry.id, first.id);
  t.is((await entryById(service.pool, second.id))?.state, 'waiting');
  await answerEntry(service.pool, first.id, center.memberIds[0] as string);
  t.deepEqual(await race(center.queue.id), [], 'the agent is on a call');
  // Wrap-up: not offered until it is over.
  await center.callEnded(first.id, 30);
  t.is(await stateOf(center.workspaceId, center.memberIds[0] as string), 'wrap_up');
  t.deepEqual(await race(center.queue.id), []);
  t.is(await endWrapUps(service.pool), 0, 'not over yet');
  // Thirty seconds later (the row's end moved instead of waiting).
  await service.pool.query(
    "UPDATE agent_states SET wrap_up_until = clock_timestamp() - interval '1 second' WHERE member_id = $1",
    [center.memberIds[0]],
  );
  t.true((await endWrapUps(service.pool)) >= 1);
  const next = await race(center.queue.id);
  t.is(next[0]?.entry.id, second.id);
});

test('missed offers put the entry back first in line; the third in a row sends the agent away', async (t) => {
  const center = await contactCenter(1);
  const entry = await center.enter();
  for (let missed = 1; missed <= missedOffersLimit; missed += 1) {
    const offered = await race(center.queue.id);
    t.is(offered[0]?.entry.id, entry.id, `offer ${missed}`);
    await releaseEntry(service.pool, entry.id, true, missedOffersLimit);
    t.is((await entryById(service.pool, entry.id))?.state, 'waiting');
  }
  const agent = await agentOf(service.pool, center.workspaceId, center.memberIds[0] as string);
  t.is(agent?.state, 'away');
  t.is(agent?.reason, 'missed_offers');
  t.deepEqual(await race(center.queue.id), []);
  const events = await agentEvents(center.memberIds[0] as string);
  t.is(events.at(-1), 'available>away:system:missed_offers');
  t.is(events.filter((event) => event === 'available>offered:system').length, missedOffersLimit);
});

test('an agent going away mid-offer, and a caller hanging up mid-offer, give the agent and entry back', async (t) => {
  const center = await contactCenter(2);
  const entry = await center.enter();
  const [first] = await race(center.queue.id);
  const offeredTo = first?.memberIds[0] as string;
  const away = await setStateByPerson(service.pool, {
    workspaceId: center.workspaceId,
    memberId: offeredTo,
    state: 'away',
    reason: 'lunch',
    actor: `member:${offeredTo}`,
  });
  t.like(away, { outcome: 'changed', previous: 'offered' });
  t.is((await entryById(service.pool, entry.id))?.state, 'waiting', 'back in line');
  const [second] = await race(center.queue.id);
  const other = center.memberIds.find((id) => id !== offeredTo) as string;
  t.deepEqual(second?.memberIds, [other]);
  t.false(await answerEntry(service.pool, entry.id, offeredTo), 'an accept of the agent who went away does not count');
  t.is((await entryById(service.pool, entry.id))?.state, 'offered');
  await leaveQueue(service.pool, entry.id, 'abandoned', missedOffersLimit);
  t.is((await entryById(service.pool, entry.id))?.state, 'abandoned');
  t.is(await stateOf(center.workspaceId, other), 'available', 'the caller hung up: the agent is free, no missed offer');
  t.is((await agentOf(service.pool, center.workspaceId, other))?.missed_offers, 0);
  t.deepEqual(await agentEvents(offeredTo), [
    'offline>available:application',
    'available>offered:system',
    `offered>away:member:${offeredTo}:lunch`,
  ]);
});

test('available needs a live device; ring_all offers every available agent and the answer frees the others', async (t) => {
  const center = await contactCenter(3, 'ring_all', false);
  await service.pool.query('UPDATE devices SET presence_expires_at = NULL WHERE member_id = $1', [center.memberIds[2]]);
  const unreachable = await setStateByPerson(service.pool, {
    workspaceId: center.workspaceId,
    memberId: center.memberIds[2] as string,
    state: 'available',
    reason: null,
    actor: 'application',
  });
  t.deepEqual(unreachable, { outcome: 'unreachable' });
  const missing = await setStateByPerson(service.pool, {
    workspaceId: center.workspaceId,
    memberId: randomUUID(),
    state: 'away',
    reason: null,
    actor: 'application',
  });
  t.deepEqual(missing, { outcome: 'not_found' });
  for (const memberId of center.memberIds.slice(0, 2)) {
    await setStateByPerson(service.pool, {
      workspaceId: center.workspaceId,
      memberId,
      state: 'available',
      reason: null,
      actor: 'application',
    });
  }
  const entry = await center.enter();
  const offered = await race(center.queue.id);
  t.is(offered.length, 1);
  t.deepEqual([...(offered[0]?.memberIds ?? [])].sort(), center.memberIds.slice(0, 2).sort());
  await answerEntry(service.pool, entry.id, center.memberIds[1] as string);
  t.is(await stateOf(center.workspaceId, center.memberIds[0] as string), 'available');
  t.is(await stateOf(center.workspaceId, center.memberIds[1] as string), 'on_call');
  t.is(await stateOf(center.workspaceId, center.memberIds[2] as string), 'offline');
});

test('a restarted engine: its waiting entries leave abandoned, its agents on a queue call are available again', async (t) => {
  const center = await contactCenter(1);
  // An engine of its own: the other tests' entries are another engine's.
  const engineOwner = `engine-${randomUUID()}`;
  const enter = async () => {
    const call = await liveCall(service.pool, center.setup);
    const entry = await enterQueue(service.pool, { callId: call.id, queueId: center.queue.id, engineOwner });
    if (entry === undefined) throw new Error('no entry');
    return entry;
  };
  const answered = await enter();
  const waiting = await enter();
  const [offered] = await race(center.queue.id);
  t.is(offered?.entry.id, answered.id);
  t.true(await answerEntry(service.pool, answered.id, center.memberIds[0] as string));
  t.is(await abandonOwnedEntries(service.pool, engineOwner, missedOffersLimit), 1, 'the waiting one');
  t.is((await entryById(service.pool, waiting.id))?.state, 'abandoned');
  t.is((await entryById(service.pool, answered.id))?.state, 'connected');
  t.is(await stateOf(center.workspaceId, center.memberIds[0] as string), 'available');
  t.is((await agentEvents(center.memberIds[0] as string)).at(-1), 'on_call>available:system');
});

test('a release names its offer: an older one releases nothing; a callback entry keeps its place and its state', async (t) => {
  const center = await contactCenter(1);
  const entry = await center.enter();
  const [first] = await race(center.queue.id);
  const firstOfferedAt = first?.entry.offered_at as Date;
  await releaseEntry(service.pool, entry.id, false, missedOffersLimit, firstOfferedAt);
  t.is((await entryById(service.pool, entry.id))?.state, 'waiting');
  const [second] = await race(center.queue.id);
  t.not(second?.entry.offered_at?.getTime(), firstOfferedAt.getTime());
  await releaseEntry(service.pool, entry.id, true, missedOffersLimit, firstOfferedAt);
  t.is((await entryById(service.pool, entry.id))?.state, 'offered', 'the end of the first offer leaves the second');
  t.false(await requestCallback(service.pool, entry.id, '+15550001111'), 'not while offered');
  await releaseEntry(service.pool, entry.id, false, missedOffersLimit, second?.entry.offered_at as Date);
  t.true(await requestCallback(service.pool, entry.id, '+15550001111'));
  const later = await center.enter();
  const [third] = await race(center.queue.id);
  t.is(third?.entry.id, entry.id, 'still first in line');
  t.is(third?.entry.callback_number, '+15550001111');
  await releaseEntry(service.pool, entry.id, false, missedOffersLimit);
  t.is((await entryById(service.pool, entry.id))?.state, 'callback', 'back in line as a callback');
  t.is((await entryById(service.pool, later.id))?.state, 'waiting');
});

test('distributeMany offers the entries in line to the agents idle longest in one commit, racing ones too', async (t) => {
  const center = await contactCenter(3);
  const entries: { id: string }[] = [];
  for (let index = 0; index < 4; index += 1) entries.push(await center.enter());
  // Two engines at once, each asking for up to ten offers: three agents, so three offers in all, each once.
  const runs = await Promise.all([
    distributeMany(service.pool, center.queue.id, 10),
    distributeMany(service.pool, center.queue.id, 10),
  ]);
  const offers = runs.flat();
  t.is(offers.length, 3);
  t.deepEqual(
    offers.map((offer) => offer.entry.id).sort(),
    entries
      .slice(0, 3)
      .map((entry) => entry.id)
      .sort(),
    'the first three in line',
  );
  t.deepEqual(offers.map((offer) => offer.memberIds[0]).sort(), [...center.memberIds].sort(), 'each agent once');
  // The one run that got the queue's lock paired them in order: the first in line with the agent idle longest.
  const inLine = (id: string) => entries.findIndex((entry) => entry.id === id);
  const paired = [...offers].sort((a, b) => inLine(a.entry.id) - inLine(b.entry.id));
  t.deepEqual(
    paired.map((offer) => offer.memberIds[0]),
    center.memberIds,
    'first in line, idle longest',
  );
  for (const [index, memberId] of center.memberIds.entries()) {
    const agent = await agentOf(service.pool, center.workspaceId, memberId);
    t.like(agent, { state: 'offered', entry_id: entries[index]!.id, actor: 'system' });
    t.is((await agentEvents(memberId)).at(-1), 'available>offered:system');
  }
  t.is((await entryById(service.pool, entries[3]!.id))?.state, 'waiting', 'the fourth waits: nobody is free');
  t.deepEqual(await distributeMany(service.pool, center.queue.id, 10), []);
});

test('calls that end while callers wait: the agents freed are offered the first in line in the same commit, not those in wrap-up', async (t) => {
  // Two agents on calls of the queue; the first call ends without wrap-up, the second with 30 s of it.
  const { workspaceId, memberIds, queue, enter } = await contactCenter(2);
  const [first, second] = memberIds as [string, string];
  const calls = [await enter(), await enter()];
  t.is((await distributeMany(service.pool, queue.id, 2)).length, 2);
  for (const [index, entry] of calls.entries()) {
    const offered = (await agentOf(service.pool, workspaceId, memberIds[index] as string))?.entry_id;
    t.true(await answerEntry(service.pool, offered ?? entry.id, memberIds[index] as string));
  }
  const onCall = async (memberId: string) => (await agentOf(service.pool, workspaceId, memberId))?.entry_id as string;
  const waiting = [await enter(), await enter()];
  const offers = await endCallsAndOffer(
    service.pool,
    [
      { workspaceId, memberId: first, entryId: await onCall(first), wrapUpSecs: 0 },
      { workspaceId, memberId: second, entryId: await onCall(second), wrapUpSecs: 30 },
    ],
    10,
  );
  t.deepEqual(
    offers.map(({ entry, memberIds: offeredTo }) => [entry.id, offeredTo]),
    [[waiting[0]?.id, [first]]],
    'the agent without wrap-up takes the first caller in line',
  );
  t.deepEqual((await agentEvents(first)).slice(-2), ['on_call>available:system', 'available>offered:system']);
  t.is(await stateOf(workspaceId, second), 'wrap_up');
  t.is((await entryById(service.pool, waiting[1]?.id as string))?.state, 'waiting', 'the second caller waits on');
});
