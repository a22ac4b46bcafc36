/**
 * The `ring` step on the real engine (docs/phones.md, "The ring step"): sipp calls a number whose plan rings a user;
 * a stand-in browser (a plain `@roamhq/wrtc` peer connection, test/helpers/webrtc-browser.ts) registers the user's
 * device through the API, long-polls its offers, answers the engine's SDP offer and accepts. The call connects with
 * a browser leg and audio crosses both ways; the browser closing its peer connection ends the call and sipp gets
 * the BYE. Also: the caller hanging up while it rings withdraws the offers; nobody answering takes `next`. A `{cell}`
 * target is dialled out through the number's carrier, a second sipp acting as the far end (as the forward tests do):
 * answered, it is bridged and wins over the devices; not answered, it is cancelled and the plan takes `next`.
 */
import test, { type ExecutionContext } from 'ava';
import type { RingMode } from '../../../../../core/routing/definition.ts';
import type { TestService } from '../../../../helpers/service.ts';
import { freeUdpPort } from '../../../../helpers/free-port.ts';
import { addFarCarrier, numberRunning, ringThenHangUp, workspaceApi } from '../../../../helpers/phone-lines.ts';
import { audioPcap, playPcap, runSipp, startSippServer } from '../../../../helpers/sipp.ts';
import { answerOffer, sine } from '../../../../helpers/webrtc-browser.ts';
import { exitPastWrtc, sippFailed, startEngineService } from '../../../../helpers/engine-service.ts';
import { until } from '../../../../helpers/until.ts';

let service: TestService;
let sipPort: number;

test.before(async () => {
  exitPastWrtc();
  ({ service, sipPort } = await startEngineService());
});

test.after.always(async () => {
  await service?.close();
});

/** A number whose plan rings the workspace's user alice, then hangs up; alice's browser device registered. */
async function ringingLine(t: ExecutionContext, timeoutSecs = 20, scopes = ['devices:*'], mode?: RingMode) {
  const tenant = await workspaceApi(service);
  const { setup } = tenant;
  const line = await numberRunning(
    t,
    service,
    ringThenHangUp([{ userId: setup.user.id, ...(mode === undefined ? {} : { mode }) }], { timeoutSecs }),
    tenant,
  );
  const session = await service.request('POST', '/api/v1/sessions', {
    auth: setup.apiKey,
    body: { externalWorkspaceId: setup.workspace.externalWorkspaceId, externalUserId: 'alice', scopes },
  });
  t.is(session.status, 201, session.text);
  const token = session.body.token as string;
  const device = await service.request('POST', '/api/v1/devices', { auth: token, body: { kind: 'browser' } });
  t.is(device.status, 201, device.text);
  return { line, token, deviceId: device.body.id as string };
}

/** The device's first waiting offer, long-polled. */
async function offerOf(token: string, deviceId: string) {
  return until('an offer', async () => {
    const polled = await service.request('GET', `/api/v1/devices/${deviceId}/offers?wait=10`, { auth: token });
    if (polled.status !== 200) throw new Error(`poll: ${polled.status} ${polled.text}`);
    return (polled.body.data as { id: string; callId: string; sdp: string; ringSeq: number; mode: string }[])[0];
  });
}

async function callRow(callId: string) {
  const result = await service.pool.query<{ state: string; end_reason: string | null; ended_at: Date | null }>(
    'SELECT state, end_reason, ended_at FROM calls WHERE id = $1',
    [callId],
  );
  return result.rows[0];
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

test('a user is rung: the browser accepts, audio crosses both ways, the browser hanging up ends the call', async (t) => {
  const { line, token, deviceId } = await ringingLine(t);
  const sipp = runSipp({
    scenario: 'answered',
    sipPort,
    dialed: line.e164.slice(1),
    replacements: { MEDIA: `${playPcap(audioPcap)}${playPcap(audioPcap)}` },
    timeoutSeconds: 90,
  });
  const offer = await offerOf(token, deviceId);
  t.is(offer.ringSeq, 1);
  const browser = await answerOffer(offer.sdp);
  const tone = sine(440, 48000);
  const speaking = setInterval(() => browser.send(tone(480)), 10);
  try {
    const accepted = await service.request('POST', `/api/v1/offers/${offer.id}/accept`, {
      auth: token,
      body: { sdp: browser.answer },
    });
    t.is(accepted.status, 200, accepted.text);
    await browser.connected();
    await until('connected', async () => ((await callRow(offer.callId))?.state === 'connected' ? true : undefined));
    // sipp's audio reaches the browser: loud frames, not silence.
    await until('audio from the caller at the browser', async () => {
      const recent = browser.heard.slice(-4800);
      const energy = recent.reduce((sum, sample) => sum + Math.abs(sample), 0) / Math.max(1, recent.length);
      return energy > 100 ? true : undefined;
    });
    const listed = await service.request('GET', '/api/v1/devices?limit=10', { auth: token });
    t.true((listed.body.data as { busy: boolean }[])[0]?.busy, 'the device is on the call');
    // Two seconds of the browser's audio sent before it hangs up (the engine hears the hangup at once).
    await until('the browser sent 100 frames', async () => {
      const stats = [...(await browser.getStats()).values()] as { type: string; packetsSent?: number }[];
      return (stats.find((entry) => entry.type === 'outbound-rtp')?.packetsSent ?? 0) >= 100 ? true : undefined;
    });
  } finally {
    clearInterval(speaking);
    browser.close();
  }
  // The browser hung up: the engine hears its DTLS close, the call ends, sipp gets the BYE.
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  const ended = await until('the end', async () => {
    const row = await callRow(offer.callId);
    return row?.ended_at === null ? undefined : row;
  });
  t.is(ended?.end_reason, 'completed');
  const legs = await service.pool.query<{ role: string; packets_in: string; packets_out: string; state: string }>(
    "SELECT role, packets_in, packets_out, state FROM call_legs WHERE call_id = $1 AND role = 'browser'",
    [offer.callId],
  );
  const leg = legs.rows[0];
  t.is(leg?.state, 'ended');
  t.true(Number(leg?.packets_in) > 50, `the browser's audio came in: ${leg?.packets_in} frames`);
  t.true(Number(leg?.packets_out) > 50, `the caller's audio went out: ${leg?.packets_out} frames`);
  const devices = await service.request('GET', '/api/v1/devices?limit=10', { auth: token });
  t.false((devices.body.data as { id: string; busy: boolean }[]).find((d) => d.id === deviceId)?.busy);
  const events = await eventsOf(offer.callId);
  t.deepEqual(
    events.map((event) => event.type),
    ['call.started', 'call.answered', 'call.ringing', 'call.connected', 'call.ended'],
  );
  const ringing = events[2]?.payload.ring as Record<string, unknown>;
  t.like(ringing, { ringSeq: 1, memberIds: [], externalUserIds: ['alice'], offerId: offer.id });
  const connected = events[3]?.payload.leg as Record<string, unknown>;
  t.like(connected, { role: 'browser', memberId: null, externalUserId: 'alice' });
  t.like(events[4]?.payload, { connected: true });
});

test('the browser hangs up through the API (operation 52, its user token with calls:*): the call ends at once and sipp gets the BYE', async (t) => {
  const { line, token, deviceId } = await ringingLine(t, 20, ['devices:*', 'calls:*']);
  const sipp = runSipp({
    scenario: 'answered',
    sipPort,
    dialed: line.e164.slice(1),
    replacements: { MEDIA: `${playPcap(audioPcap)}${playPcap(audioPcap)}` },
    timeoutSeconds: 90,
  });
  const offer = await offerOf(token, deviceId);
  const browser = await answerOffer(offer.sdp);
  let hungUp: Awaited<ReturnType<TestService['request']>>;
  try {
    const accepted = await service.request('POST', `/api/v1/offers/${offer.id}/accept`, {
      auth: token,
      body: { sdp: browser.answer },
    });
    t.is(accepted.status, 200, accepted.text);
    await browser.connected();
    await until('connected', async () => ((await callRow(offer.callId))?.state === 'connected' ? true : undefined));
    // As client/phone.ts's hangUp does: the hangup first, then the peer connection closes.
    hungUp = await service.request('POST', `/api/v1/calls/${offer.callId}/hangup`, { auth: token });
  } finally {
    browser.close();
  }
  t.is(hungUp.status, 200, hungUp.text);
  // The answer waits for the engine (at most 5 s): the call had ended by then, well before ICE consent (~15 s).
  t.is(hungUp.body.state, 'ended', hungUp.text);
  t.is(hungUp.body.endReason, 'hangup_requested');
  t.false('hangupRequested' in hungUp.body, 'the engine ended it within the wait');
  t.false(
    service.logs.some((line) => line.includes('did not end the call in time') && line.includes(offer.callId)),
    'answered once the engine ended the call, not after the wait',
  );
  const row = await callRow(offer.callId);
  t.is(row?.end_reason, 'hangup_requested');
  // sipp's scenario ends on the engine's BYE (it fails without one).
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  const events = await eventsOf(offer.callId);
  t.is(events.at(-1)?.type, 'call.ended');
  t.like(events.at(-1)?.payload, { connected: true, call: { endReason: 'hangup_requested' } });
  const devices = await service.request('GET', '/api/v1/devices?limit=10', { auth: token });
  t.false((devices.body.data as { id: string; busy: boolean }[]).find((d) => d.id === deviceId)?.busy);
});

test('the caller hangs up while it rings: the offers are withdrawn, call.ended with connected false', async (t) => {
  const { line, token, deviceId } = await ringingLine(t);
  const sipp = runSipp({
    scenario: 'caller-hangs-up',
    sipPort,
    dialed: line.e164.slice(1),
    replacements: { HOLD_MS: '3000' },
  });
  const offer = await offerOf(token, deviceId);
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  const withdrawn = await until('the offer withdrawn', async () => {
    const result = await service.pool.query<{ state: string }>('SELECT state FROM offers WHERE id = $1', [offer.id]);
    return result.rows[0]?.state === 'withdrawn' ? true : undefined;
  });
  t.true(withdrawn);
  const events = await until('call.ended', async () => {
    const found = await eventsOf(offer.callId);
    return found.some((event) => event.type === 'call.ended') ? found : undefined;
  });
  t.deepEqual(
    events.map((event) => event.type),
    ['call.started', 'call.answered', 'call.ringing', 'call.ended'],
  );
  t.like(events[3]?.payload, { connected: false });
});

test('nobody answers within timeoutSecs (a muted target: its offer says so): the offer is withdrawn, the plan takes next', async (t) => {
  const { line, token, deviceId } = await ringingLine(t, 5, ['devices:*'], 'muted');
  const sipp = runSipp({ scenario: 'answered', sipPort, dialed: line.e164.slice(1) });
  const offer = await offerOf(token, deviceId);
  t.is(offer.mode, 'muted');
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  const row = await until('the end', async () => {
    const found = await callRow(offer.callId);
    return found?.ended_at === null ? undefined : found;
  });
  t.is(row?.end_reason, 'plan_hangup');
  const result = await service.pool.query<{ state: string }>('SELECT state FROM offers WHERE id = $1', [offer.id]);
  t.is(result.rows[0]?.state, 'withdrawn');
  const steps = await service.pool.query<{ steps_taken: string[] }>('SELECT steps_taken FROM calls WHERE id = $1', [
    offer.callId,
  ]);
  t.deepEqual(steps.rows[0]?.steps_taken, ['r', 'bye']);
});

test('a device whose presence lapses while it rings has its offer withdrawn by the engine, and its long-poll hears so', async (t) => {
  const { line, token, deviceId } = await ringingLine(t);
  const sipp = runSipp({
    scenario: 'caller-hangs-up',
    sipPort,
    dialed: line.e164.slice(1),
    // The caller holds on longer than the long-poll's wait: the offer must go while the call still rings.
    replacements: { HOLD_MS: '14000' },
  });
  const offer = await offerOf(token, deviceId);
  // The long-poll holds while the offers it shows are the waiting ones; the lease lapses (as a tab that went away).
  const ringing = service.request('GET', `/api/v1/devices/${deviceId}/offers?wait=10&known=${offer.id}`, {
    auth: token,
  });
  await service.pool.query(
    "UPDATE devices SET presence_expires_at = clock_timestamp() - interval '1 second' WHERE id = $1",
    [deviceId],
  );
  const polled = await ringing;
  t.is(polled.status, 200, polled.text);
  t.deepEqual(polled.body.data, []);
  const result = await service.pool.query<{ state: string }>('SELECT state FROM offers WHERE id = $1', [offer.id]);
  t.is(result.rows[0]?.state, 'withdrawn');
  t.is((await callRow(offer.callId))?.ended_at, null, 'the call still rings when its offer is withdrawn');
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
});

const cell = '+15550009999';

/**
 * A number whose carrier is a sipp far end on `port` and whose plan rings `targets` (the cell among them), then
 * hangs up; alice's browser device registered.
 */
async function cellLine(t: ExecutionContext, port: number, timeoutSecs: number, withAlice: boolean) {
  const carrier = await addFarCarrier(t, service, port);
  const tenant = await workspaceApi(service);
  const targets = withAlice ? [{ userId: tenant.setup.user.id }, { cell }] : [{ cell }];
  const line = await numberRunning(
    t,
    service,
    {
      entry: 'r',
      steps: {
        r: { type: 'ring', targets, strategy: 'simultaneous', timeoutSecs, next: 'bye' },
        bye: { type: 'hangup', message: null },
      },
    },
    tenant,
  );
  await service.pool.query('UPDATE phone_numbers SET carrier = $2 WHERE e164 = $1', [line.e164, carrier]);
  const session = await service.request('POST', '/api/v1/sessions', {
    auth: tenant.setup.apiKey,
    body: {
      externalWorkspaceId: tenant.setup.workspace.externalWorkspaceId,
      externalUserId: 'alice',
      scopes: ['devices:*'],
    },
  });
  t.is(session.status, 201, session.text);
  const token = session.body.token as string;
  const device = await service.request('POST', '/api/v1/devices', { auth: token, body: { kind: 'browser' } });
  t.is(device.status, 201, device.text);
  return { line, token, deviceId: device.body.id as string };
}

async function endedCallTo(e164: string) {
  return until('the call to end', async () => {
    const result = await service.pool.query<{ id: string; end_reason: string | null; steps_taken: string[] }>(
      'SELECT id, end_reason, steps_taken FROM calls WHERE to_number = $1 AND ended_at IS NOT NULL',
      [e164],
    );
    return result.rows[0];
  });
}

test('a cell rung with a device answers first: its carrier leg is bridged, the offer withdrawn, its BYE completes the call', async (t) => {
  const port = await freeUdpPort();
  const far = startSippServer({
    scenario: 'uas-answers-hangs-up',
    port,
    mediaPort: await freeUdpPort(),
    replacements: { HOLD_MS: '4000' },
  });
  const { line, token, deviceId } = await cellLine(t, port, 20, true);
  const sipp = runSipp({
    scenario: 'answered',
    sipPort,
    dialed: line.e164.slice(1),
    replacements: { MEDIA: playPcap(audioPcap) },
  });
  // alice's device is offered the call in the same round as the cell.
  const offer = await offerOf(token, deviceId);
  const farEnd = await far.finished;
  t.is(farEnd.code, 0, farEnd.stderr);
  // The far end hung up: the call is over and sipp (the caller) gets the engine's BYE.
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  const ended = await endedCallTo(line.e164);
  t.is(ended.id, offer.callId);
  t.is(ended.end_reason, 'completed');
  t.deepEqual(ended.steps_taken, ['r']);
  const offers = await service.pool.query<{ state: string }>('SELECT state FROM offers WHERE id = $1', [offer.id]);
  t.is(offers.rows[0]?.state, 'withdrawn');
  const legs = await service.pool.query<{
    id: string;
    role: string;
    remote: string;
    state: string;
    packets_in: string;
    packets_out: string;
  }>("SELECT id, role, remote, state, packets_in, packets_out FROM call_legs WHERE call_id = $1 AND role = 'cell'", [
    ended.id,
  ]);
  const leg = legs.rows[0];
  t.is(legs.rows.length, 1);
  t.is(leg?.state, 'ended');
  t.is(leg?.remote, `${cell} via far-${port}`);
  // The caller's audio went to the cell and its echo came back.
  t.true(Number(leg?.packets_out) > 50 && Number(leg?.packets_in) > 50, JSON.stringify(leg));
  const events = await eventsOf(ended.id);
  t.deepEqual(
    events.map((event) => event.type),
    ['call.started', 'call.answered', 'call.ringing', 'call.connected', 'call.ended'],
  );
  t.like(events[2]?.payload.ring as Record<string, unknown>, {
    ringSeq: 1,
    memberIds: [],
    externalUserIds: ['alice'],
    offerId: offer.id,
  });
  t.deepEqual(events[3]?.payload.leg, { id: leg?.id, role: 'cell', memberId: null, externalUserId: null });
  t.like(events[4]?.payload, { connected: true, call: { endReason: 'completed' } });
});

test('a cell that does not answer within timeoutSecs is cancelled (CANCEL) and the plan takes next', async (t) => {
  const port = await freeUdpPort();
  const far = startSippServer({ scenario: 'uas-no-answer', port, mediaPort: await freeUdpPort() });
  const { line } = await cellLine(t, port, 5, false);
  const started = Date.now();
  const run = await runSipp({ scenario: 'answered', sipPort, dialed: line.e164.slice(1) });
  t.is(run.code, 0, sippFailed(run));
  t.true(Date.now() - started >= 5000, 'rang for timeoutSecs first');
  // sipp as the far end got the CANCEL (its scenario waits for it).
  const farEnd = await far.finished;
  t.is(farEnd.code, 0, farEnd.stderr);
  const ended = await endedCallTo(line.e164);
  t.is(ended.end_reason, 'plan_hangup');
  t.deepEqual(ended.steps_taken, ['r', 'bye']);
  const legs = await service.pool.query<{ state: string }>(
    "SELECT state FROM call_legs WHERE call_id = $1 AND role = 'cell'",
    [ended.id],
  );
  t.deepEqual(
    legs.rows.map((row) => row.state),
    ['ended'],
  );
  const events = await eventsOf(ended.id);
  t.deepEqual(
    events.map((event) => event.type),
    ['call.started', 'call.answered', 'call.ringing', 'call.ended'],
  );
  const ring = events[2]?.payload.ring as Record<string, unknown>;
  t.like(ring, { ringSeq: 1, memberIds: [], externalUserIds: [], offerId: null });
  t.like(events[3]?.payload, { connected: false, call: { endReason: 'plan_hangup' } });
});
