/**
 * A caller's wait in a queue (engine/calls/steps/queue/wait.ts) driven through its two interfaces, with test doubles of our
 * own: the call it waits on (`QueueCall`: its ring rounds recorded and ended by the test) and the distributor's
 * watch (`QueueWatch`: the test tells the wait what the distributor would). PostgreSQL and distribution are real.
 * What it pins: an offer is rung once, however the wait hears of it: read after a notice, then handed over late by
 * the distribution that made it, it is not rung again once its round is over.
 */
import test from 'ava';
import { registerDevice } from '../../../../../core/devices/devices.ts';
import { entryById, queueCallsEnded } from '../../../../../core/queues/entries.ts';
import { distributeMany } from '../../../../../core/queues/distribution.ts';
import { createQueue } from '../../../../../core/queues/queues.ts';
import type { QueueCall } from '../../../../../engine/calls/control.ts';
import { waitInQueue } from '../../../../../engine/calls/steps/queue/wait.ts';
import type { QueuedRound } from '../../../../../engine/calls/steps/ring/round.ts';
import type { CallServices, EntryOffer, QueueWatch } from '../../../../../engine/calls/services.ts';
import { PortPool } from '../../../../../engine/media/ports.ts';
import { RtpEndpoint } from '../../../../../engine/media/rtp.ts';
import { makeAvailable, newMember } from '../../../../helpers/contact-center.ts';
import { liveCall, startService, type TestService, workspaceWithUser } from '../../../../helpers/service.ts';
import { until } from '../../../../helpers/until.ts';
import { loopbackCarrier } from '../../../../helpers/media-peer.ts';

let service: TestService;

test.before(async () => {
  service = await startService({}, ['api']);
});

test.after.always(async () => {
  await service?.close();
});

/** A ring round the test ends: its targets, and its end (nobody answered). */
interface Round {
  memberIds: string[];
  end(): void;
}

test('an offer read after its notice, then handed over late, is rung once; the next offer is rung', async (t) => {
  const setup = await workspaceWithUser(service);
  const workspaceId = setup.workspace.id as string;
  const agents = [await newMember(service.pool, workspaceId), await newMember(service.pool, workspaceId)];
  for (const memberId of agents) {
    await registerDevice(service.pool, workspaceId, { memberId }, { kind: 'browser', name: null, clientId: null });
  }
  const [first, second] = agents as [string, string];
  const queue = await createQueue(service.pool, workspaceId, {
    name: 'Support',
    strategy: 'longest_idle',
    wrapUpSecs: 0,
    memberIds: agents,
  });

  // The distributor's side: what the wait watches, told by the test.
  let tell: (offered?: EntryOffer) => void = () => {};
  let entryId: string | undefined;
  const watch: QueueWatch = {
    watch(id, _queueId, onChange) {
      entryId = id;
      tell = onChange;
      return () => {};
    },
    callEnded: (end) => queueCallsEnded(service.pool, [end]),
  };
  // The call's side: each ring round recorded and left ringing until the test ends it.
  const rounds: Round[] = [];
  const over = new AbortController();
  const hooks: (() => Promise<void>)[] = [];
  const base = 22000 + 2 * Math.floor(Math.random() * 4500);
  const media = await RtpEndpoint.open(new PortPool(base, base + 9), '127.0.0.1', { peer: loopbackCarrier });
  t.teardown(() => media.close());
  const row = await liveCall(service.pool, setup, { engineOwner: 'engine-test' });
  const call: QueueCall = {
    callId: row.id,
    workspaceId,
    fromNumber: row.from_number,
    callerMedia: () => media,
    over: over.signal,
    onCallerKeys: () => () => {},
    ringOffer: (targets, _timeoutMs, queued: QueuedRound) =>
      new Promise<undefined>((resolve) => {
        queued.waitAudio(new AbortController().signal);
        rounds.push({
          memberIds: targets.map((target) => ('memberId' in target ? target.memberId : '')),
          end: () => resolve(undefined),
        });
      }),
    beforeEnd: (hook) => void hooks.push(hook),
    say: async () => {},
    releaseCaller: async () => {},
    dialBack: async () => false,
    dropCaller: async () => {},
    hangup: async () => over.abort(),
  };
  const log = { info: () => {}, warn: () => {}, error: () => {}, debug: () => {} };
  const services = { pool: service.pool, queues: watch, owner: 'engine-test', log } as unknown as CallServices;
  const waiting = waitInQueue(services, call, {
    queueId: queue.id,
    maxWaitMs: 600_000,
    offerCallback: false,
    priority: 0,
  });
  const entry = await until('the entry made and watched', () => entryId);

  // The first agent is offered the entry; the wait hears of it by a notice and reads it.
  await makeAvailable(service.pool, workspaceId, [first]);
  const [offer] = await distributeMany(service.pool, queue.id, 1);
  t.deepEqual(offer?.memberIds, [first]);
  tell();
  const firstRound = await until('the offer rung', () => rounds[0]);
  t.deepEqual(firstRound.memberIds, [first]);
  // The distribution's handover comes late, while that offer rings. The second agent signs in meanwhile (idle longer
  // than the first will be once released); nobody answers the first offer.
  tell({ offeredAt: offer?.entry.offered_at as Date, memberIds: [first] });
  await makeAvailable(service.pool, workspaceId, [second]);
  firstRound.end();
  await until('the entry back in line', async () =>
    (await entryById(service.pool, entry))?.state === 'waiting' ? true : undefined,
  );

  // The second agent, idle longest, is offered it and the offer handed over: the next round rings them, not the first
  // offer again.
  const [next] = await distributeMany(service.pool, queue.id, 1);
  t.deepEqual(next?.memberIds, [second]);
  tell({ offeredAt: next?.entry.offered_at as Date, memberIds: [second] });
  const secondRound = await until('the next offer rung', () => rounds[1]);
  t.deepEqual(secondRound.memberIds, [second]);
  t.is(rounds.length, 2);

  over.abort();
  secondRound.end();
  t.is(await waiting, 'ended');
  for (const hook of hooks) await hook();
  t.is((await entryById(service.pool, entry))?.state, 'abandoned');
});
