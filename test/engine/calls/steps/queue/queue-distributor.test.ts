/**
 * The engine's queue distributor (engine/calls/steps/queue/distributor.ts; docs/contact-center.md, "Queue entries and
 * distribution"): an offer it makes for an entry this engine's call watches is handed to that wait with the offered
 * agent's ringable devices, read once for the whole commit, so the ring round reads nothing before its INVITEs; the
 * offer's own `offered` notice, which may come before or after the commit returns, does not make the wait read the
 * entry again. Agents' queue calls that end together are written together (`callEnded`): their devices freed, each
 * agent available with one event, the queue announced once a commit; a batch that fails is written one end at a time.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import { ChangeListener, queueChannel } from '../../../../../core/change-notices.ts';
import { openPool } from '../../../../../core/database.ts';
import { registerDevice, setDeviceBusy, type DeviceKind } from '../../../../../core/devices/devices.ts';
import { issueSipCredentials } from '../../../../../core/devices/sip-credentials.ts';
import { distributeMany } from '../../../../../core/queues/distribution.ts';
import {
  answerEntry,
  type EndedQueueCall,
  enterQueue,
  leaveQueue,
  parseQueueNotice,
} from '../../../../../core/queues/entries.ts';
import { createQueue } from '../../../../../core/queues/queues.ts';
import type { EntryOffer } from '../../../../../engine/calls/services.ts';
import { QueueDistributor } from '../../../../../engine/calls/steps/queue/distributor.ts';
import { agentEvents, bindDeskPhone, makeAvailable, newMember } from '../../../../helpers/contact-center.ts';
import { until } from '../../../../helpers/until.ts';
import { liveCall, startService, type TestService, workspaceWithUser } from '../../../../helpers/service.ts';

let service: TestService;

test.before(async () => {
  service = await startService({}, ['api']);
});

test.after.always(async () => {
  await service?.close();
});

test("an offer is handed to the entry's wait with the offered agent's devices, only theirs, and no notice to read it again", async (t) => {
  const setup = await workspaceWithUser(service);
  const workspaceId = setup.workspace.id as string;
  const device = async (memberId: string, kind: DeviceKind) => {
    const made = await registerDevice(service.pool, workspaceId, { memberId }, { kind, name: null, clientId: null });
    if (made.outcome !== 'created') throw new Error(`device: ${made.outcome}`);
    return made.device;
  };
  // Agent 0 on a desk phone registered now; agent 1 on a browser.
  const deskAgent = await newMember(service.pool, workspaceId, 'desk');
  const browserAgent = await newMember(service.pool, workspaceId, 'browser');
  const desk = await device(deskAgent, 'sip');
  const credentials = await issueSipCredentials(service.pool, randomBytes(32), desk.id);
  await bindDeskPhone(service.pool, {
    deviceId: desk.id,
    username: credentials.username,
    uri: 'sip:desk@192.0.2.9:5070',
    port: 5070,
    now: new Date(),
    expiresSecs: 3600,
  });
  const browser = await device(browserAgent, 'browser');
  const queue = await createQueue(service.pool, workspaceId, {
    name: 'Support',
    strategy: 'longest_idle',
    wrapUpSecs: 0,
    memberIds: [deskAgent, browserAgent],
  });

  // Three callers in line before the distributor listens (their `entered` notices are not heard): two will be
  // offered, the third stays in line.
  const entries: string[] = [];
  for (let index = 0; index < 3; index += 1) {
    const call = await liveCall(service.pool, setup);
    const entry = await enterQueue(service.pool, { callId: call.id, queueId: queue.id, engineOwner: 'engine-test' });
    if (entry === undefined) throw new Error('no entry');
    entries.push(entry.id);
  }
  const distributor = new QueueDistributor({
    pool: service.pool,
    databaseUrl: service.databaseUrl,
    owner: `distributor-${randomUUID()}`,
    log: { info: () => {}, warn: (fields, message) => t.log(message, fields) },
  });
  await distributor.start();
  t.teardown(() => distributor.close());
  /** What each entry's wait was told, in order: an offer handed over, or `read` (read the entry again). */
  const told = new Map<string, (EntryOffer | 'read')[]>(entries.map((id) => [id, []]));
  for (const entryId of entries) {
    distributor.watch(entryId, queue.id, (offered) => told.get(entryId)?.push(offered ?? 'read'));
  }
  const handed = () => {
    const offers = entries.flatMap((id) => (told.get(id) ?? []).filter((item) => item !== 'read'));
    return offers.length === 2 ? offers : undefined;
  };
  await makeAvailable(service.pool, workspaceId, [deskAgent, browserAgent]);
  const offers = await until('both offers handed over', handed, 10_000);
  // Notices come in commit order: once the third caller's leaving is heard, the offers' own notices were too.
  await leaveQueue(service.pool, entries[2] as string, 'abandoned', 3);
  await until('the third entry told of its leaving', () => (told.get(entries[2] as string)?.length ? true : undefined));
  t.deepEqual(told.get(entries[2] as string), ['read']);
  for (const entryId of entries.slice(0, 2)) {
    t.is(told.get(entryId)?.length, 1, 'each offer handed over once, its own notice not passed on (no read)');
  }
  const toDesk = offers.find((offer) => offer.memberIds.includes(deskAgent));
  const toBrowser = offers.find((offer) => offer.memberIds.includes(browserAgent));
  t.deepEqual(toDesk?.memberIds, [deskAgent]);
  t.deepEqual(toBrowser?.memberIds, [browserAgent]);
  t.deepEqual(toDesk?.ringable?.offered, [], 'the desk agent has no browser');
  t.deepEqual(
    toDesk?.ringable?.sip.map(({ device: found, bindings }) => [
      found.id,
      bindings.map((binding) => binding.contactUri),
    ]),
    [[desk.id, ['sip:desk@192.0.2.9:5070']]],
    'the desk phone at its binding',
  );
  t.deepEqual(
    toBrowser?.ringable?.offered.map((found) => found.id),
    [browser.id],
    "the browser agent's browser",
  );
  t.deepEqual(toBrowser?.ringable?.sip, [], "not the other agent's phone");
});

/**
 * `count` agents of one queue (wrap-up 0), each with a browser device, on a call with a caller of the queue: offered
 * by distribution, answered, the device busy with the call; then `waiting` more callers in line. The ends of those
 * calls, as the engine's waits send them, and the entries of the callers waiting.
 */
async function agentsOnCalls(count: number, waiting: number) {
  const setup = await workspaceWithUser(service);
  const workspaceId = setup.workspace.id as string;
  const agents: { memberId: string; deviceId: string }[] = [];
  for (let index = 0; index < count; index += 1) {
    const memberId = await newMember(service.pool, workspaceId);
    const made = await registerDevice(
      service.pool,
      workspaceId,
      { memberId },
      { kind: 'browser', name: null, clientId: null },
    );
    if (made.outcome !== 'created') throw new Error(`device: ${made.outcome}`);
    agents.push({ memberId, deviceId: made.device.id });
  }
  const queue = await createQueue(service.pool, workspaceId, {
    name: 'Support',
    strategy: 'longest_idle',
    wrapUpSecs: 0,
    memberIds: agents.map((agent) => agent.memberId),
  });
  const enter = async () => {
    const call = await liveCall(service.pool, setup);
    const entry = await enterQueue(service.pool, { callId: call.id, queueId: queue.id, engineOwner: 'engine-test' });
    if (entry === undefined) throw new Error('no entry');
    return entry.id;
  };
  for (let index = 0; index < count; index += 1) await enter();
  await makeAvailable(
    service.pool,
    workspaceId,
    agents.map((agent) => agent.memberId),
  );
  const offers = await distributeMany(service.pool, queue.id, count);
  const ends: EndedQueueCall[] = [];
  for (const { entry, memberIds } of offers) {
    const agent = agents.find((candidate) => candidate.memberId === memberIds[0]);
    if (agent === undefined || !(await answerEntry(service.pool, entry.id, agent.memberId)))
      throw new Error('no answer');
    await setDeviceBusy(service.pool, agent.deviceId, entry.call_id);
    ends.push({ workspaceId, memberId: agent.memberId, entryId: entry.id, wrapUpSecs: 0, deviceId: agent.deviceId });
  }
  if (ends.length !== count) throw new Error(`${ends.length} offers of ${count}`);
  const inLine: string[] = [];
  for (let index = 0; index < waiting; index += 1) inLine.push(await enter());
  return { queue, ends, inLine };
}

/** A distributor of its own connections (so that the test knows when their notices were sent), started. */
async function distributorOnItsOwn(t: ExecutionContext) {
  const pool = openPool(service.databaseUrl, { max: 3 }, (error) => t.log(error.message));
  const distributor = new QueueDistributor({
    pool,
    databaseUrl: service.databaseUrl,
    owner: `distributor-${randomUUID()}`,
    log: { info: () => {}, warn: (fields, message) => t.log(message, fields) },
  });
  await distributor.start();
  t.teardown(async () => {
    await distributor.close();
    await distributor.endingsWritten();
    await pool.end();
  });
  /** Once every notice sent after a commit went out (each goes on its transaction's connection before its release). */
  const settled = () => until('notices sent', () => (pool.idleCount === pool.totalCount ? true : undefined));
  return { distributor, settled };
}

/** The `agent` notices of a queue heard from now, counted. */
async function agentNotices(t: ExecutionContext, queueId: string) {
  const heard = { agent: 0, marks: new Set<string>() };
  const listener = new ChangeListener(
    service.databaseUrl,
    queueChannel,
    (payload) => {
      const notice = parseQueueNotice(payload);
      if (notice?.queueId === queueId && notice.kind === 'agent') heard.agent += 1;
      if (notice?.kind === 'left' && notice.entryId !== undefined) heard.marks.add(notice.entryId);
    },
    () => {},
    (message) => t.log(message),
  );
  await listener.start();
  t.teardown(() => listener.close());
  /** Every notice committed before this one was heard when it is (notices come in commit order). */
  const heardAll = async () => {
    const mark = randomUUID();
    await service.pool.query('SELECT pg_notify($1, $2)', [
      queueChannel,
      JSON.stringify({ queueId: randomUUID(), entryId: mark, kind: 'left' }),
    ]);
    await until('the mark heard', () => (heard.marks.has(mark) ? true : undefined));
    return heard.agent;
  };
  return heardAll;
}

/** How many transactions last wrote the members' agent rows. */
async function commitsOf(memberIds: readonly string[]): Promise<number> {
  const found = await service.pool.query<{ n: number }>(
    'SELECT count(DISTINCT xmin::text)::int AS n FROM agent_states WHERE member_id = ANY ($1::uuid[])',
    [[...memberIds]],
  );
  return found.rows[0]?.n ?? 0;
}

test('queue calls that end together free their agents in one commit that offers them the callers waiting', async (t) => {
  const { queue, ends, inLine } = await agentsOnCalls(12, 12);
  const { distributor, settled } = await distributorOnItsOwn(t);
  const notices = await agentNotices(t, queue.id);
  // This engine holds the callers in line: their waits are handed the offers with the agents' devices.
  const told = new Map<string, (EntryOffer | 'read')[]>(inLine.map((id) => [id, []]));
  for (const entryId of inLine) {
    distributor.watch(entryId, queue.id, (offered) => told.get(entryId)?.push(offered ?? 'read'));
  }
  // The watches' own distribution found nobody to offer the callers to.
  await until('the watches distributed', async () =>
    (await service.pool.query("SELECT 1 FROM queue_entries WHERE id = ANY ($1) AND state = 'waiting'", [inLine]))
      .rowCount === 12
      ? true
      : undefined,
  );

  await Promise.all(ends.map((end) => distributor.callEnded(end)));
  await settled();
  const memberIds = ends.map((end) => end.memberId);
  // The first end is written as it comes; the eleven asked for while it was in flight are written in one commit.
  t.is(await commitsOf(memberIds), 2, 'two commits free and offer the twelve agents');
  for (const end of ends) {
    t.deepEqual((await agentEvents(service.pool, end.memberId)).slice(-3), [
      'offered>on_call:system',
      'on_call>available:system',
      'available>offered:system',
    ]);
  }
  const busy = await service.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM devices WHERE id = ANY ($1) AND busy_call_id IS NOT NULL',
    [ends.map((end) => end.deviceId)],
  );
  t.is(busy.rows[0]?.n, 0, 'every device free');
  const offered = await until('every offer handed over', () => {
    const handed = inLine.flatMap((id) => (told.get(id) ?? []).filter((item) => item !== 'read'));
    return handed.length === 12 ? handed : undefined;
  });
  t.deepEqual(
    offered.map((offer) => offer.ringable?.offered.length),
    Array<number>(12).fill(1),
    "each with its agent's browser",
  );
  // The offers are handed over in no set order: compared sorted.
  t.deepEqual(offered.flatMap((offer) => offer.memberIds).sort(), [...memberIds].sort(), 'each agent offered once');
  t.is(await notices(), 0, 'the queue was distributed in those commits: no notice asks for it again');
  for (const entryId of inLine) t.is(told.get(entryId)?.length, 1, 'no wait told to read its entry again');

  // Written again (the call's end after the device's), nothing changes and no event is written.
  await Promise.all(
    ends.map(({ workspaceId, memberId, entryId, wrapUpSecs }) =>
      distributor.callEnded({ workspaceId, memberId, entryId, wrapUpSecs }),
    ),
  );
  for (const end of ends) t.is((await agentEvents(service.pool, end.memberId)).length, 5);
});

test('a batch of ends that fails is written one end at a time: the others are written, the bad one fails alone', async (t) => {
  const { ends } = await agentsOnCalls(3, 0);
  const { distributor } = await distributorOnItsOwn(t);
  const bad: EndedQueueCall = { ...(ends[0] as EndedQueueCall), memberId: 'not-a-member' };
  // The first goes alone; the three others come while it is written and fail together, on the bad one.
  const [first, ...rest] = [ends[0], bad, ends[1], ends[2]].map((end) => distributor.callEnded(end as EndedQueueCall));
  await first;
  const outcomes = await Promise.allSettled(rest);
  t.deepEqual(
    outcomes.map((outcome) => outcome.status),
    ['rejected', 'fulfilled', 'fulfilled'],
  );
  for (const end of ends) {
    t.is((await agentEvents(service.pool, end.memberId)).at(-1), 'on_call>available:system');
  }
});
