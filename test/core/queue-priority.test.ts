/**
 * Entry priorities and a waiting caller's place in line, against PostgreSQL (core/queues/entries.ts,
 * core/queues/figures.ts; docs/contact-center.md): a higher-priority caller who came later is offered first, and
 * `queue.entered` carries the priority; the position counts the entries still in line ahead (higher priority, or the
 * same and earlier), and the expected wait follows the queue's answers of the last 15 minutes.
 */
import test from 'ava';
import { registerDevice } from '../../core/devices/devices.ts';
import { answerEntry, enterQueue, entryById, leaveQueue, queueCallsEnded } from '../../core/queues/entries.ts';
import { distribute } from '../../core/queues/distribution.ts';
import { answerRateWindowSecs, entryPlace, expectedWaitSecs } from '../../core/queues/figures.ts';
import { createQueue } from '../../core/queues/queues.ts';
import { announcementText } from '../../engine/calls/steps/queue/announcements.ts';
import { makeAvailable, newMember } from '../helpers/contact-center.ts';
import { liveCall, startService, type TestService, workspaceWithUser } from '../helpers/service.ts';

let service: TestService;

test.before(async () => {
  service = await startService({}, ['api']);
});

test.after.always(async () => {
  await service?.close();
});

/** A workspace with a queue of one agent (offline until `available`) with a live browser device. */
async function oneAgentQueue() {
  const setup = await workspaceWithUser(service);
  const workspaceId = setup.workspace.id as string;
  const member = { id: await newMember(service.pool, workspaceId) };
  await registerDevice(
    service.pool,
    workspaceId,
    { memberId: member.id },
    { kind: 'browser', name: null, clientId: null },
  );
  const queue = await createQueue(service.pool, workspaceId, {
    name: 'Support',
    strategy: 'longest_idle',
    wrapUpSecs: 0,
    memberIds: [member.id],
  });
  const enter = async (priority?: number) => {
    const call = await liveCall(service.pool, setup);
    const entry = await enterQueue(service.pool, {
      callId: call.id,
      queueId: queue.id,
      engineOwner: 'engine-test',
      ...(priority === undefined ? {} : { priority }),
    });
    if (entry === undefined) throw new Error('no entry');
    return entry;
  };
  const available = async () => {
    await makeAvailable(service.pool, workspaceId, [member.id]);
  };
  /** The agent answers `entryId` (offered to them) and the call ends at once: the agent is available again. */
  const answer = async (entryId: string) => {
    if (!(await answerEntry(service.pool, entryId, member.id))) throw new Error('the agent could not answer');
    await queueCallsEnded(service.pool, [{ workspaceId, memberId: member.id, entryId, wrapUpSecs: 0 }]);
  };
  return { queue, memberId: member.id, enter, available, answer };
}

async function enteredPriority(callId: string): Promise<unknown> {
  const result = await service.pool.query<{ priority: unknown }>(
    `SELECT (payload::jsonb)->'queue'->'priority' AS priority FROM events
      WHERE stream_key = $1 AND type = 'queue.entered'`,
    [`call:${callId}`],
  );
  return result.rows[0]?.priority;
}

test('a higher-priority caller who came later is offered first; queue.entered carries each priority', async (t) => {
  const center = await oneAgentQueue();
  const first = await center.enter();
  const low = await center.enter(-5);
  const urgent = await center.enter(10);
  t.is(first.priority, 0, 'the default priority');
  t.is(await enteredPriority(first.call_id), 0);
  t.is(await enteredPriority(low.call_id), -5);
  t.is(await enteredPriority(urgent.call_id), 10);

  // Places in line: the urgent caller first although they came last, the negative priority last.
  t.is((await entryPlace(service.pool, urgent.id))?.position, 1);
  t.is((await entryPlace(service.pool, first.id))?.position, 2);
  t.is((await entryPlace(service.pool, low.id))?.position, 3);

  await center.available();
  const offered = await distribute(service.pool, center.queue.id);
  t.is(offered?.entry.id, urgent.id, 'the urgent caller is offered first');
  t.is(offered?.entry.priority, 10);
  // Still in line until answered: the offered entry counts ahead of the others.
  t.is((await entryPlace(service.pool, first.id))?.position, 2);
  await center.answer(urgent.id);
  t.is((await entryPlace(service.pool, first.id))?.position, 1, 'one fewer ahead once the urgent one left');
  t.is((await entryPlace(service.pool, low.id))?.position, 2);

  t.is((await distribute(service.pool, center.queue.id))?.entry.id, first.id, 'then the one who came first');
  await center.answer(first.id);
  t.is((await distribute(service.pool, center.queue.id))?.entry.id, low.id, 'the negative priority last');
  t.is((await entryById(service.pool, low.id))?.state, 'offered');
});

test('same priority: the earlier caller is ahead; an entry that left is not counted', async (t) => {
  const center = await oneAgentQueue();
  const a = await center.enter(3);
  const b = await center.enter(3);
  const c = await center.enter(3);
  t.is((await entryPlace(service.pool, c.id))?.position, 3);
  await leaveQueue(service.pool, a.id, 'abandoned', 3);
  t.is((await entryPlace(service.pool, b.id))?.position, 1);
  t.is((await entryPlace(service.pool, c.id))?.position, 2);
  t.is((await entryPlace(service.pool, b.id))?.state, 'waiting');
});

test('the expected wait: none without answers in the last 15 minutes, then position × window ÷ answered', async (t) => {
  const center = await oneAgentQueue();
  const settings = { announce_position: true, announce_expected_wait: true };
  const waiting = await center.enter();
  const place = await entryPlace(service.pool, waiting.id);
  t.is(place?.answered_recently, 0);
  t.is(expectedWaitSecs(1, 0), undefined);
  t.is(announcementText(settings, 1, 0), 'You are number 1 in line.', 'no estimate without history');
  t.is(announcementText({ ...settings, announce_position: false }, 1, 0), undefined, 'nothing to say');

  // Three callers answered in the window (one abandoned does not count): each place is 5 minutes' worth.
  await center.available();
  for (let index = 0; index < 4; index += 1) {
    const entry = await center.enter(50);
    if (index === 3) {
      await leaveQueue(service.pool, entry.id, 'abandoned', 3);
      continue;
    }
    t.is((await distribute(service.pool, center.queue.id))?.entry.id, entry.id);
    await center.answer(entry.id);
  }
  const later = await center.enter();
  const now = await entryPlace(service.pool, later.id);
  t.is(now?.answered_recently, 3);
  t.is(now?.position, 2);
  t.is(expectedWaitSecs(2, 3), (2 * answerRateWindowSecs) / 3);
  t.is(
    announcementText(settings, now?.position ?? 0, now?.answered_recently ?? 0),
    'You are number 2 in line. Your expected wait is about 10 minutes.',
  );
  t.is(announcementText(settings, 1, 900), 'You are number 1 in line. Your expected wait is less than a minute.');
  t.is(announcementText(settings, 1, 15), 'You are number 1 in line. Your expected wait is about 1 minute.');
});
