/**
 * Carrier calls through the engine, with sipp as the carrier (test/sipp/ scenarios): which INVITEs are answered,
 * refused or ignored, the plan steps a call takes with real RTP (DTMF by RFC 2833 from the pcaps sipp ships), the
 * call's events in its stream, and garbage on the SIP port.
 *
 * One service for the file (API and engine roles); each test has its own workspace and numbers.
 */
import { randomInt } from 'node:crypto';
import dgram from 'node:dgram';
import { readFile } from 'node:fs/promises';
import test, { type ExecutionContext } from 'ava';
import { decodeWav } from '../../../engine/media/wav.ts';
import { loadConfig } from '../../../core/config.ts';
import { runCli } from '../../helpers/cli.ts';
import { addFarCarrier, addSippCarrier, numberRunning as lineRunning } from '../../helpers/phone-lines.ts';
import { startService, type TestService } from '../../helpers/service.ts';
import { freeUdpPort } from '../../helpers/free-port.ts';
import { sippFailed } from '../../helpers/engine-service.ts';
import { startRtpPhone } from '../../helpers/rtp-phone.ts';
import { audioPcap, dtmfPcap, hangsUpWhenTold, playPcap, runSipp, startSippServer } from '../../helpers/sipp.ts';
import { sleep, until } from '../../helpers/until.ts';
import { tonePower } from '../../helpers/webrtc-browser.ts';

let service: TestService;
let sipPort: number;

/** Runs the `switchboard` command on the service's database. */
const cli = (args: string[]) => runCli(service.databaseUrl, args);

test.before(async () => {
  service = await startService({}, ['api', 'engine']);
  sipPort = service.sipPort as number;
  // sipp sends from 127.0.0.1: the carrier (the 403 test sends from 127.0.0.2, which no carrier names).
  await addSippCarrier(service);
});

test('switchboard carriers add checks its input and keeps the password sealed', async (t) => {
  const added = await cli([
    'carriers',
    'add',
    'trunk-a',
    '--address',
    '203.0.113.0/24',
    '--transport',
    'tcp',
    '--username',
    'acme',
    '--password',
    'hunter2',
    '--media-networks',
    '198.51.100.0/24, 192.0.2.7',
  ]);
  t.is(added.code, 0, added.stderr);
  t.deepEqual(JSON.parse(added.stdout), {
    name: 'trunk-a',
    address: '203.0.113.0/24',
    port: 5060,
    transport: 'tcp',
    username: 'acme',
    mediaNetworks: ['198.51.100.0/24', '192.0.2.7'],
    hasPassword: true,
  });
  const stored = await service.pool.query<{ password: string }>("SELECT password FROM carriers WHERE name = 'trunk-a'");
  t.false(stored.rows[0]?.password.includes('hunter2'));
  for (const bad of [
    ['carriers', 'add', 'x', '--address', '10.0.0.0/99'],
    ['carriers', 'add', 'x', '--address', '10.0.0.1', '--transport', 'sctp'],
    ['carriers', 'add', 'x', '--address', '10.0.0.1', '--port', '70000'],
    ['carriers', 'add', 'x', '--address', '10.0.0.1', '--username', 'only'],
    ['carriers', 'add', 'bad name!', '--address', '10.0.0.1'],
    ['carriers', 'add', 'x'],
    ['carriers', 'add', 'x', '--address', '10.0.0.1', '--media-networks', '10.0.0.0/33'],
    ['carriers', 'add', 'x', '--address', '10.0.0.1', '--media-networks', 'media.example.com'],
    ['carriers', 'add', 'x', '--address', '10.0.0.1', '--media-networks', Array(33).fill('10.0.0.1').join(',')],
  ]) {
    const refused = await cli(bad);
    t.is(refused.code, 2, `${bad.join(' ')}: ${refused.stderr}`);
  }
});

test.after.always(async () => {
  await service?.close();
});

/** A workspace with a number running `definition` (published, assigned); returns the number. */
const numberRunning = (t: ExecutionContext, definition: unknown) => lineRunning(t, service, definition);

interface CallEvent {
  type: string;
  payload: {
    call: { state: string; endReason: string | null; answeredAt: string | null };
    previousState?: string;
    connected?: boolean;
  };
}

/** The events of the last call to `e164`, once it has ended (and, with `until`, once that event is there too). */
async function endedCall(e164: string, until?: string): Promise<{ id: string; events: CallEvent[] }> {
  for (const deadline = Date.now() + 20_000; Date.now() < deadline;) {
    const call = await service.pool.query<{ id: string; ended_at: Date | null }>(
      'SELECT id, ended_at FROM calls WHERE to_number = $1 ORDER BY started_at DESC LIMIT 1',
      [e164],
    );
    const row = call.rows[0];
    if (row?.ended_at) {
      const events = await service.pool.query<{ type: string; payload: string }>(
        'SELECT type, payload FROM events WHERE stream_key = $1 ORDER BY sequence',
        [`call:${row.id}`],
      );
      const found = events.rows.map((event) => ({ type: event.type, payload: JSON.parse(event.payload) }));
      if (until === undefined || found.some((event) => event.type === until)) return { id: row.id, events: found };
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no ended call to ${e164}`);
}

const hangup = { type: 'hangup', message: null };

test('OPTIONS is answered 200', async (t) => {
  const run = await runSipp({ scenario: 'options', sipPort, dialed: 'switchboard' });
  t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
});

test('an INVITE from an address no carrier names is refused with 403', async (t) => {
  const { e164 } = await numberRunning(t, { entry: 'bye', steps: { bye: hangup } });
  const run = await runSipp({
    scenario: 'refused',
    sipPort,
    dialed: e164.slice(1),
    localIp: '127.0.0.2',
    replacements: { STATUS: '403' },
  });
  t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
  const calls = await service.pool.query('SELECT 1 FROM calls WHERE to_number = $1', [e164]);
  t.is(calls.rowCount, 0, 'no call was recorded');
});

test("an INVITE whose SDP names an address outside the carrier's networks is refused 488, saying why", async (t) => {
  const { e164 } = await numberRunning(t, { entry: 'bye', steps: { bye: hangup } });
  // sipp (the carrier "sipp", 127.0.0.1) offers media at a public address that is none of the carrier's.
  const checks =
    '<action><ereg regexp="399 switchboard &quot;the media address 9[.]9[.]9[.]9 is outside carrier sipp' +
    '.s networks" search_in="hdr" header="Warning:" check_it="true" assign_to="warning"/>' +
    '<log message="[$warning]"/></action>';
  const run = await runSipp({
    scenario: 'refused',
    sipPort,
    dialed: e164.slice(1),
    replacements: { STATUS: '488', OFFER_ADDRESS: 'IP4 9.9.9.9', REFUSAL_CHECKS: checks },
  });
  t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
  const calls = await service.pool.query('SELECT 1 FROM calls WHERE to_number = $1', [e164]);
  t.is(calls.rowCount, 0, 'no call was recorded');
});

test('an INVITE to a number without a published plan gets 404', async (t) => {
  const e164 = `+1629${randomInt(1_000_000, 9_999_999)}`;
  const run = await runSipp({ scenario: 'refused', sipPort, dialed: e164.slice(1), replacements: { STATUS: '404' } });
  t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
});

test('a plan that hangs up at once waits for the caller’s ACK before its BYE (RFC 3261 section 15)', async (t) => {
  const { e164 } = await numberRunning(t, { entry: 'bye', steps: { bye: hangup } });
  // The caller takes 900 ms to acknowledge the 200; sip.js refuses a BYE before the ACK, which must not be lost.
  const run = await runSipp({
    scenario: 'answered',
    sipPort,
    dialed: e164.slice(1),
    replacements: { BEFORE_ACK: '<pause milliseconds="900"/>' },
    timeoutSeconds: 20,
  });
  t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
  const { events } = await endedCall(e164);
  t.like(events.at(-1)?.payload, { call: { endReason: 'plan_hangup' } });
});

test('a caller who cancels before the answer: 200 for the CANCEL, 487 for the INVITE; the call ends caller_cancelled', async (t) => {
  const { e164 } = await numberRunning(t, { entry: 'bye', steps: { bye: hangup } });
  // The engine answers as soon as the call's records are written; holding the number's row back (writing a call
  // checks its number) keeps the INVITE unanswered until the caller has cancelled it.
  const holder = await service.pool.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM phone_numbers WHERE e164 = $1 FOR UPDATE', [e164]);
    const run = await runSipp({ scenario: 'cancelled', sipPort, dialed: e164.slice(1) });
    t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
  } finally {
    await holder.query('COMMIT');
    holder.release();
  }
  const { events } = await endedCall(e164);
  t.deepEqual(
    events.map((event) => event.type),
    ['call.started', 'call.ended'],
  );
  t.like(events[1]?.payload, {
    previousState: 'initiated',
    connected: false,
    call: { state: 'ended', endReason: 'caller_cancelled', answeredAt: null },
  });
});

test('a hangup plan: answered, then BYE from the engine; started, answered and ended events in order', async (t) => {
  const { e164 } = await numberRunning(t, { entry: 'bye', steps: { bye: hangup } });
  const run = await runSipp({ scenario: 'answered', sipPort, dialed: e164.slice(1) });
  t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
  const { events } = await endedCall(e164);
  t.deepEqual(
    events.map((event) => event.type),
    ['call.started', 'call.answered', 'call.ended'],
  );
  const ended = events[2]?.payload;
  t.like(ended, { previousState: 'routing', connected: false, call: { state: 'ended', endReason: 'plan_hangup' } });
});

test('a menu: DTMF 1 takes option 1; no key takes noInput after the retries', async (t) => {
  const menu = {
    entry: 'menu',
    steps: {
      menu: {
        type: 'menu',
        prompt: { tts: 'Press one.' },
        options: { '1': 'one' },
        noInput: 'vm',
        timeoutSecs: 1,
        maxRetries: 1,
      },
      one: { type: 'hangup', message: null },
      vm: { type: 'voicemail', greeting: { tts: 'Leave a message.' } },
    },
  };
  const pressed = await numberRunning(t, menu);
  const withKey = await runSipp({
    scenario: 'answered',
    sipPort,
    dialed: pressed.e164.slice(1),
    replacements: { MEDIA: playPcap(dtmfPcap('1')) },
  });
  t.is(withKey.code, 0, `${withKey.stderr}\n${withKey.errors}`);
  const keyed = await endedCall(pressed.e164);
  t.like(keyed.events.at(-1)?.payload, { previousState: 'routing', call: { endReason: 'plan_hangup' } });

  const silent = await numberRunning(t, menu);
  const noKey = await runSipp({
    scenario: 'caller-hangs-up',
    sipPort,
    dialed: silent.e164.slice(1),
    replacements: { HOLD_MS: '9000' },
  });
  t.is(noKey.code, 0, `${noKey.stderr}\n${noKey.errors}`);
  const unkeyed = await endedCall(silent.e164, 'voicemail.ready');
  t.like(unkeyed.events.find((event) => event.type === 'call.ended')?.payload, {
    previousState: 'voicemail',
    connected: false,
    call: { endReason: 'caller_hangup' },
  });
  t.true(unkeyed.events.some((event) => event.type === 'voicemail.ready'));
});

test('the caller hangs up mid-menu: call.ended with previousState routing and connected false', async (t) => {
  const { e164 } = await numberRunning(t, {
    entry: 'menu',
    steps: {
      menu: {
        type: 'menu',
        prompt: { tts: 'Please choose from the following options, carefully.' },
        options: { '1': 'bye' },
        noInput: 'bye',
        timeoutSecs: 10,
        maxRetries: 3,
      },
      bye: hangup,
    },
  });
  const run = await runSipp({
    scenario: 'caller-hangs-up',
    sipPort,
    dialed: e164.slice(1),
    replacements: { HOLD_MS: '500' },
  });
  t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
  const { events } = await endedCall(e164);
  t.like(events.at(-1)?.payload, { previousState: 'routing', connected: false, call: { endReason: 'caller_hangup' } });
});

test('garbage datagrams and malformed INVITEs leave the engine serving', async (t) => {
  const socket = dgram.createSocket('udp4');
  const send = (data: Buffer | string) =>
    new Promise<void>((resolve, reject) =>
      socket.send(data, sipPort, '127.0.0.1', (error) => (error ? reject(error) : resolve())),
    );
  await send(Buffer.from([0, 1, 2, 3, 255, 254]));
  await send('INVITE sip:123@127.0.0.1 SIP/2.0\r\nVia: nonsense\r\n\r\n');
  await send('INVITE\r\n\r\n');
  await send('SIP/2.0 200 OK\r\n\r\n');
  await send(Buffer.alloc(20_000, 65));
  await send(
    `INVITE sip:1@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:1;branch=z9hG4bK1\r\nContent-Length: 999\r\n\r\nv=0`,
  );
  socket.close();
  const run = await runSipp({ scenario: 'options', sipPort, dialed: 'switchboard' });
  t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
  const metrics = await service.request('GET', '/metrics');
  t.regex(metrics.text, /switchboard_sip_malformed_total\{reason="(unparseable|not_sip|oversize)"\} [1-9]/);
});

test('numbers with control characters: a dialed one that is no number gets 404, a caller is recorded without them', async (t) => {
  t.timeout(60_000, 'an answer never came');
  const { e164 } = await numberRunning(t, { entry: 'bye', steps: { bye: hangup } });
  // From the carrier's address (sipp's, 127.0.0.1), as raw datagrams: %00 is NUL once decoded, which PostgreSQL
  // refuses in text.
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  t.teardown(() => socket.close());
  const received: string[] = [];
  let arrived = () => {};
  socket.on('message', (data) => {
    received.push(data.toString());
    arrived();
  });
  const next = async (match: (text: string) => boolean) => {
    for (;;) {
      const found = received.find(match);
      if (found !== undefined) return found;
      await new Promise<void>((resolve) => (arrived = resolve));
    }
  };
  const local = `127.0.0.1:${socket.address().port}`;
  const sdp = `v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio ${await freeUdpPort()} RTP/AVP 0\r\n`;
  const invite = (user: string, from: string, callId: string) =>
    [
      `INVITE sip:${user}@127.0.0.1:${sipPort} SIP/2.0`,
      `Via: SIP/2.0/UDP ${local};branch=z9hG4bK-${callId}`,
      `From: <sip:${from}@127.0.0.1>;tag=f-${callId}`,
      `To: <sip:${user}@127.0.0.1:${sipPort}>`,
      `Call-ID: ${callId}`,
      'CSeq: 1 INVITE',
      `Contact: <sip:caller@${local}>`,
      'Max-Forwards: 70',
      'Content-Type: application/sdp',
      `Content-Length: ${sdp.length}`,
      '',
      sdp,
    ].join('\r\n');
  const send = (text: string) =>
    new Promise<void>((resolve, reject) =>
      socket.send(text, sipPort, '127.0.0.1', (error) => (error ? reject(error) : resolve())),
    );
  const final = (callId: string) => (text: string) =>
    /^SIP\/2\.0 [2-6]\d\d /.test(text) && text.includes(`Call-ID: ${callId}\r\n`);
  const answerTo = (callId: string) => next(final(callId));

  const nowhere = `nul-dialed-${randomInt(1e9)}`;
  await send(invite('%00%2B1628', '%2B15550001111', nowhere));
  t.regex(await answerTo(nowhere), /^SIP\/2\.0 404 /);

  const answered = `nul-caller-${randomInt(1e9)}`;
  await send(invite(e164.slice(1), '%00%2B1555%010001111', answered));
  const ok = await answerTo(answered);
  t.regex(ok, /^SIP\/2\.0 200 /);
  const toTag = /^To:.*(;tag=[^\r;]+)/m.exec(ok)?.[1] ?? '';
  await send(
    [
      `ACK sip:switchboard@127.0.0.1:${sipPort} SIP/2.0`,
      `Via: SIP/2.0/UDP ${local};branch=z9hG4bK-ack-${answered}`,
      `From: <sip:x@127.0.0.1>;tag=f-${answered}`,
      `To: <sip:${e164.slice(1)}@127.0.0.1:${sipPort}>${toTag}`,
      `Call-ID: ${answered}`,
      'CSeq: 1 ACK',
      'Content-Length: 0',
      '',
      '',
    ].join('\r\n'),
  );
  const bye = await next((text) => text.startsWith('BYE ') && text.includes(`Call-ID: ${answered}\r\n`));
  const echoed = ['Via', 'From', 'To', 'Call-ID', 'CSeq'].map((name) => new RegExp(`^${name}:.*$`, 'm').exec(bye)?.[0]);
  await send(['SIP/2.0 200 OK', ...echoed, 'Content-Length: 0', '', ''].join('\r\n'));
  const { id } = await endedCall(e164);
  const call = await service.pool.query<{ from_number: string }>('SELECT from_number FROM calls WHERE id = $1', [id]);
  t.is(call.rows[0]?.from_number, '+15550001111');
});

test('voicemail records the caller from the beep until they hang up: a WAV as long as they spoke, their voice in it', async (t) => {
  const { e164 } = await numberRunning(t, {
    entry: 'vm',
    steps: { vm: { type: 'voicemail', greeting: { tts: 'Hi.' } } },
  });
  const phone = await startRtpPhone();
  t.teardown(() => phone.close());
  const caller = hangsUpWhenTold();
  const run = runSipp({
    scenario: 'caller-hangs-up',
    sipPort,
    dialed: e164.slice(1),
    replacements: { AUDIO_PORT: String(phone.port), MEDIA: caller.media },
    timeoutSeconds: 300,
  });
  // The greeting, then the beep (300 ms of 1 kHz, the last thing the engine sends); then the caller speaks for 7 s
  // and hangs up.
  await until('the beep after the greeting', () => (beepFrames(phone.heard) >= 15 ? true : undefined), 120_000);
  phone.speak(440);
  await sleep(7000);
  phone.quiet();
  await caller.hangUp();
  const sipp = await run;
  t.is(sipp.code, 0, sippFailed(sipp));
  const { id, events } = await endedCall(e164, 'voicemail.ready');
  const ready = events.find((event) => event.type === 'voicemail.ready')?.payload as unknown as {
    voicemail: { recordingId: string; durationSeconds: number };
  };
  const recording = await service.pool.query<{ id: string; path: string; duration_ms: number; kind: string }>(
    'SELECT id, path, duration_ms, kind FROM recordings WHERE call_id = $1',
    [id],
  );
  const row = recording.rows[0];
  t.truthy(row);
  t.is(row?.kind, 'voicemail');
  t.is(ready.voicemail.recordingId, row?.id as string);
  t.is(ready.voicemail.durationSeconds, Math.round((row?.duration_ms ?? 0) / 1000));
  const wav = decodeWav(await readFile(row?.path as string));
  t.is(wav.sampleRate, 8000);
  // Every frame the caller sent after the beep, and nothing else (the engine's first frame of listening may be lost
  // to the beep's last 20 ms).
  const seconds = wav.pcm.length / 8000;
  const spoken = phone.spoken / 8000;
  t.log(`recorded ${seconds} s of ${spoken} s spoken`);
  t.true(seconds <= spoken && seconds >= spoken - 0.1, `recorded ${seconds} s of ${spoken} s spoken`);
  t.is(row?.duration_ms, Math.round(seconds * 1000));
  t.true(tonePower(wav.pcm, 440, 8000) > 0.9, 'the caller’s 440 Hz');
});

/** How many 20 ms frames at the end of `heard` are a 1 kHz tone. */
function beepFrames(heard: readonly number[]): number {
  let frames = 0;
  for (let end = heard.length; end >= 160; end -= 160) {
    const frame = heard.slice(end - 160, end);
    const loud = frame.reduce((sum, sample) => sum + Math.abs(sample), 0) / 160 > 1000;
    if (!loud || tonePower(frame, 1000, 8000) < 0.9) break;
    frames += 1;
  }
  return frames;
}

/** A number whose carrier is a sipp far end on `port`: forwards from its plan go there. */
async function numberForwardingTo(
  t: ExecutionContext,
  port: number,
  timeoutSecs: number,
  account?: { username: string; password: string },
) {
  const carrier = await addFarCarrier(t, service, port, account);
  const { e164 } = await numberRunning(t, {
    entry: 'fwd',
    steps: {
      fwd: { type: 'forward', to: '+15550009999', timeoutSecs, next: 'bye' },
      bye: { type: 'hangup', message: null },
    },
  });
  await service.pool.query('UPDATE phone_numbers SET carrier = $2 WHERE e164 = $1', [e164, carrier]);
  return e164;
}

test('forward to a far end that answers: bridged, media both ways, call.connected', async (t) => {
  const port = await freeUdpPort();
  const far = startSippServer({ scenario: 'uas', port, mediaPort: await freeUdpPort() });
  const e164 = await numberForwardingTo(t, port, 20);
  const run = await runSipp({
    scenario: 'caller-hangs-up',
    sipPort,
    dialed: e164.slice(1),
    replacements: { MEDIA: `<pause milliseconds="1500"/>${playPcap(audioPcap)}`, HOLD_MS: '8000' },
  });
  t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
  const farEnd = await far.finished;
  t.is(farEnd.code, 0, farEnd.stderr);
  const { id, events } = await endedCall(e164);
  t.deepEqual(
    events.map((event) => event.type),
    ['call.started', 'call.answered', 'call.connected', 'call.ended'],
  );
  t.like(events.at(-1)?.payload, { previousState: 'connected', connected: true, call: { endReason: 'caller_hangup' } });
  const legs = await service.pool.query<{ role: string; packets_in: string; packets_out: string }>(
    'SELECT role, packets_in, packets_out FROM call_legs WHERE call_id = $1 ORDER BY started_at',
    [id],
  );
  const [caller, forward] = legs.rows;
  t.is(caller?.role, 'caller');
  t.is(forward?.role, 'forward');
  // The caller's 7 s of audio went to the far end, and its echo came back to the caller.
  t.true(Number(caller?.packets_in) > 200 && Number(forward?.packets_out) > 200, JSON.stringify(legs.rows));
  t.true(Number(forward?.packets_in) > 200 && Number(caller?.packets_out) > 200, JSON.stringify(legs.rows));
});

test('forward through a carrier that challenges (401): answered with its account, then bridged', async (t) => {
  const account = { username: 'acct-7731', password: 'pw-Zt4!q' };
  // The caller holds on while bridged and hangs up; refused, the plan's `next` hangs up on the caller instead.
  const forwardTo = async (password: string, caller: 'caller-hangs-up' | 'answered') => {
    const port = await freeUdpPort();
    const far = startSippServer({
      scenario: 'uas-auth',
      port,
      mediaPort: await freeUdpPort(),
      replacements: { USERNAME: account.username, PASSWORD: account.password },
    });
    const e164 = await numberForwardingTo(t, port, 20, { username: account.username, password });
    const run = await runSipp({ scenario: caller, sipPort, dialed: e164.slice(1), replacements: { HOLD_MS: '3000' } });
    t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
    const farEnd = await far.finished;
    t.is(farEnd.code, 0, farEnd.stderr);
    return endedCall(e164);
  };

  // The carrier's own account: the second INVITE carries Authorization that sipp verifies, and is answered.
  const good = await forwardTo(account.password, 'caller-hangs-up');
  t.deepEqual(
    good.events.map((event) => event.type),
    ['call.started', 'call.answered', 'call.connected', 'call.ended'],
  );
  // A wrong password: the carrier refuses the answer to its challenge (403), and the plan goes on to `next`.
  const wrong = await forwardTo('not-the-password', 'answered');
  t.deepEqual(
    wrong.events.map((event) => event.type),
    ['call.started', 'call.answered', 'call.ended'],
  );
  t.like(wrong.events.at(-1)?.payload, { call: { endReason: 'plan_hangup' } });
});

test('forward to a far end that never answers: CANCEL after timeoutSecs, then next', async (t) => {
  const port = await freeUdpPort();
  const far = startSippServer({ scenario: 'uas-no-answer', port, mediaPort: await freeUdpPort() });
  const e164 = await numberForwardingTo(t, port, 5);
  const started = Date.now();
  const run = await runSipp({ scenario: 'answered', sipPort, dialed: e164.slice(1) });
  t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
  t.true(Date.now() - started >= 5000, 'rang for timeoutSecs first');
  const farEnd = await far.finished;
  t.is(farEnd.code, 0, farEnd.stderr);
  const { id, events } = await endedCall(e164);
  t.false(events.some((event) => event.type === 'call.connected'));
  t.like(events.at(-1)?.payload, { connected: false, call: { endReason: 'plan_hangup' } });
  const steps = await service.pool.query<{ steps_taken: string[] }>('SELECT steps_taken FROM calls WHERE id = $1', [
    id,
  ]);
  t.deepEqual(steps.rows[0]?.steps_taken, ['fwd', 'bye']);
});

test('SIP over TCP: the same call on a TCP connection', async (t) => {
  const { e164 } = await numberRunning(t, { entry: 'bye', steps: { bye: hangup } });
  const run = await runSipp({ scenario: 'answered', sipPort, dialed: e164.slice(1), transport: 'tcp' });
  t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
  const { events } = await endedCall(e164);
  t.deepEqual(
    events.map((event) => event.type),
    ['call.started', 'call.answered', 'call.ended'],
  );
});

test('hold and resume (re-INVITE): answered recvonly, then sendrecv; the call goes on', async (t) => {
  const { e164 } = await numberRunning(t, { entry: 'vm', steps: { vm: { type: 'voicemail', greeting: null } } });
  const run = await runSipp({ scenario: 'hold', sipPort, dialed: e164.slice(1) });
  t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
  const { events } = await endedCall(e164);
  t.like(events.find((event) => event.type === 'call.ended')?.payload, { call: { endReason: 'caller_hangup' } });
});

/** A menu where 1 hangs up and no (listed) key goes to voicemail, allowing `maxRetries` retries. */
const pressOne = (maxRetries: number) => ({
  entry: 'menu',
  steps: {
    menu: {
      type: 'menu',
      prompt: { tts: 'Press one.' },
      options: { '1': 'one' },
      noInput: 'vm',
      timeoutSecs: 4,
      maxRetries,
    },
    one: { type: 'hangup', message: null },
    vm: { type: 'voicemail', greeting: null },
  },
});

test('a menu: an unlisted key counts as a retry (the prompt plays again and a listed key still works)', async (t) => {
  const { e164 } = await numberRunning(t, pressOne(1));
  // 2 (not listed), then 1 on the retry: the engine hangs up from `one`. Without the retry the call would go to
  // voicemail and never get the engine's BYE.
  const run = await runSipp({
    scenario: 'answered',
    sipPort,
    dialed: e164.slice(1),
    replacements: { MEDIA: `${playPcap(dtmfPcap('2'))}<pause milliseconds="1500"/>${playPcap(dtmfPcap('1'))}` },
  });
  t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
  const { id } = await endedCall(e164);
  const steps = await service.pool.query<{ steps_taken: string[] }>('SELECT steps_taken FROM calls WHERE id = $1', [
    id,
  ]);
  t.deepEqual(steps.rows[0]?.steps_taken, ['menu', 'one']);

  // The same keys with no retry allowed: the unlisted 2 used the only attempt, so the call goes to noInput.
  const noRetry = await numberRunning(t, pressOne(0));
  const second = await runSipp({
    scenario: 'caller-hangs-up',
    sipPort,
    dialed: noRetry.e164.slice(1),
    replacements: {
      MEDIA: `${playPcap(dtmfPcap('2'))}<pause milliseconds="1500"/>${playPcap(dtmfPcap('1'))}`,
      HOLD_MS: '3000',
    },
  });
  t.is(second.code, 0, `${second.stderr}\n${second.errors}`);
  const other = await endedCall(noRetry.e164);
  const otherSteps = await service.pool.query<{ steps_taken: string[] }>(
    'SELECT steps_taken FROM calls WHERE id = $1',
    [other.id],
  );
  t.deepEqual(otherSteps.rows[0]?.steps_taken, ['menu', 'vm']);
});

test('an engine bound to 0.0.0.0 names ADVERTISED_HOST in its URIs and SDP; without it the setting is refused', async (t) => {
  t.throws(() => loadConfig({ SIP_HOST: '0.0.0.0' }), { message: /ADVERTISED_HOST/ });
  // Its own RTP range: a wildcard bind would take ports the other engine (on 127.0.0.1) also hands out.
  const wide = await startService(
    { SIP_HOST: '0.0.0.0', ADVERTISED_HOST: '127.0.0.1', RTP_PORT_MIN: '21000', RTP_PORT_MAX: '21999' },
    ['api', 'engine'],
  );
  try {
    await addSippCarrier(wide);
    const { e164 } = await lineRunning(t, wide, { entry: 'bye', steps: { bye: hangup } });
    // sipp sends its ACK and waits for the BYE at the Contact and SDP the engine gave: 0.0.0.0 there would fail.
    const checks =
      '<action><ereg regexp="Contact: *&lt;sip:switchboard@127[.]0[.]0[.]1:" search_in="msg" check_it="true" assign_to="contact"/>' +
      '<ereg regexp="c=IN IP4 127[.]0[.]0[.]1" search_in="body" check_it="true" assign_to="sdp"/>' +
      '<log message="answered by [$contact] with [$sdp]"/></action>';
    const run = await runSipp({
      scenario: 'answered',
      sipPort: wide.sipPort as number,
      dialed: e164.slice(1),
      replacements: { ON_ANSWER: checks },
    });
    t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
  } finally {
    await wide.close();
  }
});
