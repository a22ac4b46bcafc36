/**
 * The engine's queue distributor (engine/queue-distributor.ts; docs/contact-center.md, "Queue entries and
 * distribution"): an offer it makes for an entry this engine's call watches is handed to that wait with the offered
 * agent's ringable devices, read once for the whole commit, so the ring round reads nothing before its INVITEs; the
 * offer's own `offered` notice, which may come before or after the commit returns, does not make the wait read the
 * entry again.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import test from 'ava';
import { registerDevice, type DeviceKind } from '../../core/devices/devices.ts';
import { issueSipCredentials } from '../../core/devices/sip-credentials.ts';
import { enterQueue, leaveQueue } from '../../core/queues/entries.ts';
import { createQueue } from '../../core/routing/queues.ts';
import type { EntryOffer } from '../../engine/calls/services.ts';
import { QueueDistributor } from '../../engine/queue-distributor.ts';
import { bindDeskPhone, makeAvailable, newMember } from '../helpers/contact-center.ts';
import { until } from '../helpers/until.ts';
import { liveCall, startService, type TestService, workspaceWithUser } from '../helpers/service.ts';

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
