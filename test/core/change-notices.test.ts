/**
 * Change notices (core/change-notices.ts): every listener of a process on one database shares one LISTEN connection,
 * hears only its channel, is told when the connection drops and when it listens again, and the connection ends with
 * its last listener. Against a real PostgreSQL: the point is what the server sees.
 */
import test from 'ava';
import pg from 'pg';
import { ChangeListener } from '../../core/change-notices.ts';
import { freshDatabase, type TestDatabase } from '../helpers/database.ts';
import { until } from '../helpers/until.ts';

let database: TestDatabase;
let admin: pg.Client;
let databaseName: string;

test.before(async () => {
  database = await freshDatabase({ migrate: false });
  databaseName = new URL(database.url).pathname.slice(1);
  admin = new pg.Client({ connectionString: database.url });
  await admin.connect();
});
test.after.always(async () => {
  await admin.end();
  await database.drop();
});

/** How many LISTEN connections are open on the test's database. */
async function listenConnections(): Promise<number> {
  const found = await admin.query<{ count: number }>(
    `SELECT count(*)::int AS count FROM pg_stat_activity WHERE datname = $1 AND application_name = 'switchboard-listener'`,
    [databaseName],
  );
  return found.rows[0]?.count ?? 0;
}

/** A listener that keeps what it heard and how often it was reset. */
function recorder(channel: string, onNotice: (payload: string) => void = () => {}) {
  const heard: string[] = [];
  const resets = { count: 0 };
  const listener = new ChangeListener(
    database.url,
    channel,
    (payload) => {
      heard.push(payload);
      onNotice(payload);
    },
    () => (resets.count += 1),
    () => {},
  );
  return { listener, heard, resets };
}

const notify = (channel: string, payload: string) => admin.query('SELECT pg_notify($1, $2)', [channel, payload]);

test.serial('listeners on several channels share one connection, each hears its own channel only', async (t) => {
  const calls = recorder('sb_test_calls');
  const offers = recorder('sb_test_offers');
  const moreOffers = recorder('sb_test_offers');
  await calls.listener.start();
  // A listener started once the connection is up listens before its start resolves.
  await Promise.all([offers.listener.start(), moreOffers.listener.start()]);
  t.is(await listenConnections(), 1);
  t.true(calls.listener.listening && offers.listener.listening && moreOffers.listener.listening);

  await notify('sb_test_offers', 'offer 1');
  await notify('sb_test_calls', 'call 1');
  await notify('sb_test_elsewhere', 'nobody');
  await until('both offers listeners heard it', () =>
    offers.heard.length === 1 && moreOffers.heard.length === 1 && calls.heard.length === 1 ? true : undefined,
  );
  t.deepEqual(offers.heard, ['offer 1']);
  t.deepEqual(moreOffers.heard, ['offer 1']);
  t.deepEqual(calls.heard, ['call 1']);
  // Started: each was reset once, as it began listening (a cache starts empty).
  t.is(calls.resets.count, 1);

  // One listener gone: the others still hear; the last gone ends the connection.
  await offers.listener.close();
  await notify('sb_test_offers', 'offer 2');
  await until('the other offers listener heard it', () => (moreOffers.heard.length === 2 ? true : undefined));
  t.deepEqual(offers.heard, ['offer 1']);
  t.is(await listenConnections(), 1);
  await Promise.all([calls.listener.close(), moreOffers.listener.close()]);
  await until('the connection ended', async () => ((await listenConnections()) === 0 ? true : undefined));
  t.pass();
});

test.serial('a lost connection resets every listener, then they listen again on a new one', async (t) => {
  const calls = recorder('sb_test_calls');
  const offers = recorder('sb_test_offers');
  await calls.listener.start();
  await offers.listener.start();
  t.teardown(() => Promise.all([calls.listener.close(), offers.listener.close()]));

  await admin.query(
    `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'switchboard-listener'`,
    [databaseName],
  );
  // Dropped: told with listening false; back: told again with listening true (notices may have been missed).
  await until('both listen again', () => (calls.resets.count === 3 && offers.resets.count === 3 ? true : undefined));
  t.true(calls.listener.listening && offers.listener.listening);
  t.is(await listenConnections(), 1);

  await notify('sb_test_calls', 'after');
  await notify('sb_test_offers', 'after');
  await until('both heard after the reconnect', () =>
    calls.heard.length === 1 && offers.heard.length === 1 ? true : undefined,
  );
  t.pass();
});

test.serial('a listener that throws on a notice neither silences the others nor drops the connection', async (t) => {
  const failing = recorder('sb_test_calls', () => {
    throw new Error('cannot take it');
  });
  const other = recorder('sb_test_calls');
  await failing.listener.start();
  await other.listener.start();
  t.teardown(() => Promise.all([failing.listener.close(), other.listener.close()]));

  await notify('sb_test_calls', 'one');
  await notify('sb_test_calls', 'two');
  await until('the other heard both', () => (other.heard.length === 2 ? true : undefined));
  t.deepEqual(failing.heard, ['one', 'two']);
  t.true(other.listener.listening);
  t.is(other.resets.count, 1);
});
