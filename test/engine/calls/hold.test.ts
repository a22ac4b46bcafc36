/**
 * Hold and resume (operation 54, docs/contact-center.md "Call control") on the real engine: sipp calls a number whose
 * plan queues the caller for one agent; the caller's audio is a socket of the test's (test/helpers/rtp-phone.ts), so
 * the test hears what the caller hears; the agent's device is a stand-in browser (a plain `@roamhq/wrtc` peer
 * connection) that answers the offer and sends a 700 Hz tone. Connected, `hold: true` stops the bridge: the caller
 * hears the hold music (power in its notes, as queue.test.ts measures) and the agent's tone no longer, the agent
 * hears nothing of the caller; `hold: false` bridges them again.
 */
import test from 'ava';
import { accept, callRow, callTo, nextOffer, queueLine, setAvailable } from '../../helpers/queue-lines.ts';
import { levelOf, startRtpPhone } from '../../helpers/rtp-phone.ts';
import type { TestService } from '../../helpers/service.ts';
import { runSipp } from '../../helpers/sipp.ts';
import { answerOffer, share, sine, tonePower } from '../../helpers/webrtc-browser.ts';
import { exitPastWrtc, musicShare, sippFailed, startEngineService } from '../../helpers/engine-service.ts';
import { until } from '../../helpers/until.ts';

let service: TestService;
let sipPort: number;

test.before(async () => {
  exitPastWrtc();
  ({ service, sipPort } = await startEngineService());
});

test.after.always(async () => {
  await service?.close();
});

test('a connected call held: the caller hears hold music and not the agent, the agent hears nothing; resumed: both again', async (t) => {
  const center = await queueLine(t, service, { agents: 1 });
  const agent = center.agents[0]!;
  const phone = await startRtpPhone();
  t.teardown(() => phone.close());
  const sipp = runSipp({
    scenario: 'caller-held',
    sipPort,
    dialed: center.line.e164.slice(1),
    replacements: { AUDIO_PORT: String(phone.port), HOLD_MS: '1000' },
    timeoutSeconds: 150,
  });
  const callId = await callTo(service, center.line.e164);

  await setAvailable(service, center.workspaceId, agent);
  const offer = await nextOffer(service, agent);
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
  phone.speak(1000);
  await until('the agent at the caller', () => (share(phone.heard, 700, 8000, 1600) > 0.5 ? true : undefined));
  await until('the caller at the agent', () =>
    share(browser.heard, 1000, browser.rate, 4800) > 0.5 ? true : undefined,
  );

  // Hold: the music, and not the agent, at the caller.
  const held = await center.line.api('POST', `/calls/${callId}/hold`, { hold: true });
  t.is(held.status, 200, held.text);
  t.like(held.body, { id: callId, state: 'connected', hold: true });
  await until('hold music at the caller', () =>
    levelOf(phone.heard) > 200 && musicShare(phone.heard) > 0.2 && share(phone.heard, 700, 8000, 4000) < 0.05
      ? true
      : undefined,
  );
  // The agent hears nothing of the caller from now: no frames, or none with the caller's tone in them. The first half
  // second is left out: the browser's jitter buffer conceals the missing PCMU packets with a fading copy of the last.
  const agentMark = browser.heard.length;
  const callerMark = phone.heard.length;
  await until('two seconds on hold', () => (phone.heard.length - callerMark >= 16_000 ? true : undefined));
  const whileHeld = browser.heard.slice(agentMark + Math.round(browser.rate / 2));
  t.true(
    whileHeld.length < 1600 || tonePower(whileHeld, 1000, browser.rate) < 0.05,
    `the agent heard the caller on hold: ${whileHeld.length} samples, share ${tonePower(whileHeld, 1000, browser.rate)}`,
  );
  t.log(
    `on hold: the agent got ${whileHeld.length} samples; the caller's music share ${musicShare(phone.heard).toFixed(2)}`,
  );
  t.true(musicShare(phone.heard) > 0.2, `music share ${musicShare(phone.heard)}`);
  t.true(share(phone.heard, 700, 8000, 16_000) < 0.05, 'the agent was not heard at the caller on hold');

  // Holding again changes nothing (the request is recorded again, the music goes on).
  const again = await center.line.api('POST', `/calls/${callId}/hold`, { hold: true });
  t.is(again.status, 200, again.text);

  // Resume: the agent at the caller again, the music gone, the caller at the agent.
  const resumed = await center.line.api('POST', `/calls/${callId}/hold`, { hold: false });
  t.is(resumed.status, 200, resumed.text);
  await until('the agent at the caller again', () =>
    share(phone.heard, 700, 8000, 1600) > 0.5 && musicShare(phone.heard.slice(-1600)) < 0.1 ? true : undefined,
  );
  await until('the caller at the agent again', () =>
    share(browser.heard, 1000, browser.rate, 4800) > 0.5 ? true : undefined,
  );

  const hungUp = await center.line.api('POST', `/calls/${callId}/hangup`);
  t.is(hungUp.status, 200, hungUp.text);
  phone.quiet();
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  // An ended call is not held.
  const late = await center.line.api('POST', `/calls/${callId}/hold`, { hold: true });
  t.is(late.status, 409, late.text);
  t.is(late.body?.error?.code, 'call_ended');
});
