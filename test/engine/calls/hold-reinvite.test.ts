/**
 * Hold's re-INVITEs (operation 54, docs/contact-center.md "Hold"; engine/calls/hold-signal.ts, legs/sip-dialog.ts) on
 * the real engine, with sipp as the caller's carrier and as a registered desk phone:
 *
 * - A call rung through to a desk phone (sipp registered as the user's `sip` device) and held: the caller's carrier
 *   gets a re-INVITE with a=sendonly and hears the hold music, the phone one with a=inactive; the caller's own
 *   re-INVITE while held is answered a=sendonly; resumed, both get a=sendrecv; the o= versions go up by one each time
 *   (the scenarios check the SDP). Then the phone holds the call itself (a=sendonly, answered a=recvonly on our
 *   dialled dialog), resumes and hangs up.
 * - The phone hanging up while held: the call ends, and the caller gets our BYE with no resume re-INVITE before it.
 * - A carrier that answers the hold's re-INVITE 491 and then the retry 488, and one that never answers it: the hold
 *   applies to the media all the same (the music at the caller, the agent, a stand-in browser, no longer heard), the
 *   failure is counted by result, no resume re-INVITE follows, the call goes on and resumes.
 */
import test, { type ExecutionContext } from 'ava';
import { freeUdpPort } from '../../helpers/free-port.ts';
import { exitPastWrtc, musicShare, sippFailed, startEngineService } from '../../helpers/engine-service.ts';
import { deskLine as registeredDesk } from '../../helpers/phone-lines.ts';
import { accept, callRow, callTo, endedCall, nextOffer, queueLine, setAvailable } from '../../helpers/queue-lines.ts';
import { levelOf, type RtpPhone, startRtpPhone } from '../../helpers/rtp-phone.ts';
import type { TestService } from '../../helpers/service.ts';
import { runSipp, startMd5FirstEngine, startSippServer } from '../../helpers/sipp.ts';
import { until } from '../../helpers/until.ts';
import { answerOffer, sine, tonePower } from '../../helpers/webrtc-browser.ts';

const clock = { now: () => new Date() };
let service: TestService;
let sipPort: number;
let md5Engine: Awaited<ReturnType<typeof startMd5FirstEngine>>;

test.before(async () => {
  exitPastWrtc();
  ({ service, sipPort } = await startEngineService({ clock }));
  md5Engine = await startMd5FirstEngine(service, clock);
});

test.after.always(async () => {
  await md5Engine?.close();
  await service?.close();
});

/** A counter of /metrics (0 when not there yet). */
async function counter(name: string, labels: string): Promise<number> {
  const metrics = await service.request('GET', '/metrics');
  const line = metrics.text.split('\n').find((entry) => entry.startsWith(`${name}{${labels}} `));
  return Number(line?.split(' ')[1] ?? 0);
}

const reinvites = (result: string) => counter('switchboard_sip_hold_reinvites_total', `result="${result}"`);
const invitesIn = () => counter('switchboard_sip_messages_total', 'direction="in",kind="INVITE"');

/** Resolves once the re-INVITEs counted as `result` are `count` more than `before`. */
async function counted(result: string, before: number, count: number, ms = 30_000): Promise<void> {
  await until(
    `${count} re-INVITE(s) ${result}`,
    async () => ((await reinvites(result)) >= before + count ? true : undefined),
    ms,
  );
}

/** The hold music, and not `notHeard` (Hz), at the caller. */
function musicAtCaller(phone: RtpPhone, notHeard: number): Promise<true> {
  return until('hold music at the caller', () => {
    const recent = phone.heard.slice(-4000);
    return levelOf(phone.heard) > 200 && musicShare(phone.heard) > 0.2 && tonePower(recent, notHeard, 8000) < 0.05
      ? true
      : undefined;
  });
}

/** `deskLine` (helpers/phone-lines.ts) on the MD5-first engine, registered from `port`. */
function deskLine(t: ExecutionContext, port: number) {
  return registeredDesk(t, service, {
    sipPort: md5Engine.engine.sipPort,
    localPort: port,
    expires: 120,
    now: () => clock.now(),
  });
}

test.serial(
  'held: the caller gets a=sendonly and the desk phone a=inactive, resumed a=sendrecv; their own holds are answered',
  async (t) => {
    const port = await freeUdpPort();
    const { line, username } = await deskLine(t, port);
    const desk = startSippServer({
      scenario: 'device-held',
      port,
      mediaPort: await freeUdpPort(),
      timeoutSeconds: 60,
      replacements: { USERNAME: username },
    });
    t.teardown(() => desk.stop());
    const phone = await startRtpPhone();
    t.teardown(() => phone.close());
    const failedBefore = (await reinvites('refused')) + (await reinvites('timeout')) + (await reinvites('unsent'));
    const caller = runSipp({
      scenario: 'caller-held-reinvites',
      sipPort,
      dialed: line.e164.slice(1),
      replacements: { AUDIO_PORT: String(phone.port) },
      timeoutSeconds: 60,
    });
    const callId = await callTo(service, line.e164);
    await until('connected', async () => ((await callRow(service, callId))?.state === 'connected' ? true : undefined));
    phone.speak(1000);

    const answered = await reinvites('answered');
    // The next INVITE in is the caller's own re-INVITE while held (the phone sends its own only once resumed).
    const invites = await invitesIn();
    const held = await line.api('POST', `/calls/${callId}/hold`, { hold: true });
    t.is(held.status, 200, held.text);
    // The caller's and the phone's re-INVITEs answered; the caller hears the music (the phone echoes the caller).
    await counted('answered', answered, 2);
    await musicAtCaller(phone, 1000);
    // The caller's own re-INVITE while held (answered a=sendonly, the scenario checks) before the resume.
    await until("the caller's re-INVITE", async () => ((await invitesIn()) > invites ? true : undefined));

    const resumed = await line.api('POST', `/calls/${callId}/hold`, { hold: false });
    t.is(resumed.status, 200, resumed.text);
    await counted('answered', answered, 4);

    // The phone holds and resumes the call itself, then hangs up: the call ends completed, the caller gets our BYE.
    const deskRun = await desk.finished;
    t.is(deskRun.code, 0, sippFailed(deskRun));
    const callerRun = await caller;
    t.is(callerRun.code, 0, sippFailed(callerRun));
    t.is((await endedCall(service, callId)).end_reason, 'completed');
    t.is((await reinvites('refused')) + (await reinvites('timeout')) + (await reinvites('unsent')), failedBefore);
  },
);

test.serial('the desk phone hangs up while held: the call ends with no resume re-INVITE to the caller', async (t) => {
  const port = await freeUdpPort();
  const { line, username } = await deskLine(t, port);
  const desk = startSippServer({
    scenario: 'device-held-hangs-up',
    port,
    mediaPort: await freeUdpPort(),
    timeoutSeconds: 60,
    replacements: { USERNAME: username },
  });
  t.teardown(() => desk.stop());
  const caller = runSipp({ scenario: 'caller-held-ends', sipPort, dialed: line.e164.slice(1), timeoutSeconds: 60 });
  const callId = await callTo(service, line.e164);
  await until('connected', async () => ((await callRow(service, callId))?.state === 'connected' ? true : undefined));
  const held = await line.api('POST', `/calls/${callId}/hold`, { hold: true });
  t.is(held.status, 200, held.text);
  // The caller's scenario takes our BYE next: a resume re-INVITE before it would fail it.
  const deskRun = await desk.finished;
  t.is(deskRun.code, 0, sippFailed(deskRun));
  const callerRun = await caller;
  t.is(callerRun.code, 0, sippFailed(callerRun));
  t.is((await endedCall(service, callId)).end_reason, 'completed');
});

/**
 * A queued caller (sipp running `scenario`, its audio the test's socket) answered by a stand-in browser agent that
 * sends a 700 Hz tone; resolves once the two hear each other.
 */
async function connectedToAgent(t: ExecutionContext, scenario: 'caller-held-refuses' | 'caller-held-silent') {
  const center = await queueLine(t, service, { agents: 1 });
  const agent = center.agents[0]!;
  const phone = await startRtpPhone();
  t.teardown(() => phone.close());
  const sipp = runSipp({
    scenario,
    sipPort,
    dialed: center.line.e164.slice(1),
    replacements: { AUDIO_PORT: String(phone.port) },
    timeoutSeconds: 120,
  });
  const callId = await callTo(service, center.line.e164);
  await setAvailable(service, center.workspaceId, agent);
  const offer = await nextOffer(service, agent);
  const browser = await answerOffer(offer.sdp_offer);
  const tone = sine(700, 48000);
  const speaking = setInterval(() => browser.send(tone(480)), 10);
  t.teardown(() => {
    clearInterval(speaking);
    browser.close();
  });
  await accept(service, agent, offer, browser.answer);
  await browser.connected();
  await until('connected', async () => ((await callRow(service, callId))?.state === 'connected' ? true : undefined));
  const agentHeard = () => tonePower(phone.heard.slice(-1600), 700, 8000) > 0.5 && musicShare(phone.heard) < 0.1;
  await until('the agent at the caller', () => (agentHeard() ? true : undefined));
  return { api: center.line.api, callId, phone, sipp, agentHeard };
}

/** Holds (the music, not the agent), waits for `failure` to be counted, resumes (the agent again) and hangs up. */
async function heldDespite(
  t: ExecutionContext,
  scenario: 'caller-held-refuses' | 'caller-held-silent',
  failure: string,
) {
  const { api, callId, phone, sipp, agentHeard } = await connectedToAgent(t, scenario);
  const failed = await reinvites(failure);
  const answered = await reinvites('answered');
  const held = await api('POST', `/calls/${callId}/hold`, { hold: true });
  t.is(held.status, 200, held.text);
  t.like(held.body, { state: 'connected', hold: true });
  await musicAtCaller(phone, 700);
  // sip.js gives a re-INVITE without answer up after its transaction's 32 s (64 × T1).
  await counted(failure, failed, 1, 45_000);
  t.is((await callRow(service, callId))?.state, 'connected');
  await musicAtCaller(phone, 700);

  const resumed = await api('POST', `/calls/${callId}/hold`, { hold: false });
  t.is(resumed.status, 200, resumed.text);
  await until('the agent at the caller again', () => (agentHeard() ? true : undefined));
  const hungUp = await api('POST', `/calls/${callId}/hangup`);
  t.is(hungUp.status, 200, hungUp.text);
  phone.quiet();
  // No resume re-INVITE went (the carrier never took the hold): the scenario got our BYE next.
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  t.is(await reinvites('answered'), answered);
}

test.serial('a carrier that answers the hold 491, then the retry 488: held all the same, counted refused', (t) =>
  heldDespite(t, 'caller-held-refuses', 'refused'),
);

test.serial('a carrier that never answers the hold: held all the same, counted as a timeout after 32 s', (t) =>
  heldDespite(t, 'caller-held-silent', 'timeout'),
);
