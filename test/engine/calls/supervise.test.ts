/**
 * Supervision (operation 56, docs/contact-center.md "Call control") on the real engine, with audio checked: sipp
 * calls a number whose plan queues the caller for one agent; the caller's audio is a socket of the test's
 * (test/helpers/rtp-phone.ts) speaking 1 kHz; the agent's device is a stand-in browser (a plain `@roamhq/wrtc` peer
 * connection) speaking 700 Hz; the supervisor, another member of the workspace, has a stand-in browser of their own
 * speaking 500 Hz. Goertzel shares of each tone in what each side hears tell who hears whom:
 *
 * - listen: the supervisor hears the caller and the agent, neither of them the supervisor;
 * - whisper (the mode changed on the live leg): the agent hears the supervisor, the caller does not;
 * - barge: both do; held, the caller hears the hold music alone, and resumed the barge goes on; back to listen:
 *   neither;
 * - the supervisor hangs up: caller and agent on the plain bridge again;
 * - a blind transfer releases the agent (the call goes on): the supervisor's leg is hung up with the connection;
 * - a second supervisor answering takes the mix over and the first one's leg is hung up; the call hung up ends the
 *   supervisor's leg.
 */
import { randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import { registerDevice, renewPresence } from '../../../core/devices/devices.ts';
import { createMember } from '../../../core/identity/members.ts';
import { exitPastWrtc, musicShare, sippFailed, startEngineService } from '../../helpers/engine-service.ts';
import {
  accept,
  type Agent,
  callRow,
  callTo,
  nextOffer,
  type QueueLine,
  queueLine,
  setAvailable,
} from '../../helpers/queue-lines.ts';
import { type RtpPhone, startRtpPhone } from '../../helpers/rtp-phone.ts';
import type { TestService } from '../../helpers/service.ts';
import { runSipp, type SippRun } from '../../helpers/sipp.ts';
import { until } from '../../helpers/until.ts';
import { answerOffer, type FakeBrowser, share, sine, tonePower } from '../../helpers/webrtc-browser.ts';

let service: TestService;
let sipPort: number;

test.before(async () => {
  exitPastWrtc();
  ({ service, sipPort } = await startEngineService());
});

test.after.always(async () => {
  await service?.close();
});

/** A stand-in browser answering `offer`, speaking `frequency` (48 kHz, 10 ms chunks) until the test ends. */
async function speakingBrowser(t: ExecutionContext, sdpOffer: string, frequency: number): Promise<FakeBrowser> {
  const browser = await answerOffer(sdpOffer);
  const tone = sine(frequency, 48000);
  const speaking = setInterval(() => browser.send(tone(480)), 10);
  t.teardown(() => {
    clearInterval(speaking);
    browser.close();
  });
  return browser;
}

/** A member of the line's workspace with a browser device kept present: the supervisor. */
async function supervisorOf(t: ExecutionContext, center: QueueLine): Promise<Agent> {
  const member = await createMember(service.pool, {
    workspaceId: center.workspaceId,
    email: `supervisor-${randomUUID()}@example.com`,
    scopes: ['calls:supervise'],
  });
  const registered = await registerDevice(
    service.pool,
    center.workspaceId,
    { memberId: member.id },
    { kind: 'browser', name: 'supervisor', clientId: null },
  );
  if (registered.outcome !== 'created') throw new Error(`device: ${registered.outcome}`);
  const presence = setInterval(() => void renewPresence(service.pool, registered.device.id).catch(() => {}), 20_000);
  t.teardown(() => clearInterval(presence));
  return { memberId: member.id, deviceId: registered.device.id };
}

interface Connected {
  center: QueueLine;
  callId: string;
  phone: RtpPhone;
  agent: FakeBrowser;
  sipp: Promise<SippRun>;
}

/**
 * A caller (1 kHz) in the queue, connected to the agent (700 Hz), each hearing the other. `held`: the caller's sipp
 * takes the hold and resume re-INVITEs of one hold.
 */
async function connectedCall(t: ExecutionContext, held = false): Promise<Connected> {
  const center = await queueLine(t, service, { agents: 1 });
  const agentMember = center.agents[0]!;
  const phone = await startRtpPhone();
  t.teardown(() => phone.close());
  const sipp = runSipp({
    scenario: held ? 'caller-held' : 'answered',
    sipPort,
    dialed: center.line.e164.slice(1),
    replacements: { AUDIO_PORT: String(phone.port), HOLD_MS: '1000' },
    timeoutSeconds: 150,
  });
  const callId = await callTo(service, center.line.e164);
  await setAvailable(service, center.workspaceId, agentMember);
  const offer = await nextOffer(service, agentMember);
  const agent = await speakingBrowser(t, offer.sdp_offer, 700);
  await accept(service, agentMember, offer, agent.answer);
  await agent.connected();
  await until('connected', async () => ((await callRow(service, callId))?.state === 'connected' ? true : undefined));
  phone.speak(1000);
  await until('the agent at the caller', () => (share(phone.heard, 700, 8000, 1600) > 0.5 ? true : undefined));
  await until('the caller at the agent', () => (share(agent.heard, 1000, agent.rate, 4800) > 0.5 ? true : undefined));
  return { center, callId, phone, agent, sipp };
}

/** The supervisor's device is offered the leg (a request of `mode`), answers, and hears caller and agent. */
async function superviseAnswered(t: ExecutionContext, call: Connected, supervisor: Agent, mode: string) {
  const asked = await call.center.line.api('POST', `/calls/${call.callId}/supervise`, {
    memberId: supervisor.memberId,
    mode,
  });
  t.is(asked.status, 200, asked.text);
  t.like(asked.body, { id: call.callId, state: 'connected', supervision: { memberId: supervisor.memberId, mode } });
  const offer = await nextOffer(service, supervisor);
  const browser = await speakingBrowser(t, offer.sdp_offer, 500);
  await accept(service, supervisor, offer, browser.answer);
  await browser.connected();
  await until('caller and agent at the supervisor', () =>
    share(browser.heard, 1000, browser.rate, 9600) > 0.2 && share(browser.heard, 700, browser.rate, 9600) > 0.2
      ? true
      : undefined,
  );
  return browser;
}

/** The supervisor's browser leg on the call, once in `state` (and, ended, once their device is free again). */
async function supervisorLeg(callId: string, supervisor: Agent, state: string) {
  return until(`the supervisor's leg ${state}`, async () => {
    const result = await service.pool.query<{ state: string; busy: boolean }>(
      `SELECT l.state, d.busy_call_id IS NOT NULL AS busy FROM call_legs l, devices d
        WHERE l.call_id = $1 AND l.remote = 'device ' || $2 AND d.id = $2::uuid`,
      [callId, supervisor.deviceId],
    );
    const row = result.rows[0];
    // An ended leg frees its device just after.
    return row?.state === state && (state !== 'ended' || !row.busy) ? row : undefined;
  });
}

/** The next `samples` of `heard` from now on, once they have come. */
async function nextHeard(label: string, heard: readonly number[], samples: number): Promise<number[]> {
  const mark = heard.length;
  await until(label, () => (heard.length - mark >= samples ? true : undefined));
  return heard.slice(mark, mark + samples);
}

test('listen, whisper, barge and back on one live supervision, then the supervisor hangs up: audio at every side', async (t) => {
  const call = await connectedCall(t, true);
  const { center, callId, phone, agent } = call;
  const supervisor = await supervisorOf(t, center);
  const sup = await superviseAnswered(t, call, supervisor, 'listen');
  await supervisorLeg(callId, supervisor, 'answered');
  t.is((await callRow(service, callId))?.state, 'connected', 'the call stays connected to the agent');

  // Listen: a second of each party's audio without the supervisor in it, and still each other.
  const callerListen = await nextHeard('a second at the caller', phone.heard, 8000);
  const agentListen = await nextHeard('a second at the agent', agent.heard, agent.rate);
  t.true(
    tonePower(callerListen, 500, 8000) < 0.05,
    `listen: supervisor at the caller ${tonePower(callerListen, 500, 8000)}`,
  );
  t.true(tonePower(agentListen, 500, agent.rate) < 0.05, `listen: supervisor at the agent`);
  t.true(tonePower(callerListen, 700, 8000) > 0.5, 'listen: the agent at the caller');
  t.true(tonePower(agentListen, 1000, agent.rate) > 0.5, 'listen: the caller at the agent');

  const mode = async (next: string) => {
    const changed = await center.line.api('POST', `/calls/${callId}/supervise`, {
      memberId: supervisor.memberId,
      mode: next,
    });
    t.is(changed.status, 200, changed.text);
  };

  // Whisper: the agent hears the supervisor (and the caller); the caller does not.
  await mode('whisper');
  await until('the supervisor and the caller at the agent', () =>
    share(agent.heard, 500, agent.rate, 4800) > 0.2 && share(agent.heard, 1000, agent.rate, 4800) > 0.2
      ? true
      : undefined,
  );
  const callerWhisper = await nextHeard('a second at the caller', phone.heard, 8000);
  t.true(
    tonePower(callerWhisper, 500, 8000) < 0.05,
    `whisper: supervisor at the caller ${tonePower(callerWhisper, 500, 8000)}`,
  );
  t.true(tonePower(callerWhisper, 700, 8000) > 0.5, 'whisper: the agent at the caller');
  // The supervisor still hears both, and never themself.
  const supWhisper = await nextHeard('a second at the supervisor', sup.heard, sup.rate);
  t.true(tonePower(supWhisper, 1000, sup.rate) > 0.2 && tonePower(supWhisper, 700, sup.rate) > 0.2);
  t.true(tonePower(supWhisper, 500, sup.rate) < 0.05, 'the supervisor not sent back to the supervisor');

  // Barge: both hear the supervisor.
  await mode('barge');
  await until('the supervisor at the caller and the agent, who still hear each other', () =>
    share(phone.heard, 500, 8000, 1600) > 0.2 &&
    share(phone.heard, 700, 8000, 1600) > 0.2 &&
    share(agent.heard, 500, agent.rate, 4800) > 0.2 &&
    share(agent.heard, 1000, agent.rate, 4800) > 0.2
      ? true
      : undefined,
  );

  // Hold works as without supervision: the caller hears the music, neither the agent nor the supervisor; resumed,
  // the barge goes on.
  const held = await center.line.api('POST', `/calls/${callId}/hold`, { hold: true });
  t.is(held.status, 200, held.text);
  await until('hold music alone at the caller', () =>
    musicShare(phone.heard) > 0.2 &&
    share(phone.heard, 500, 8000, 4000) < 0.05 &&
    share(phone.heard, 700, 8000, 4000) < 0.05
      ? true
      : undefined,
  );
  t.is((await center.line.api('POST', `/calls/${callId}/hold`, { hold: false })).status, 200);
  await until('the agent and the supervisor at the caller again', () =>
    share(phone.heard, 500, 8000, 1600) > 0.2 && share(phone.heard, 700, 8000, 1600) > 0.2 ? true : undefined,
  );

  // Back to listen: neither hears the supervisor any more.
  await mode('listen');
  await until('the supervisor gone from both', () =>
    share(phone.heard, 500, 8000, 1600) < 0.05 && share(agent.heard, 500, agent.rate, 4800) < 0.05 ? true : undefined,
  );

  // The supervisor hangs up by closing their browser: the engine hears its DTLS close at once (the G.711 stack,
  // docs/phones.md "Legs"), their leg ends, the device is free, and the two are on the plain bridge again.
  sup.close();
  await supervisorLeg(callId, supervisor, 'ended');
  await until('the agent at the caller after', () => (share(phone.heard, 700, 8000, 1600) > 0.5 ? true : undefined));
  await until('the caller at the agent after', () =>
    share(agent.heard, 1000, agent.rate, 4800) > 0.5 ? true : undefined,
  );
  t.is((await callRow(service, callId))?.state, 'connected');

  const hungUp = await center.line.api('POST', `/calls/${callId}/hangup`);
  t.is(hungUp.status, 200, hungUp.text);
  phone.quiet();
  const run = await call.sipp;
  t.is(run.code, 0, sippFailed(run));
});

test("a blind transfer releases the agent: the supervisor's leg is hung up with the connection, the call goes on", async (t) => {
  const call = await connectedCall(t);
  const supervisor = await supervisorOf(t, call.center);
  const target = await supervisorOf(t, call.center);
  await superviseAnswered(t, call, supervisor, 'listen');
  await supervisorLeg(call.callId, supervisor, 'answered');
  const moved = await call.center.line.api('POST', `/calls/${call.callId}/transfer`, {
    target: { memberId: target.memberId },
  });
  t.is(moved.status, 200, moved.text);
  await supervisorLeg(call.callId, supervisor, 'ended');
  // The caller is being moved on: the target's device is offered the call.
  await nextOffer(service, target);
  t.is((await callRow(service, call.callId))?.ended_at, null, 'the call goes on');
  const hungUp = await call.center.line.api('POST', `/calls/${call.callId}/hangup`);
  t.is(hungUp.status, 200, hungUp.text);
  call.phone.quiet();
  const run = await call.sipp;
  t.is(run.code, 0, sippFailed(run));
});

test('one supervisor mixed in at a time: a second supervisor answering hangs up the first', async (t) => {
  const call = await connectedCall(t);
  const first = await supervisorOf(t, call.center);
  const second = await supervisorOf(t, call.center);
  await superviseAnswered(t, call, first, 'listen');
  await supervisorLeg(call.callId, first, 'answered');
  await superviseAnswered(t, call, second, 'barge');
  await supervisorLeg(call.callId, first, 'ended');
  await until('the second supervisor at the caller and the agent', () =>
    share(call.phone.heard, 500, 8000, 1600) > 0.2 && share(call.agent.heard, 500, call.agent.rate, 4800) > 0.2
      ? true
      : undefined,
  );
  t.is((await supervisorLeg(call.callId, second, 'answered')).state, 'answered');
  const hungUp = await call.center.line.api('POST', `/calls/${call.callId}/hangup`);
  t.is(hungUp.status, 200, hungUp.text);
  await supervisorLeg(call.callId, second, 'ended');
  call.phone.quiet();
  const run = await call.sipp;
  t.is(run.code, 0, sippFailed(run));
});
