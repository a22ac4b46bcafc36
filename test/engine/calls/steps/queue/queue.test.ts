/**
 * The `queue` step on the real engine (docs/contact-center.md): sipp calls a number whose plan puts the caller in a
 * queue; the caller's audio is a socket of the test's (test/helpers/rtp-phone.ts), so the test hears what the caller
 * hears and speaks for them. Agents are members with a browser device (a stand-in browser, a plain `@roamhq/wrtc`
 * peer connection, answers the engine's offer). Checked: hold music while waiting (and while the agent's device
 * rings), the offer accepted and bridged with audio both ways, `queue.*` and `agent.state_changed` events in order,
 * wrap-up then available; overflow at `maxWaitSecs`; the caller hanging up while waiting; offers not answered or
 * declined going back in line and offered again; two engines on one database, each holding a caller, sharing one
 * agent.
 */
import test from 'ava';
import {
  accept,
  agentState,
  agentTimeline,
  callRow,
  callTimeline,
  callTo,
  endedCall,
  decline,
  entryOf,
  nextOffer,
  queueLine,
  setAvailable,
  streamEvents,
} from '../../../../helpers/queue-lines.ts';
import { levelOf, startRtpPhone } from '../../../../helpers/rtp-phone.ts';
import type { TestService } from '../../../../helpers/service.ts';
import { runSipp, type SippRun, startEngineOn } from '../../../../helpers/sipp.ts';
import { answerOffer, sine, tonePower } from '../../../../helpers/webrtc-browser.ts';
import { exitPastWrtc, musicShare, sippFailed, startEngineService } from '../../../../helpers/engine-service.ts';
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

/** A caller on the number whose audio the test hears and makes (sipp waits for the engine's BYE). */
async function caller(
  t: Parameters<typeof queueLine>[0],
  e164: string,
  scenario: 'answered' | 'caller-hangs-up' = 'answered',
  holdMs = 1000,
) {
  const phone = await startRtpPhone();
  t.teardown(() => phone.close());
  const sipp = runSipp({
    scenario,
    sipPort,
    dialed: e164.slice(1),
    replacements: { AUDIO_PORT: String(phone.port), HOLD_MS: String(holdMs) },
    timeoutSeconds: 150,
  });
  return { phone, sipp, callId: await callTo(service, e164) };
}

test('a caller waits with hold music; the agent is offered the call, accepts, talks both ways, wraps up, is available again', async (t) => {
  const center = await queueLine(t, service, { agents: 1, wrapUpSecs: 2 });
  const agent = center.agents[0]!;
  const { phone, sipp, callId } = await caller(t, center.line.e164);
  // Nobody is available: the caller waits, hearing the hold music.
  await until('hold music at the caller', () =>
    levelOf(phone.heard) > 200 && musicShare(phone.heard) > 0.2 ? true : undefined,
  );
  t.is((await callRow(service, callId))?.state, 'queued');
  t.is((await entryOf(service, callId))?.state, 'waiting');

  await setAvailable(service, center.workspaceId, agent);
  const offer = await nextOffer(service, agent);
  t.is(offer.call_id, callId);
  t.is(offer.ring_seq, 1);
  t.is(await agentState(service, center.workspaceId, agent), 'offered');
  // While the agent's device rings, the caller still hears the music, not ringback.
  const ringingFrom = phone.heard.length;
  await until('music while it rings', () => (phone.heard.length - ringingFrom >= 4000 ? true : undefined));
  t.true(musicShare(phone.heard) > 0.2, `music share ${musicShare(phone.heard)}`);
  t.true(tonePower(phone.heard.slice(-4000), 425, 8000) < 0.05, 'no ringback');

  const browser = await answerOffer(offer.sdp_offer);
  const tone = sine(700, 48000); // no note of the hold music
  const speaking = setInterval(() => browser.send(tone(480)), 10);
  t.teardown(() => {
    clearInterval(speaking);
    browser.close();
  });
  await accept(service, agent, offer, browser.answer);
  await browser.connected();
  await until('connected', async () => ((await callRow(service, callId))?.state === 'connected' ? true : undefined));
  // The agent is heard at the caller (the music stopped), and the caller at the agent.
  phone.speak(1000);
  await until('the agent at the caller', () => {
    const recent = phone.heard.slice(-1600);
    return recent.length === 1600 && tonePower(recent, 700, 8000) > 0.5 ? true : undefined;
  });
  await until('the caller at the agent', () => {
    const recent = browser.heard.slice(-4800);
    return browser.rate > 0 && recent.length === 4800 && tonePower(recent, 1000, browser.rate) > 0.5 ? true : undefined;
  });
  t.is(await agentState(service, center.workspaceId, agent), 'on_call');

  // The application ends the call (operation 52): the caller gets the BYE, the agent wraps up, then is available.
  const hungUp = await center.line.api('POST', `/calls/${callId}/hangup`);
  t.is(hungUp.status, 200, hungUp.text);
  // Quiet at once: the call's RTP port goes back to the pool, and a later call there would latch onto this stream.
  phone.quiet();
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  const agentEvents = await until('the wrap-up to end', async () => {
    const found = await agentTimeline(service, agent);
    return found.length >= 5 ? found : undefined;
  });
  t.deepEqual(agentEvents, [
    `offline>available:member:${agent.memberId}`,
    'available>offered:system',
    'offered>on_call:system',
    'on_call>wrap_up:system',
    'wrap_up>available:system',
  ]);
  const changes = (await streamEvents(service, `agent:${agent.memberId}`)).map(
    (event) => (event.payload.agent as { changedAt: string }).changedAt,
  );
  t.true(Date.parse(changes[4]!) - Date.parse(changes[3]!) >= 2000, 'wrapped up for wrapUpSecs');
  await endedCall(service, callId);
  t.deepEqual(await callTimeline(service, callId), [
    'call.started',
    'call.answered',
    'queue.entered:waiting',
    'call.ringing',
    'queue.left:connected',
    'call.connected',
    'call.ended',
  ]);
  const events = await streamEvents(service, `call:${callId}`);
  t.like(events[3]?.payload.ring, { ringSeq: 1, memberIds: [agent.memberId], offerId: offer.id });
  t.like(events[5]?.payload.leg, { role: 'browser', memberId: agent.memberId });
  t.like(events[6]?.payload, { connected: true, call: { endReason: 'hangup_requested' } });
  t.is((await entryOf(service, callId))?.state, 'connected');
});

test('nobody answers within maxWaitSecs: the entry overflows and the plan takes overflow', async (t) => {
  const center = await queueLine(t, service, { agents: 1, maxWaitSecs: 10 });
  const started = Date.now();
  const { phone, sipp, callId } = await caller(t, center.line.e164);
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  t.true(Date.now() - started >= 10_000, 'waited maxWaitSecs first');
  t.true(phone.packets > 100, `the caller heard the hold music: ${phone.packets} packets`);
  const row = await endedCall(service, callId);
  t.deepEqual(row?.steps_taken, ['q', 'full']);
  t.is(row?.end_reason, 'plan_hangup');
  t.is((await entryOf(service, callId))?.state, 'overflowed');
  t.deepEqual(await callTimeline(service, callId), [
    'call.started',
    'call.answered',
    'queue.entered:waiting',
    'queue.left:overflowed',
    'call.ended',
  ]);
  t.deepEqual(await agentTimeline(service, center.agents[0]!), [], 'no agent was involved');
});

test('the caller hangs up while waiting: the entry is abandoned, queue.left before call.ended', async (t) => {
  const center = await queueLine(t, service, { agents: 1 });
  const { phone, sipp, callId } = await caller(t, center.line.e164, 'caller-hangs-up', 4000);
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  t.true(phone.packets > 50, `the caller heard the hold music: ${phone.packets} packets`);
  await endedCall(service, callId);
  t.is((await entryOf(service, callId))?.state, 'abandoned');
  t.deepEqual(await callTimeline(service, callId), [
    'call.started',
    'call.answered',
    'queue.entered:waiting',
    'queue.left:abandoned',
    'call.ended',
  ]);
  t.is((await callRow(service, callId))?.end_reason, 'caller_hangup');
});

test('an offer not answered in time, then one declined, go back in line; the third offer is answered', async (t) => {
  const center = await queueLine(t, service, { agents: 1 });
  const agent = center.agents[0]!;
  await setAvailable(service, center.workspaceId, agent);
  const { phone, sipp, callId } = await caller(t, center.line.e164);
  const first = await nextOffer(service, agent);
  // Not answered: 15 s later the entry is back in line, the agent available, and offered it again.
  const second = await nextOffer(service, agent, [first.id]);
  t.is(second.ring_seq, 2);
  t.true(levelOf(phone.heard) > 200, 'the caller still hears the music');
  await decline(service, agent, second);
  const third = await nextOffer(service, agent, [first.id, second.id]);
  t.is(third.ring_seq, 3);
  const browser = await answerOffer(third.sdp_offer);
  t.teardown(() => browser.close());
  await accept(service, agent, third, browser.answer);
  await browser.connected();
  await until('connected', async () => ((await callRow(service, callId))?.state === 'connected' ? true : undefined));
  const hungUp = await center.line.api('POST', `/calls/${callId}/hangup`);
  t.is(hungUp.status, 200, hungUp.text);
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  const offers = await service.pool.query<{ ring_seq: number; state: string }>(
    'SELECT ring_seq, state FROM offers WHERE call_id = $1 ORDER BY ring_seq',
    [callId],
  );
  t.deepEqual(
    offers.rows.map((row) => row.ring_seq),
    [1, 2, 3],
  );
  t.true(['withdrawn', 'expired'].includes(offers.rows[0]?.state ?? ''), offers.rows[0]?.state);
  t.deepEqual(
    offers.rows.slice(1).map((row) => row.state),
    ['declined', 'accepted'],
  );
  const agentEvents = await until('available again', async () => {
    const found = await agentTimeline(service, agent);
    return found.at(-1) === 'on_call>available:system' ? found : undefined;
  });
  t.deepEqual(agentEvents, [
    `offline>available:member:${agent.memberId}`,
    'available>offered:system',
    'offered>available:system',
    'available>offered:system',
    'offered>available:system',
    'available>offered:system',
    'offered>on_call:system',
    'on_call>available:system',
  ]);
  await endedCall(service, callId);
  t.deepEqual(await callTimeline(service, callId), [
    'call.started',
    'call.answered',
    'queue.entered:waiting',
    'call.ringing',
    'call.ringing',
    'call.ringing',
    'queue.left:connected',
    'call.connected',
    'call.ended',
  ]);
  const missed = await service.pool.query<{ missed_offers: number }>(
    'SELECT missed_offers FROM agent_states WHERE member_id = $1',
    [agent.memberId],
  );
  t.is(missed.rows[0]?.missed_offers, 0, 'answering resets the missed offers');
});

test('two engines on one database, each holding one caller, one agent: the callers connect in order, each offered once', async (t) => {
  const other = await startEngineOn(service, { engineId: `queue-b-${process.pid}` });
  t.teardown(() => other.close());
  const center = await queueLine(t, service, { agents: 1 });
  const agent = center.agents[0]!;
  const dialed = center.line.e164.slice(1);
  const callers: Array<{ callId: string; sipp: Promise<SippRun> }> = [];
  for (const port of [sipPort, other.engine.sipPort]) {
    const sipp = runSipp({ scenario: 'answered', sipPort: port, dialed, timeoutSeconds: 150 });
    const owner = port === sipPort ? undefined : other.engine.owner;
    const callId = await callTo(service, center.line.e164, owner);
    // In line before the next caller comes: the first caller is first in line.
    await until('in line', async () => ((await entryOf(service, callId))?.state === 'waiting' ? true : undefined));
    callers.push({ callId, sipp });
  }
  t.not((await callRow(service, callers[0]!.callId))?.engine_owner, other.engine.owner);
  t.is((await callRow(service, callers[1]!.callId))?.engine_owner, other.engine.owner);
  await setAvailable(service, center.workspaceId, agent);
  const seen: string[] = [];
  for (const { callId, sipp } of callers) {
    // The agent's one device is offered the caller first in line, by the engine that holds it.
    const offer = await nextOffer(service, agent, seen);
    seen.push(offer.id);
    t.is(offer.call_id, callId);
    const browser = await answerOffer(offer.sdp_offer);
    try {
      await accept(service, agent, offer, browser.answer);
      await browser.connected();
      await until('connected', async () =>
        (await callRow(service, callId))?.state === 'connected' ? true : undefined,
      );
      const hungUp = await center.line.api('POST', `/calls/${callId}/hangup`);
      t.is(hungUp.status, 200, hungUp.text);
      const run = await sipp;
      t.is(run.code, 0, sippFailed(run));
    } finally {
      browser.close();
    }
  }
  const agentEvents = await until('available again', async () => {
    const found = await agentTimeline(service, agent);
    return found.length === 7 ? found : undefined;
  });
  t.deepEqual(agentEvents, [
    `offline>available:member:${agent.memberId}`,
    'available>offered:system',
    'offered>on_call:system',
    'on_call>available:system',
    'available>offered:system',
    'offered>on_call:system',
    'on_call>available:system',
  ]);
  const entries = [];
  for (const { callId } of callers) {
    await endedCall(service, callId);
    t.deepEqual(await callTimeline(service, callId), [
      'call.started',
      'call.answered',
      'queue.entered:waiting',
      'call.ringing',
      'queue.left:connected',
      'call.connected',
      'call.ended',
    ]);
    const offers = await service.pool.query('SELECT id FROM offers WHERE call_id = $1', [callId]);
    t.is(offers.rowCount, 1, 'offered once');
    entries.push(await entryOf(service, callId));
  }
  t.true(entries[0]!.connected_at! < entries[1]!.connected_at!, 'in the order they came');
});
