/**
 * The engine as a registrar of SIP devices (engine/sip/registrar.ts): credentials issued through the API, sipp
 * registering with digest (MD5: Debian's sipp 3.6.1 answers the first challenge and knows no other), a phone of ours
 * on a UDP socket for SHA-256 and the cases sipp cannot write, expiry on the engine's clock, and a storm of bad
 * credentials.
 *
 * One service (API and engine, challenges SHA-256 first as by default) and a second engine on the same database that
 * offers MD5 first, for sipp. Both go by one clock the tests move forward; the tests run one at a time.
 */
import { randomUUID } from 'node:crypto';
import dgram from 'node:dgram';
import test, { type ExecutionContext } from 'ava';
import { liveSipBindings, sweepExpiredSipBindings } from '../../../core/devices/sip-bindings.ts';
import { digestResponse } from '../../../engine/sip/digest.ts';
import { freeUdpPort } from '../../helpers/free-port.ts';
import { runSipp, startMd5FirstEngine } from '../../helpers/sipp.ts';
import { startService, type TestService, workspaceWithUser } from '../../helpers/service.ts';

let offsetMs = 0;
const clock = { now: () => new Date(Date.now() + offsetMs) };
let service: TestService;
let sipPort: number;
let md5Engine: Awaited<ReturnType<typeof startMd5FirstEngine>>;

test.before(async () => {
  service = await startService({}, ['api', 'engine'], { clock });
  sipPort = service.sipPort as number;
  md5Engine = await startMd5FirstEngine(service, clock);
});

test.after.always(async () => {
  await md5Engine?.close();
  await service?.close();
});

/** A `sip` device of a new workspace's user, with credentials issued through the API (operation 66). */
async function sipDevice(): Promise<{ id: string; username: string; password: string; token: string }> {
  const setup = await workspaceWithUser(service);
  const session = await service.request('POST', '/api/v1/sessions', {
    auth: setup.apiKey,
    body: { externalWorkspaceId: setup.workspace.externalWorkspaceId, externalUserId: 'alice', scopes: ['devices:*'] },
  });
  const token = session.body.token as string;
  const device = await service.request('POST', '/api/v1/devices', { auth: token, body: { kind: 'sip' } });
  if (device.status !== 201) throw new Error(`device: ${device.status} ${device.text}`);
  const issued = await service.request('POST', `/api/v1/devices/${device.body.id}/sip-credentials`, { auth: token });
  if (issued.status !== 201) throw new Error(`credentials: ${issued.status} ${issued.text}`);
  return { id: device.body.id, username: issued.body.username, password: issued.body.password, token };
}

interface SipAnswer {
  status: number;
  headers: string[];
  header(name: string): string[];
}

/** A phone on a UDP socket bound to `address`: sends requests, returns the final answer to each. */
async function phone(t: ExecutionContext, address = '127.0.0.1') {
  const socket = dgram.createSocket('udp4');
  t.teardown(() => socket.close());
  await new Promise<void>((resolve) => socket.bind(0, address, resolve));
  const port = socket.address().port;
  const waiting = new Map<string, (answer: SipAnswer) => void>();
  socket.on('message', (data) => {
    const [head = ''] = data.toString().split('\r\n\r\n');
    const [statusLine = '', ...headers] = head.split('\r\n');
    const status = Number(statusLine.split(' ')[1]);
    if (status < 200) return;
    const key = headers.find((line) => /^cseq:/i.test(line)) + '|' + headers.find((line) => /^call-id:/i.test(line));
    waiting.get(key)?.({
      status,
      headers,
      header: (name) =>
        headers
          .filter((line) => line.toLowerCase().startsWith(`${name.toLowerCase()}:`))
          .map((line) => line.slice(line.indexOf(':') + 1).trim()),
    });
    waiting.delete(key);
  });
  const callId = randomUUID();
  let cseq = 0;
  return {
    port,
    callId,
    /** One REGISTER (headers given as lines), its final answer. */
    register(
      username: string,
      lines: string[],
      options: { cseq?: number; requestUri?: string } = {},
    ): Promise<SipAnswer> {
      // An explicit CSeq (an old one) leaves the phone's own count where it was.
      const number = options.cseq ?? (cseq += 1);
      const message = [
        `REGISTER ${options.requestUri ?? `sip:127.0.0.1:${sipPort}`} SIP/2.0`,
        `Via: SIP/2.0/UDP ${address}:${port};branch=z9hG4bK${randomUUID()};rport`,
        `From: <sip:${username}@127.0.0.1>;tag=${randomUUID()}`,
        `To: <sip:${username}@127.0.0.1>`,
        `Call-ID: ${callId}`,
        `CSeq: ${number} REGISTER`,
        'Max-Forwards: 70',
        ...lines,
        'Content-Length: 0',
        '',
        '',
      ].join('\r\n');
      const key = `CSeq: ${number} REGISTER|Call-ID: ${callId}`;
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no answer to ${key}`)), 5000);
        waiting.set(key, (answer) => {
          clearTimeout(timer);
          resolve(answer);
        });
        socket.send(message, sipPort, '127.0.0.1');
      });
    },
  };
}

type Phone = Awaited<ReturnType<typeof phone>>;

/** The Authorization answering a 401's challenge for `algorithm` (or a wrong password's), signing `uri`. */
function authorization(
  challenges: string[],
  algorithm: 'MD5' | 'SHA-256',
  username: string,
  password: string,
  uri = `sip:127.0.0.1:${sipPort}`,
) {
  const challenge = challenges.find((value) => value.includes(`algorithm=${algorithm}`)) as string;
  const nonce = /nonce="([^"]+)"/.exec(challenge)?.[1] as string;
  const credentials = {
    username,
    realm: 'switchboard',
    nonce,
    uri,
    algorithm,
    ncText: '00000001',
    cnonce: randomUUID().slice(0, 8),
  };
  const response = digestResponse(credentials, 'REGISTER', password);
  return (
    `Authorization: Digest username="${username}", realm="switchboard", nonce="${nonce}", ` +
    `uri="${credentials.uri}", response="${response}", algorithm=${algorithm}, qop=auth, nc=00000001, ` +
    `cnonce="${credentials.cnonce}"`
  );
}

/** REGISTER, 401, REGISTER with credentials: the second answer. */
async function registerWith(
  sip: Phone,
  device: { username: string; password: string },
  lines: string[],
  algorithm: 'MD5' | 'SHA-256' = 'SHA-256',
): Promise<SipAnswer> {
  const challenged = await sip.register(device.username, lines);
  if (challenged.status !== 401) throw new Error(`expected 401, got ${challenged.status}`);
  const auth = authorization(challenged.header('www-authenticate'), algorithm, device.username, device.password);
  return sip.register(device.username, [...lines, auth]);
}

test.serial(
  'sipp registers with digest (MD5), a wrong password is refused, un-REGISTER removes the binding',
  async (t) => {
    const desk = await sipDevice();
    // One local port for every run: the contact (sipp's own address and port) is then the same each time.
    const localPort = String(await freeUdpPort());
    const sipp = (password: string, expires: string, status: string) =>
      runSipp({
        scenario: 'register-digest',
        sipPort: md5Engine.engine.sipPort,
        dialed: desk.username,
        replacements: { EXPIRES: expires, STATUS: status },
        extraArgs: ['-au', desk.username, '-ap', password, '-p', localPort],
        timeoutSeconds: 15,
      });
    const wrong = await sipp('not-the-password', '120', '403');
    t.is(wrong.code, 0, wrong.stderr + wrong.errors);
    t.deepEqual(await liveSipBindings(service.pool, desk.id, clock.now()), []);

    const registered = await sipp(desk.password, '120', '200');
    t.is(registered.code, 0, registered.stderr + registered.errors);
    const [binding, ...others] = await liveSipBindings(service.pool, desk.id, clock.now());
    t.is(others.length, 0);
    t.like(binding, { engineOwner: 'md5-first', source: { protocol: 'udp', address: '127.0.0.1' } });
    t.regex(binding?.contactUri ?? '', new RegExp(`^sip:${desk.username}@127\\.0\\.0\\.1:\\d+;transport=UDP$`, 'i'));
    const remaining = (binding?.expiresAt.getTime() ?? 0) - clock.now().getTime();
    t.true(remaining > 110_000 && remaining <= 120_000, String(remaining));

    t.is(binding?.source.port, Number(localPort));

    const unregistered = await sipp(desk.password, '0', '200');
    t.is(unregistered.code, 0, unregistered.stderr + unregistered.errors);
    t.deepEqual(await liveSipBindings(service.pool, desk.id, clock.now()), []);
  },
);

test.serial('SHA-256 first: bindings keep the packet source, refresh, 423, Expires 0 and * remove', async (t) => {
  const desk = await sipDevice();
  const sip = await phone(t);
  const contact = `Contact: <sip:${desk.username}@203.0.113.9:5062>`;
  const challenged = await sip.register(desk.username, [contact, 'Expires: 120']);
  t.is(challenged.status, 401);
  const challenges = challenged.header('www-authenticate');
  t.is(challenges.length, 2);
  t.regex(challenges[0] as string, /^Digest realm="switchboard", nonce="[^"]+", algorithm=SHA-256, qop="auth"$/);
  t.regex(challenges[1] as string, /algorithm=MD5/);

  const signed = authorization(challenges, 'SHA-256', desk.username, desk.password);
  const ok = await sip.register(desk.username, [contact, 'Expires: 120', signed]);
  t.is(ok.status, 200);
  t.deepEqual(ok.header('contact'), [`<sip:${desk.username}@203.0.113.9:5062>;expires=120`]);
  const [binding] = await liveSipBindings(service.pool, desk.id, clock.now());
  // The Contact's host is the device's word; INVITEs go where the REGISTER came from.
  t.deepEqual(binding?.source, { protocol: 'udp', address: '127.0.0.1', port: sip.port });

  // The same nonce count again is a replay: a fresh challenge.
  const replayed = await sip.register(desk.username, [contact, 'Expires: 120', signed]);
  t.is(replayed.status, 401);

  // A refresh, a second contact with its own expires; too brief is 423; far too long is cut to 3600.
  const refreshed = await registerWith(sip, desk, [contact, 'Expires: 300']);
  t.is(refreshed.status, 200);
  const brief = await registerWith(sip, desk, [`Contact: <sip:${desk.username}@203.0.113.9:5070>;expires=30`]);
  t.is(brief.status, 423);
  t.deepEqual(brief.header('min-expires'), ['60']);
  const second = await registerWith(sip, desk, [`Contact: <sip:${desk.username}@203.0.113.9:5070>;expires=999999`]);
  t.is(second.status, 200);
  t.deepEqual(
    second.header('contact').sort(),
    [
      `<sip:${desk.username}@203.0.113.9:5062>;expires=300`,
      `<sip:${desk.username}@203.0.113.9:5070>;expires=3600`,
    ].sort(),
  );

  // An older CSeq of the same Call-ID is out of order.
  const challengedAgain = await sip.register(desk.username, [contact]);
  const stale = await sip.register(
    desk.username,
    [contact, authorization(challengedAgain.header('www-authenticate'), 'SHA-256', desk.username, desk.password)],
    { cseq: 1 },
  );
  t.is(stale.status, 500);

  const removedOne = await registerWith(sip, desk, [contact, 'Expires: 0']);
  t.is(removedOne.status, 200);
  t.deepEqual(removedOne.header('contact'), [`<sip:${desk.username}@203.0.113.9:5070>;expires=3600`]);
  const starWithoutZero = await registerWith(sip, desk, ['Contact: *', 'Expires: 60']);
  t.is(starWithoutZero.status, 400);
  const removedAll = await registerWith(sip, desk, ['Contact: *', 'Expires: 0']);
  t.is(removedAll.status, 200);
  t.deepEqual(await liveSipBindings(service.pool, desk.id, clock.now()), []);
});

test.serial('credentials signed for another URI than the Request-URI are refused (400), binding nothing', async (t) => {
  const desk = await sipDevice();
  const sip = await phone(t);
  const contact = `Contact: <sip:${desk.username}@203.0.113.9:5062>`;
  for (const uri of [
    `sip:127.0.0.1:${sipPort + 1}`,
    `sip:other.example`,
    `sip:${desk.username}@127.0.0.1:${sipPort}`,
  ]) {
    const challenged = await sip.register(desk.username, [contact]);
    const signed = authorization(challenged.header('www-authenticate'), 'SHA-256', desk.username, desk.password, uri);
    const refused = await sip.register(desk.username, [contact, signed]);
    t.is(refused.status, 400, uri);
  }
  t.deepEqual(await liveSipBindings(service.pool, desk.id, clock.now()), []);
  // Scheme and host in another case name the same resource (RFC 3261 section 19.1.4).
  const challenged = await sip.register(desk.username, [contact]);
  const signed = authorization(
    challenged.header('www-authenticate'),
    'SHA-256',
    desk.username,
    desk.password,
    `SIP:127.0.0.1:${sipPort}`,
  );
  t.is((await sip.register(desk.username, [contact, signed])).status, 200);
  // A phone that names its own user in the Request-URI signs that URI.
  const requestUri = `sip:${desk.username}@127.0.0.1:${sipPort}`;
  const asked = await sip.register(desk.username, [contact], { requestUri });
  const own = authorization(asked.header('www-authenticate'), 'SHA-256', desk.username, desk.password, requestUri);
  t.is((await sip.register(desk.username, [contact, own], { requestUri })).status, 200);
  const bare = authorization(asked.header('www-authenticate'), 'SHA-256', desk.username, desk.password);
  t.is((await sip.register(desk.username, [contact, bare], { requestUri })).status, 400, 'not the URI without it');
});

test.serial('an expired binding is not live, and the sweep deletes it', async (t) => {
  const desk = await sipDevice();
  const sip = await phone(t);
  const ok = await registerWith(sip, desk, [`Contact: <sip:${desk.username}@127.0.0.1:${sip.port}>`, 'Expires: 60']);
  t.is(ok.status, 200);
  t.is((await liveSipBindings(service.pool, desk.id, clock.now())).length, 1);
  offsetMs += 61_000;
  t.deepEqual(await liveSipBindings(service.pool, desk.id, clock.now()), []);
  t.true((await sweepExpiredSipBindings(service.pool, clock.now())) >= 1);
  const rows = await service.pool.query('SELECT 1 FROM sip_bindings WHERE device_id = $1', [desk.id]);
  t.is(rows.rowCount, 0);
});

test.serial('new credentials and a removed device take the bindings with them', async (t) => {
  const desk = await sipDevice();
  const sip = await phone(t);
  const lines = [`Contact: <sip:${desk.username}@127.0.0.1:${sip.port}>`, 'Expires: 600'];
  t.is((await registerWith(sip, desk, lines)).status, 200);
  const again = await service.request('POST', `/api/v1/devices/${desk.id}/sip-credentials`, { auth: desk.token });
  t.is(again.status, 201);
  t.deepEqual(await liveSipBindings(service.pool, desk.id, clock.now()), []);
  // The old password no longer registers; the new one does.
  t.is((await registerWith(sip, desk, lines)).status, 403);
  const renewed = { username: again.body.username as string, password: again.body.password as string };
  t.is((await registerWith(sip, renewed, lines)).status, 200);
  t.is((await liveSipBindings(service.pool, desk.id, clock.now())).length, 1);
  const removed = await service.request('DELETE', `/api/v1/devices/${desk.id}`, { auth: desk.token });
  t.is(removed.status, 200);
  const rows = await service.pool.query('SELECT 1 FROM sip_bindings WHERE device_id = $1', [desk.id]);
  t.is(rows.rowCount, 0);
});

test.serial('a storm of bad REGISTERs is limited per address and username; others still register', async (t) => {
  const victim = await sipDevice();
  const other = await sipDevice();
  const attacker = await phone(t, '127.0.0.3');
  const challenged = await attacker.register(victim.username, ['Contact: <sip:x@127.0.0.3>']);
  const challenges = challenged.header('www-authenticate');
  const statuses: number[] = [];
  for (let index = 0; index < 200; index += 1) {
    const auth = authorization(challenges, 'SHA-256', victim.username, `guess-${index}`).replace(
      'nc=00000001',
      `nc=${(index + 1).toString(16).padStart(8, '0')}`,
    );
    statuses.push((await attacker.register(victim.username, ['Contact: <sip:x@127.0.0.3>', auth])).status);
  }
  t.deepEqual(statuses.slice(0, 10), Array(10).fill(403));
  t.deepEqual(statuses.slice(10), Array(190).fill(503));
  const limited = await attacker.register(victim.username, ['Contact: <sip:x@127.0.0.3>']);
  t.is(limited.status, 503);
  t.regex(limited.header('retry-after')[0] ?? '', /^\d+$/);

  // Another device from another address registers; the guessed username is held back everywhere for the window.
  const good = await phone(t, '127.0.0.1');
  t.is((await registerWith(good, other, [`Contact: <sip:${other.username}@127.0.0.1:${good.port}>`])).status, 200);
  const challengedVictim = await good.register(victim.username, ['Contact: <sip:v@127.0.0.1>']);
  const held = await good.register(victim.username, [
    'Contact: <sip:v@127.0.0.1>',
    authorization(challengedVictim.header('www-authenticate'), 'SHA-256', victim.username, victim.password),
  ]);
  t.is(held.status, 503);
  // After the window the right password works.
  offsetMs += 61_000;
  t.is((await registerWith(good, victim, ['Contact: <sip:v@127.0.0.1>'])).status, 200);

  const metrics = await service.request('GET', '/metrics');
  t.regex(metrics.text, /switchboard_sip_registers_total\{outcome="failed"\} 1\d/);
  t.regex(metrics.text, /switchboard_sip_registers_total\{outcome="limited"\} 19\d/);
});
