/**
 * A queue's callback on the real engine (docs/contact-center.md, "Queue entries and distribution"): a caller in a
 * queue with `offerCallback` hears the offer after 30 s of hold music, presses 1 (RFC 4733, from the test's socket
 * that is the caller's audio, test/helpers/rtp-phone.ts), hears a goodbye and gets the engine's BYE; the entry keeps
 * its place as `callback`. When the agent becomes available, their device rings first; once it answers, the engine
 * dials the caller back through the number's carrier (a second sipp as the far end, echoing the audio) and bridges
 * the two: the entry is `connected`. A callback nobody takes leaves `abandoned` at the step's `maxWaitSecs` and the
 * call ends `callback_expired`.
 */
import { farEndCarrier } from '../../../../helpers/phone-lines.ts';
import test from 'ava';
import {
  accept,
  agentTimeline,
  callRow,
  callTimeline,
  callTo,
  endedCall,
  entryOf,
  nextOffer,
  queueLine,
  setAvailable,
} from '../../../../helpers/queue-lines.ts';
import { levelOf, startRtpPhone } from '../../../../helpers/rtp-phone.ts';
import type { TestService } from '../../../../helpers/service.ts';
import { runSipp } from '../../../../helpers/sipp.ts';
import { answerOffer, sine, tonePower } from '../../../../helpers/webrtc-browser.ts';
import { callbackPromptMs } from '../../../../../engine/calls/steps/queue/callback.ts';
import { exitPastWrtc, musicShare, startEngineService } from '../../../../helpers/engine-service.ts';
import { until } from '../../../../helpers/until.ts';

let service: TestService;

test.before(async () => {
  exitPastWrtc();
  ({ service } = await startEngineService());
});

test.after.always(async () => {
  await service?.close();
});

test('the caller asks to be called back, keeps their place, and is dialled back once the agent answers', async (t) => {
  // The number's carrier is a second sipp: it answers the callback, echoes its audio, and hangs up 8 s later.
  const { carrier, far } = await farEndCarrier(t, service, 8_000);
  const center = await queueLine(t, service, { agents: 1, offerCallback: true, maxWaitSecs: 600 });
  await service.pool.query('UPDATE phone_numbers SET carrier = $2 WHERE e164 = $1', [center.line.e164, carrier]);
  const agent = center.agents[0]!;

  const phone = await startRtpPhone();
  t.teardown(() => phone.close());
  const started = Date.now();
  const sipp = runSipp({
    scenario: 'answered',
    sipPort: service.sipPort as number,
    dialed: center.line.e164.slice(1),
    replacements: { AUDIO_PORT: String(phone.port) },
    timeoutSeconds: 150,
  });
  const callId = await callTo(service, center.line.e164);
  await until('hold music', () => (levelOf(phone.heard) > 200 && musicShare(phone.heard) > 0.2 ? true : undefined));
  // After callbackPromptMs of music, the offer is spoken (speech: loud, not the music's notes).
  await until(
    'the callback offer',
    () => (levelOf(phone.heard) > 200 && musicShare(phone.heard) < 0.1 ? true : undefined),
    callbackPromptMs + 30_000,
  );
  t.true(Date.now() - started >= callbackPromptMs, 'after the music played for callbackPromptMs');
  await phone.press('1');
  // A goodbye, then the engine's BYE: sipp's scenario ends.
  const run = await sipp;
  t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
  const entry = await until('the callback entry', async () => {
    const found = await entryOf(service, callId);
    return found?.state === 'callback' ? found : undefined;
  });
  t.is(entry.callback_number, '+15550001111', "the caller's number");
  t.is((await callRow(service, callId))?.ended_at, null, 'the call waits on without the caller');

  // The agent is free: their device rings first; answered, the caller is dialled back and bridged to them.
  await setAvailable(service, center.workspaceId, agent);
  const offer = await nextOffer(service, agent);
  t.is(offer.call_id, callId);
  const browser = await answerOffer(offer.sdp_offer);
  const tone = sine(700, 48000);
  const speaking = setInterval(() => browser.send(tone(480)), 10);
  t.teardown(() => {
    clearInterval(speaking);
    browser.close();
  });
  await accept(service, agent, offer, browser.answer);
  await browser.connected();
  // The far end echoes what it hears: the agent hears their own tone come back through the caller's leg.
  await until('the agent bridged to the called-back caller', () => {
    const recent = browser.heard.slice(-4800);
    return browser.rate > 0 && recent.length === 4800 && tonePower(recent, 700, browser.rate) > 0.5 ? true : undefined;
  });
  t.is((await entryOf(service, callId))?.state, 'connected');
  // The called-back caller hangs up: the call is over.
  const farEnd = await far.finished;
  t.is(farEnd.code, 0, farEnd.stderr);
  const ended = await endedCall(service, callId);
  t.is(ended?.end_reason, 'caller_hangup');
  t.deepEqual(await callTimeline(service, callId), [
    'call.started',
    'call.answered',
    'queue.entered:waiting',
    'call.ringing',
    'queue.left:connected',
    'call.connected',
    'call.ended',
  ]);
  const legs = await service.pool.query<{ role: string; remote: string; state: string; packets_in: string }>(
    'SELECT role, remote, state, packets_in FROM call_legs WHERE call_id = $1 ORDER BY started_at',
    [callId],
  );
  t.deepEqual(
    legs.rows.map((leg) => [leg.role, leg.state]),
    [
      ['caller', 'ended'],
      ['browser', 'ended'],
      ['callback', 'ended'],
    ],
  );
  t.is(legs.rows[2]?.remote, `+15550001111 via ${carrier}`);
  t.true(Number(legs.rows[2]?.packets_in) > 50, 'audio came back from the caller');
  await until('the agent available again', async () =>
    (await agentTimeline(service, agent)).at(-1) === 'on_call>available:system' ? true : undefined,
  );
  t.deepEqual(await agentTimeline(service, agent), [
    `offline>available:member:${agent.memberId}`,
    'available>offered:system',
    'offered>on_call:system',
    'on_call>available:system',
  ]);
});

test('a callback entry waits no longer than the step’s maxWaitSecs: it leaves abandoned and the call ends', async (t) => {
  const center = await queueLine(t, service, { agents: 1, offerCallback: true, maxWaitSecs: 40 });
  const phone = await startRtpPhone();
  t.teardown(() => phone.close());
  const sipp = runSipp({
    scenario: 'answered',
    sipPort: service.sipPort as number,
    dialed: center.line.e164.slice(1),
    replacements: { AUDIO_PORT: String(phone.port) },
    timeoutSeconds: 150,
  });
  const callId = await callTo(service, center.line.e164);
  await until('hold music', () => (levelOf(phone.heard) > 200 && musicShare(phone.heard) > 0.2 ? true : undefined));
  await until(
    'the callback offer',
    () => (levelOf(phone.heard) > 200 && musicShare(phone.heard) < 0.1 ? true : undefined),
    callbackPromptMs + 30_000,
  );
  await phone.press('1');
  const run = await sipp;
  t.is(run.code, 0, `${run.stderr}\n${run.errors}`);
  await until('the callback entry', async () =>
    (await entryOf(service, callId))?.state === 'callback' ? true : undefined,
  );
  // Nobody takes it: at maxWaitSecs from entering, the entry leaves and the call ends.
  const ended = await endedCall(service, callId);
  t.is(ended?.end_reason, 'callback_expired');
  t.is((await entryOf(service, callId))?.state, 'abandoned');
  const times = await service.pool.query<{ waited: number }>(
    `SELECT extract(epoch FROM c.ended_at - e.enqueued_at)::float AS waited
       FROM queue_entries e JOIN calls c ON c.id = e.call_id WHERE e.call_id = $1`,
    [callId],
  );
  t.true((times.rows[0]?.waited ?? 0) >= 40, `ended ${times.rows[0]?.waited} s after entering`);
  t.deepEqual(await callTimeline(service, callId), [
    'call.started',
    'call.answered',
    'queue.entered:waiting',
    'queue.left:abandoned',
    'call.ended',
  ]);
});
