/**
 * Carriers' messaging settings changed while the engine runs (engine/messaging/links.ts, docs/messaging.md "As
 * built"): `switchboard carriers messaging` (the command itself, on the test's database) announces the change, and
 * the running links follow it without a restart: settings added start a link that binds, a changed password
 * rebinds with the new one, `--off` unbinds. A change written without a notice is found by the periodic re-read.
 * The `smpp` package's server plays the carrier (test/helpers/smsc.ts). Also the engines' message sweep runs
 * periodically (engine/messaging/sweep.ts).
 */
import { once } from 'node:events';
import test from 'ava';
import pg from 'pg';
import type { PDU } from 'smpp';
import { Registry } from 'prom-client';
import { addCarrier } from '../../../core/carriers/carriers.ts';
import { setCarrierMessaging } from '../../../core/carriers/messaging.ts';
import { loadSigningKeys } from '../../../core/service-secret.ts';
import { startMessagingLinks } from '../../../engine/messaging/links.ts';
import { MessagingSweep } from '../../../engine/messaging/sweep.ts';
import { runCli } from '../../helpers/cli.ts';
import { freshDatabase, type TestDatabase } from '../../helpers/database.ts';
import { MemoryLinkStore } from '../../helpers/message-link-store.ts';
import { TestSmsc } from '../../helpers/smsc.ts';

let database: TestDatabase;
let pool: pg.Pool;
test.before(async () => {
  database = await freshDatabase();
  pool = new pg.Pool({ connectionString: database.url });
});
test.after.always(async () => {
  await pool?.end();
  await database?.drop();
});

const quiet = { info: () => {}, warn: () => {} };
const timing = { backoff: { firstMs: 20, maxMs: 100 }, responseTimeoutMs: 2_000, leadershipRetryMs: 50 };

/** The next bind with `password` (which the SMSC accepts when it is the one it expects). */
function nextBind(smsc: TestSmsc, password: string): Promise<PDU> {
  return new Promise((resolve) => {
    const listener = (pdu: PDU) => {
      if (pdu.password !== password) return;
      smsc.off('bind', listener);
      resolve(pdu);
    };
    smsc.on('bind', listener);
  });
}

test.serial('the command’s settings added, changed and removed are followed by the running links', async (t) => {
  const credentials = { systemId: 'switchboard', password: 'first-1' };
  const smsc = await TestSmsc.start(credentials);
  const carrier = 'smsc-live';
  const keys = await loadSigningKeys(pool, undefined);
  await addCarrier(pool, keys.carrierSecrets, { name: carrier, address: '127.0.0.1' });
  const links = await startMessagingLinks({
    pool,
    databaseUrl: database.url,
    carrierSecrets: keys.carrierSecrets,
    store: new MemoryLinkStore(),
    log: quiet,
    metrics: new Registry(),
    timing,
    // Only the command's notice can bring the changes within the test.
    rereadMs: 3_600_000,
    sweepEveryMs: null,
  });
  t.teardown(async () => {
    await links.close();
    await smsc.close();
  });
  t.deepEqual(links.links, []);
  const messaging = (password: string) =>
    runCli(database.url, [
      'carriers',
      'messaging',
      carrier,
      '--smpp-host',
      '127.0.0.1',
      '--smpp-port',
      String(smsc.port),
      '--system-id',
      'switchboard',
      '--password',
      password,
    ]);

  let bind = nextBind(smsc, 'first-1');
  const set = await messaging('first-1');
  t.is(set.code, 0, set.stderr);
  t.is((await bind).password, 'first-1', 'settings added after start: a link binds');
  t.deepEqual(
    links.links.map((link) => link.carrier),
    [carrier],
  );

  credentials.password = 'second-2';
  const unbound = once(smsc, 'unbind');
  bind = nextBind(smsc, 'second-2');
  const changed = await messaging('second-2');
  t.is(changed.code, 0, changed.stderr);
  await unbound;
  t.is((await bind).password, 'second-2', 'a changed password: unbound, then bound with the new one');
  t.is(smsc.sessions.length, 1);
  t.deepEqual(
    smsc.binds.map((pdu) => pdu.password),
    ['first-1', 'second-2'],
  );

  const unbinding = once(smsc, 'unbind');
  const off = await runCli(database.url, ['carriers', 'messaging', carrier, '--off']);
  t.is(off.code, 0, off.stderr);
  await unbinding;
  t.deepEqual(links.links, [], '--off: the link is closed');
  if (smsc.sessions.length > 0) await once(smsc, 'closed');
  t.is(smsc.sessions.length, 0);
});

test.serial('settings written without a notice are found by the periodic re-read', async (t) => {
  const smsc = await TestSmsc.start();
  const carrier = 'smsc-quiet';
  const keys = await loadSigningKeys(pool, undefined);
  await addCarrier(pool, keys.carrierSecrets, { name: carrier, address: '127.0.0.2' });
  const links = await startMessagingLinks({
    pool,
    databaseUrl: database.url,
    carrierSecrets: keys.carrierSecrets,
    store: new MemoryLinkStore(),
    log: quiet,
    metrics: new Registry(),
    timing,
    rereadMs: 100,
    sweepEveryMs: null,
  });
  t.teardown(async () => {
    await links.close();
    await smsc.close();
  });
  const changes = once(links, 'changed');
  const bind = nextBind(smsc, 'secret');
  await setCarrierMessaging(pool, keys.carrierSecrets, carrier, {
    host: '127.0.0.1',
    port: smsc.port,
    systemId: 'switchboard',
    password: 'secret',
  });
  t.deepEqual(await changes, [{ started: [carrier], replaced: [], closed: [] }]);
  t.is((await bind).password, 'secret');
});

test('every engine sweeps the message records periodically', async (t) => {
  const sweep = new MessagingSweep({ pool, log: quiet, everyMs: 20 });
  t.teardown(() => sweep.close());
  let sweeps = 0;
  const twice = new Promise<void>((resolve) =>
    sweep.on('swept', () => {
      sweeps += 1;
      if (sweeps === 2) resolve();
    }),
  );
  sweep.start();
  await twice;
  t.is(sweeps, 2);
});
