/**
 * A registered SIP desk phone rung by the `ring` step (docs/phones.md, "The ring step"; engine/calls/ring-sip.ts):
 * sipp registers a user's `sip` device with digest (MD5, at a second engine on the same database that offers MD5
 * first: Debian's sipp 3.6.1 knows no other), then listens on the port it registered from as the phone; sipp as the
 * caller dials a number whose plan rings that user. The phone gets the INVITE at its own source port with its
 * contact as Request-URI, answers, talks and hangs up: the call connects with a `device` leg and ends `completed`.
 * Rung in `silent` mode, the INVITE carries RFC 7462's low-priority Alert-Info (docs/phones.md, "Ring modes").
 * A binding whose expiry passed (the engines' clock moved on) is not rung: the plan takes `next`.
 */
import dgram from 'node:dgram';
import test, { type ExecutionContext } from 'ava';
import { liveSipBindings } from '../../../../../core/devices/sip-bindings.ts';
import type { RingMode } from '../../../../../core/routing/definition.ts';
import { freeUdpPort } from '../../../../helpers/free-port.ts';
import { addSippCarrier, deskLine as registeredDesk } from '../../../../helpers/phone-lines.ts';
import {
  audioPcap,
  playPcap,
  runSipp,
  type SippRun,
  startMd5FirstEngine,
  startSippServer,
} from '../../../../helpers/sipp.ts';
import { startService, type TestService } from '../../../../helpers/service.ts';
import { until } from '../../../../helpers/until.ts';

let offsetMs = 0;
const clock = { now: () => new Date(Date.now() + offsetMs) };
let service: TestService;
let sipPort: number;
let md5Engine: Awaited<ReturnType<typeof startMd5FirstEngine>>;

test.before(async () => {
  service = await startService({}, ['api', 'engine'], { clock });
  sipPort = service.sipPort as number;
  await addSippCarrier(service);
  md5Engine = await startMd5FirstEngine(service, clock);
});

test.after.always(async () => {
  await md5Engine?.close();
  await service?.close();
});

const sippFailed = (run: SippRun) => `${run.code}\n${run.stdout}\n${run.stderr}\n${run.errors}`;

/** `deskLine` (helpers/phone-lines.ts) on the MD5-first engine; the device's presence is its registration. */
async function deskLine(t: ExecutionContext, localPort: number, expires: number, mode?: RingMode) {
  const desk = await registeredDesk(t, service, {
    sipPort: md5Engine.engine.sipPort,
    localPort,
    expires,
    now: () => clock.now(),
    ...(mode === undefined ? {} : { mode }),
  });
  // Its presence is its registration: live until the binding expires.
  const listed = await service.request('GET', '/api/v1/devices?limit=10', { auth: desk.token });
  const found = (listed.body.data as { id: string; presence: unknown }[]).find((d) => d.id === desk.deviceId);
  t.deepEqual(found?.presence, { live: true, expiresAt: desk.binding?.expiresAt.toISOString() });
  return desk;
}

/** switchboard_rtp_packets_total{direction="in"} in /metrics (counted as calls end). */
async function rtpPacketsIn(): Promise<number> {
  const metrics = await service.request('GET', '/metrics');
  return Number(/^switchboard_rtp_packets_total\{direction="in"\} (\d+)$/m.exec(metrics.text)?.[1] ?? 0);
}

async function callOf(e164: string) {
  return until('the call', async () => {
    const result = await service.pool.query<{ id: string }>(
      'SELECT id FROM calls WHERE to_number = $1 ORDER BY started_at DESC LIMIT 1',
      [e164],
    );
    return result.rows[0]?.id;
  });
}

async function endedCall(callId: string) {
  return until('the end', async () => {
    const result = await service.pool.query<{ end_reason: string | null; ended_at: Date | null; steps: string[] }>(
      'SELECT end_reason, ended_at, steps_taken AS steps FROM calls WHERE id = $1',
      [callId],
    );
    const row = result.rows[0];
    return row?.ended_at === null ? undefined : row;
  });
}

async function eventsOf(callId: string) {
  const result = await service.pool.query<{ type: string; payload: string | Record<string, unknown> }>(
    'SELECT type, payload FROM events WHERE stream_key = $1 ORDER BY sequence',
    [`call:${callId}`],
  );
  return result.rows.map((row) => ({
    type: row.type,
    payload: (typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload) as Record<string, unknown>,
  }));
}

test.serial(
  'a registered SIP device is rung (silently) at its source, answers, is bridged, and its BYE ends the call',
  async (t) => {
    const localPort = await freeUdpPort();
    const { line, token, deviceId, username } = await deskLine(t, localPort, 120, 'silent');
    // The phone: sipp listening on the port it registered from.
    const phone = startSippServer({
      scenario: 'device-answers',
      port: localPort,
      mediaPort: await freeUdpPort(),
      timeoutSeconds: 40,
      replacements: {
        USERNAME: username,
        HOLD_MS: '1500',
        INVITE_CHECKS:
          '<ereg regexp="urn:alert:priority:low" search_in="hdr" header="Alert-Info:" check_it="true" assign_to="alert"/>' +
          '<log message="Alert-Info [$alert]"/>',
      },
    });
    t.teardown(() => phone.stop());
    const rtpBefore = await rtpPacketsIn();
    // The caller speaks; the phone (sipp with -rtp_echo) echoes it back through the engine.
    const caller = await runSipp({
      scenario: 'answered',
      sipPort,
      dialed: line.e164.slice(1),
      replacements: { MEDIA: playPcap(audioPcap) },
      timeoutSeconds: 40,
    });
    t.is(caller.code, 0, sippFailed(caller));
    const answered = await phone.finished;
    t.is(answered.code, 0, sippFailed(answered));

    const callId = await callOf(line.e164);
    const ended = await endedCall(callId);
    t.is(ended.end_reason, 'completed');
    const legs = await service.pool.query<{ id: string; role: string; state: string }>(
      "SELECT id, role, state FROM call_legs WHERE call_id = $1 AND role = 'device'",
      [callId],
    );
    const leg = legs.rows[0];
    t.is(leg?.state, 'ended');
    const legIn = await service.pool.query<{ packets_in: string }>(
      "SELECT packets_in FROM call_legs WHERE call_id = $1 AND role = 'device'",
      [callId],
    );
    const phoneIn = Number(legIn.rows[0]?.packets_in);
    t.true(phoneIn > 0, 'the phone sent RTP');
    t.true((await rtpPacketsIn()) - rtpBefore >= phoneIn, "the desk phone's RTP is counted in /metrics");
    const events = await eventsOf(callId);
    t.deepEqual(
      events.map((event) => event.type),
      ['call.started', 'call.answered', 'call.ringing', 'call.connected', 'call.ended'],
    );
    t.like(events[2]?.payload.ring as Record<string, unknown>, {
      ringSeq: 1,
      memberIds: [],
      externalUserIds: ['alice'],
      offerId: null,
    });
    t.like(events[3]?.payload.leg as Record<string, unknown>, {
      id: leg?.id,
      role: 'device',
      memberId: null,
      externalUserId: 'alice',
    });
    t.like(events[4]?.payload, { connected: true });
    const devices = await service.request('GET', '/api/v1/devices?limit=10', { auth: token });
    t.false((devices.body.data as { id: string; busy: boolean }[]).find((d) => d.id === deviceId)?.busy);
  },
);

test.serial('a binding whose expiry passed is not rung: the plan takes next', async (t) => {
  const localPort = await freeUdpPort();
  const { line, deviceId } = await deskLine(t, localPort, 60);
  offsetMs += 61_000;
  t.deepEqual(await liveSipBindings(service.pool, deviceId, clock.now()), []);
  // Where the phone was: anything the engine sends there is heard.
  const socket = dgram.createSocket('udp4');
  t.teardown(() => socket.close());
  const heard: string[] = [];
  socket.on('message', (data) => heard.push(data.toString()));
  await new Promise<void>((resolve) => socket.bind(localPort, '127.0.0.1', resolve));
  const caller = await runSipp({ scenario: 'answered', sipPort, dialed: line.e164.slice(1), timeoutSeconds: 30 });
  t.is(caller.code, 0, sippFailed(caller));
  const ended = await endedCall(await callOf(line.e164));
  t.is(ended.end_reason, 'plan_hangup');
  t.deepEqual(ended.steps, ['r', 'bye']);
  t.deepEqual(heard, []);
});

test.serial(
  'a desk phone whose answer names another host gets its media where it registered from; that host gets nothing',
  async (t) => {
    const localPort = await freeUdpPort();
    const { line, username } = await deskLine(t, localPort, 120);
    const mediaPort = await freeUdpPort();
    // The host the answer names: loopback too, but not where the phone's REGISTER and INVITE came from.
    const elsewhere = dgram.createSocket('udp4');
    t.teardown(() => elsewhere.close());
    let strayed = 0;
    elsewhere.on('message', () => (strayed += 1));
    await new Promise<void>((resolve) => elsewhere.bind(mediaPort, '127.0.0.2', resolve));
    const phone = startSippServer({
      scenario: 'device-answers',
      port: localPort,
      mediaPort,
      timeoutSeconds: 40,
      replacements: { USERNAME: username, HOLD_MS: '1500', ANSWER_ADDRESS: 'IP4 127.0.0.2' },
    });
    t.teardown(() => phone.stop());
    const caller = await runSipp({
      scenario: 'answered',
      sipPort,
      dialed: line.e164.slice(1),
      replacements: { MEDIA: playPcap(audioPcap) },
      timeoutSeconds: 40,
    });
    t.is(caller.code, 0, sippFailed(caller));
    t.is((await phone.finished).code, 0);
    const callId = await callOf(line.e164);
    t.is((await endedCall(callId)).end_reason, 'completed');
    const leg = await service.pool.query<{ packets_in: string; packets_out: string }>(
      "SELECT packets_in, packets_out FROM call_legs WHERE call_id = $1 AND role = 'device'",
      [callId],
    );
    // The phone (sipp, echoing at its own address) heard the caller and answered: both ways through the engine.
    t.true(Number(leg.rows[0]?.packets_out) > 0, 'the engine sent the phone audio');
    t.true(Number(leg.rows[0]?.packets_in) > 0, 'the phone echoed it back from where it registered');
    t.is(strayed, 0, 'the host named in the answer got nothing');
  },
);

test.serial(
  'a desk phone whose answer names a multicast address is hung up saying why; the plan goes on',
  async (t) => {
    const localPort = await freeUdpPort();
    const { line, username } = await deskLine(t, localPort, 120);
    const phone = startSippServer({
      scenario: 'device-answers-refused',
      port: localPort,
      mediaPort: await freeUdpPort(),
      timeoutSeconds: 40,
      replacements: { USERNAME: username, ANSWER_ADDRESS: 'IP4 239.1.2.3' },
    });
    t.teardown(() => phone.stop());
    const caller = await runSipp({ scenario: 'answered', sipPort, dialed: line.e164.slice(1), timeoutSeconds: 40 });
    t.is(caller.code, 0, sippFailed(caller));
    // The phone's scenario checks the BYE's Reason: cause 488, "the media address 239.1.2.3 is multicast ...".
    const refused = await phone.finished;
    t.is(refused.code, 0, sippFailed(refused));
    const callId = await callOf(line.e164);
    const ended = await endedCall(callId);
    t.is(ended.end_reason, 'plan_hangup');
    t.deepEqual(ended.steps, ['r', 'bye']);
    const events = await eventsOf(callId);
    t.false(
      events.some((event) => event.type === 'call.connected'),
      'the refused phone never connected',
    );
    t.true(
      service.logs.some((line) => line.includes("a SIP device's answer is refused") && line.includes('multicast')),
    );
  },
);
