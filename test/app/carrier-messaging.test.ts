/**
 * `switchboard carriers messaging` (core/carriers/messaging.ts, docs/messaging.md "Carriers speak SMPP 3.4"): a
 * carrier's SMPP account set with its password sealed (never shown, never stored as given), read back opened for the
 * engine, checked against SMPP 3.4's field lengths, removed with `--off`; a carrier that does not exist is refused.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { messagingCarriers } from '../../core/carriers/messaging.ts';
import { loadSigningKeys } from '../../core/service-secret.ts';
import { runCli } from '../helpers/cli.ts';
import { startService, type TestService } from '../helpers/service.ts';

let service: TestService;

test.before(async () => {
  service = await startService({}, ['api']);
});

test.after.always(async () => {
  await service?.close();
});

test('an SMPP account is set sealed, read back opened, checked, and removed', async (t) => {
  const name = `smsc-${randomUUID().slice(0, 8)}`;
  const added = await runCli(service.databaseUrl, ['carriers', 'add', name, '--address', '203.0.113.9']);
  t.is(added.code, 0, added.stderr);
  const password = 'Zq7!xK2p';
  const set = await runCli(service.databaseUrl, [
    'carriers',
    'messaging',
    name,
    '--smpp-host',
    'smsc.example.net',
    '--system-id',
    'switchboard',
    '--password',
    password,
    '--tls',
    '--throughput',
    '50',
  ]);
  t.is(set.code, 0, set.stderr);
  t.false(set.stdout.includes(password), 'the password is not shown');
  t.deepEqual(JSON.parse(set.stdout), {
    name,
    messaging: {
      host: 'smsc.example.net',
      port: 3550,
      systemId: 'switchboard',
      systemType: '',
      tls: true,
      throughput: 50,
      hasPassword: true,
    },
  });
  const stored = await service.pool.query<{ messaging: unknown }>('SELECT messaging FROM carriers WHERE name = $1', [
    name,
  ]);
  t.false(JSON.stringify(stored.rows[0]?.messaging).includes(password), 'stored sealed');
  const keys = await loadSigningKeys(service.pool, undefined);
  const found = (await messagingCarriers(service.pool, keys.carrierSecrets)).find((carrier) => carrier.name === name);
  t.like(found?.settings, { host: 'smsc.example.net', password, systemId: 'switchboard', tls: true });

  for (const [args, message] of [
    [['--smpp-host', 'smsc.example.net', '--system-id', 'x'.repeat(16), '--password', 'p'], /system-id/],
    [['--smpp-host', 'smsc.example.net', '--system-id', 's', '--password', 'longer-than-8'], /password/],
    [['--smpp-host', 'not a host', '--system-id', 's', '--password', 'p'], /smpp-host/],
    [['--smpp-host', 'h.example', '--system-id', 's', '--password', 'p', '--smpp-port', '70000'], /smpp-port/],
    [['--smpp-host', 'h.example', '--system-id', 's', '--password', 'p', '--throughput', 'many'], /throughput/],
    [['--smpp-host', 'h.example', '--system-id', 's'], /required/],
  ] as const) {
    const refused = await runCli(service.databaseUrl, ['carriers', 'messaging', name, ...args]);
    t.is(refused.code, 2, refused.stdout);
    t.regex(refused.stderr, message);
  }
  const unknown = await runCli(service.databaseUrl, ['carriers', 'messaging', 'nobody-here', '--off']);
  t.is(unknown.code, 2);
  t.regex(unknown.stderr, /no carrier "nobody-here"/);

  const off = await runCli(service.databaseUrl, ['carriers', 'messaging', name, '--off']);
  t.is(off.code, 0, off.stderr);
  t.deepEqual(JSON.parse(off.stdout), { name, messaging: null });
  t.false((await messagingCarriers(service.pool, keys.carrierSecrets)).some((carrier) => carrier.name === name));
});
