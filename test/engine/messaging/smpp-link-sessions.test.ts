/**
 * A carrier's SMPP link's sessions (engine/messaging/link.ts, docs/messaging.md): binds refused and retried after a
 * backoff, a carrier dropping the connection mid-window (nothing lost), enquire_link both ways, TLS, and one leader
 * per carrier across links through PostgreSQL advisory locks (a real server; the leader's connection is terminated
 * by PostgreSQL itself). The `smpp` package's server plays the carrier (test/helpers/smsc.ts).
 */
import { once } from 'node:events';
import test from 'ava';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { Registry } from 'prom-client';
import { addCarrier } from '../../../core/carriers/carriers.ts';
import { setCarrierMessaging } from '../../../core/carriers/messaging.ts';
import { startMessagingLinks } from '../../../engine/messaging/links.ts';
import { leadershipKey } from '../../../engine/messaging/leadership.ts';
import { freshDatabase, type TestDatabase } from '../../helpers/database.ts';
import { MemoryLinkStore } from '../../helpers/message-link-store.ts';
import { linkTo, metricValue, type Submitted, TestSmsc } from '../../helpers/smsc.ts';
import { sleep } from '../../helpers/until.ts';

let database: TestDatabase;
test.before(async () => {
  database = await freshDatabase();
});
test.after.always(async () => {
  await database.drop();
});

let carriers = 0;
const newCarrier = () => `carrier-${(carriers += 1)}`;

test('a refused bind is tried again after the backoff, then the link binds', async (t) => {
  const smsc = await TestSmsc.start({ refuseBinds: 2 });
  const store = new MemoryLinkStore();
  const carrier = newCarrier();
  const { link, registry } = linkTo(smsc, { carrier, databaseUrl: database.url, store });
  const delays: number[] = [];
  link.on('retrying', (delayMs) => delays.push(delayMs));
  t.teardown(async () => {
    await link.close();
    await smsc.close();
  });
  const binding = once(link, 'bound');
  link.start();
  await binding;
  t.is(smsc.binds.length, 3);
  // 20 ms doubling, half fixed and half jitter (0.5 here): 15, then 30.
  t.deepEqual(delays, [15, 30]);
  t.is(await metricValue(registry, 'switchboard_smpp_reconnects_total', { carrier }), 2);
  t.is(await metricValue(registry, 'switchboard_smpp_sessions', { carrier }), 1);
});

test('the carrier dropping the connection mid-window: the parts are put back and sent again, none lost', async (t) => {
  const smsc = await TestSmsc.start();
  const store = new MemoryLinkStore();
  const carrier = newCarrier();
  const { link, registry } = linkTo(smsc, { carrier, databaseUrl: database.url, store });
  t.teardown(async () => {
    await link.close();
    await smsc.close();
  });
  smsc.answerAtOnce = false;
  let dropped = false;
  const held: Submitted[] = [];
  smsc.on('submit', (submitted) => {
    if (dropped) return submitted.answer();
    held.push(submitted);
    if (held.length < 10) return;
    // Three answered, then the connection goes with seven unanswered.
    for (const answered of held.slice(0, 3)) answered.answer();
    dropped = true;
    setTimeout(() => submitted.session.destroy(), 50);
  });
  const binding = once(link, 'bound');
  link.start();
  await binding;
  const parts = store.add(carrier, 10);
  const requeued = store.next((call) => call.call === 'requeueSubmitted' && call.count > 0);
  await store.settled(carrier);
  t.like(await requeued, { count: 7 });
  t.true(parts.every((part) => store.state(part.id) === 'acknowledged'));
  t.is(smsc.binds.length, 2);
  t.is(smsc.submits.length, 17);
  t.is(await metricValue(registry, 'switchboard_sms_parts_total', { result: 'unanswered' }), 7);
});

test('enquire_link is answered, sent every period, and a session whose answer does not come is made again', async (t) => {
  const smsc = await TestSmsc.start();
  const store = new MemoryLinkStore();
  const { link } = linkTo(smsc, {
    carrier: newCarrier(),
    databaseUrl: database.url,
    store,
    timing: { enquireLinkMs: 100, responseTimeoutMs: 200 },
  });
  t.teardown(async () => {
    await link.close();
    await smsc.close();
  });
  const binding = once(link, 'bound');
  link.start();
  await binding;
  t.is((await smsc.request('enquire_link')).command_status, 0);
  await once(smsc, 'enquireLink');
  smsc.answerEnquireLink = false;
  const unbound = once(link, 'unbound');
  const rebound = once(link, 'bound');
  await unbound;
  t.true(store.calls.some((call) => call.call === 'requeueSubmitted'));
  smsc.answerEnquireLink = true;
  await rebound;
  t.is(smsc.binds.length, 2);
});

test('binds over TLS when the carrier’s settings say so, and unbinds when closed', async (t) => {
  const smsc = await TestSmsc.start({ tls: true });
  const store = new MemoryLinkStore();
  const carrier = newCarrier();
  const { link } = linkTo(smsc, {
    carrier,
    databaseUrl: database.url,
    store,
    settings: { host: 'localhost', tls: true },
  });
  t.teardown(() => smsc.close());
  const binding = once(link, 'bound');
  link.start();
  await binding;
  store.add(carrier, 2);
  await store.settled(carrier);
  t.is(smsc.submits.length, 2);
  const unbind = once(smsc, 'unbind');
  await link.close();
  await unbind;
});

/** The PostgreSQL connection holding an advisory lock in the test's database. */
/**
 * The backends holding the carrier's leadership lock. Only that lock: the other tests of this file run at the same
 * time on this database with links of their own carriers, whose locks are not this test's to cut.
 */
async function lockHolders(client: pg.Client, carrier: string): Promise<number[]> {
  // A bigint advisory key shows in pg_locks as its high and low 32 bits (classid, objid), objsubid 1.
  const key = BigInt.asUintN(64, BigInt(leadershipKey(carrier)));
  const result = await client.query<{ pid: number }>(
    `SELECT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database
      WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database()
        AND l.classid = $1::oid AND l.objid = $2::oid AND l.objsubid = 1`,
    [String(key >> 32n), String(key & 0xffffffffn)],
  );
  return result.rows.map((row) => row.pid);
}

test('two links of one carrier: one binds; when its database connection goes, it unbinds and the other binds', async (t) => {
  const smsc = await TestSmsc.start();
  const store = new MemoryLinkStore();
  const carrier = newCarrier();
  const { link: first, metrics, registry } = linkTo(smsc, { carrier, databaseUrl: database.url, store });
  const { link: second } = linkTo(smsc, { carrier, databaseUrl: database.url, store, metrics });
  const admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
  t.teardown(async () => {
    await Promise.all([first.close(), second.close()]);
    await admin.end();
    await smsc.close();
  });
  const firstBound = once(first, 'bound');
  first.start();
  await firstBound;
  let secondBound = false;
  second.on('bound', () => (secondBound = true));
  second.start();
  // The second tries the lock every 50 ms: ten tries, none may bind.
  await sleep(500);
  t.false(secondBound);
  t.is(smsc.binds.length, 1);
  t.is(await metricValue(registry, 'switchboard_smpp_leader', { carrier }), 1);
  const [holder] = await lockHolders(admin, carrier);
  t.not(holder, undefined);
  const firstUnbinds = once(smsc, 'unbind');
  const takesOver = once(second, 'bound');
  await admin.query('SELECT pg_terminate_backend($1)', [holder]);
  await firstUnbinds;
  await takesOver;
  t.is(smsc.binds.length, 2);
  t.is(smsc.sessions.length, 1);
  // The first is a candidate again, and stays one while the second leads.
  await sleep(300);
  t.is(smsc.binds.length, 2);
  store.add(carrier, 3);
  await store.settled(carrier);
});

test('startMessagingLinks opens a link for each carrier with messaging settings, and closes them', async (t) => {
  const smsc = await TestSmsc.start();
  const pool = new pg.Pool({ connectionString: database.url });
  const secrets = randomBytes(32);
  t.teardown(async () => {
    await pool.end();
    await smsc.close();
  });
  const carrier = newCarrier();
  await addCarrier(pool, secrets, { name: carrier, address: '127.0.0.1' });
  await addCarrier(pool, secrets, { name: newCarrier(), address: '127.0.0.2' });
  await setCarrierMessaging(pool, secrets, carrier, {
    host: '127.0.0.1',
    port: smsc.port,
    systemId: 'switchboard',
    password: 'secret',
  });
  const store = new MemoryLinkStore();
  const binding = once(smsc, 'bind');
  const links = await startMessagingLinks({
    pool,
    databaseUrl: database.url,
    carrierSecrets: secrets,
    store,
    log: { info: () => {}, warn: () => {} },
    metrics: new Registry(),
  });
  t.deepEqual(
    links.links.map((link) => link.carrier),
    [carrier],
  );
  t.like(await binding, [{ system_id: 'switchboard', password: 'secret', system_type: '' }]);
  const unbind = once(smsc, 'unbind');
  await links.close();
  await unbind;
});
