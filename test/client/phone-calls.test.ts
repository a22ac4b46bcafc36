/**
 * Calls answered on the service's own /phone page (client/softphone.ts) in Debian's Chromium, end to end on the real
 * engine (roles api and engine): sipp calls a number whose plan rings the user alice, and her page, signed in with a
 * pasted user token (devices:* and calls:*), shows the call and answers it (its Answer button). That call runs on
 * an engine of each media stack (`WEBRTC_MEDIA` g711, the default, and libwebrtc; docs/phones.md "Legs").
 *
 * The caller's media is not sipp's: sipp cannot record what it hears. The scenario (test/sipp/phone-caller.xml) does
 * the signalling only; its SDP names a UDP socket of this test (test/helpers/rtp-phone.ts) and it writes the engine's
 * SDP address and port, from the 200, to a file for that socket. The engine's caller media (engine/media/rtp.ts)
 * sends to the SDP address until a packet comes, then latches on that packet's source: the socket sends from the
 * very port the SDP named, so both are the socket, and the test checks that the engine's first packets (ringback)
 * came to it from the address the engine's SDP named. The socket sends a 1 kHz PCMU tone, measured in the page (an
 * AnalyserNode on the remote stream); the page's fake microphone plays a 440 Hz WAV, measured in what the engine
 * sends the socket (zero crossings and Goertzel power, decoded with alawmulaw's G.711, not the engine's).
 *
 * Also: two pages (two browsers, so two devices) of alice ring; one answers, the other's call ends `withdrawn`
 * (the time from the accept to the page showing it is logged) and a late accept of its offer is 409 call_conflict.
 * The events of the calls reach a real HTTPS webhook receiver in order.
 */
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import {
  callOfOffer,
  logEntry,
  pageHears,
  type PhoneBench,
  phoneLine,
  ringingOffer,
  startPhoneBench,
  webhookEvents,
} from '../helpers/phone-pages.ts';
import { startRtpPhone } from '../helpers/rtp-phone.ts';
import { isError } from '../helpers/service.ts';
import { runSipp } from '../helpers/sipp.ts';
import { tonePower, zeroCrossingFrequency } from '../helpers/webrtc-browser.ts';
import { exitPastWrtc, sippFailed } from '../helpers/engine-service.ts';
import { until } from '../helpers/until.ts';

// The engine in this worker makes RTCAudioSources: end it as `process.exit` would, or the binding's N-API cleanup
// crashes it at exit (see test/engine/media/webrtc.test.ts).
exitPastWrtc();

let bench: PhoneBench;
/** The same, its engine on the other media stack (`WEBRTC_MEDIA=libwebrtc`, docs/phones.md "Legs"). */
let libwebrtcBench: PhoneBench;

test.before(async () => {
  [bench, libwebrtcBench] = await Promise.all([startPhoneBench(), startPhoneBench({ WEBRTC_MEDIA: 'libwebrtc' })]);
});

test.after.always(async () => {
  await Promise.all([bench?.close(), libwebrtcBench?.close()]);
});

async function callRow(callId: string, on = bench) {
  const result = await on.service.pool.query<{ state: string; end_reason: string | null; ended_at: Date | null }>(
    'SELECT state, end_reason, ended_at FROM calls WHERE id = $1',
    [callId],
  );
  return result.rows[0]!;
}

const endedCall = (callId: string, on = bench) =>
  until('the call to end', async () => {
    const row = await callRow(callId, on);
    return row.ended_at === null ? undefined : row;
  });

/** A sipp call answered on alice's /phone page, on `bench`'s engine: see the test's title. */
async function answeredOnThePage(t: ExecutionContext, bench: PhoneBench): Promise<void> {
  const { line, token } = await phoneLine(t, bench, { users: ['alice'], strategy: 'simultaneous', timeoutSecs: 30 });
  const alice = await bench.openPage(t, await token('alice'));
  const rtp = await startRtpPhone();
  t.teardown(() => rtp.close());
  const engineSdp = path.join(bench.work, `engine-sdp-${randomUUID()}`);
  const sipp = runSipp({
    scenario: 'phone-caller',
    sipPort: bench.sipPort,
    dialed: line.e164.slice(1),
    replacements: { TEST_RTP_ADDRESS: '127.0.0.1', TEST_RTP_PORT: String(rtp.port), ENGINE_SDP_FILE: engineSdp },
    timeoutSeconds: 120,
  });
  const [, address, port] = await until('the engine’s SDP address from sipp', () =>
    readFile(engineSdp, 'utf8').then(
      (text) => /^c=IN IP4 (\S+) m=audio (\d+)$/.exec(text.trim()) ?? undefined,
      () => undefined,
    ),
  );
  const engine = { address: address!, port: Number(port) };
  // Ringback, sent to the SDP's address before anything came from it: the socket is where the caller's audio goes.
  await rtp.firstPacket();
  t.deepEqual([...rtp.sources], [`${engine.address}:${engine.port}`]);
  rtp.speak(1000, engine);

  const offerId = await ringingOffer(alice.page);
  const callId = await callOfOffer(bench.service, offerId);
  t.regex(
    (await alice.page.locator(`#incoming li[data-offer-id="${offerId}"]`).textContent()) ?? '',
    /^\+15550001111 → \+1628\d{7} /,
  );
  await alice.page.locator(`#incoming li[data-offer-id="${offerId}"] .answer`).click();
  await alice.page.locator('#call-state[data-state="connected"]').waitFor();
  await until('the call connected', async () =>
    (await callRow(callId, bench)).state === 'connected' ? true : undefined,
  );

  // Half a second of the page's audio, and one second of what the engine sends the caller after half a second.
  const [inPage, atCaller] = await Promise.all([pageHears(alice.page), rtp.hear(4000, 8000)]);
  const callerFrequency = zeroCrossingFrequency(atCaller, 8000);
  const callerPower = tonePower(atCaller, 440, 8000);
  t.log(
    `caller (1 kHz PCMU) -> engine -> Chromium: ${inPage.frequency.toFixed(1)} Hz, ` +
      `${(inPage.share * 100).toFixed(1)}% of the power (peak ${inPage.peakDb.toFixed(1)} dBFS)`,
  );
  t.log(
    `Chromium's microphone (440 Hz WAV) -> engine -> caller: ${callerFrequency.toFixed(1)} Hz, ` +
      `440 Hz power ${callerPower.toFixed(3)}`,
  );
  t.true(Math.abs(inPage.frequency - 1000) < 10, `the page heard ${inPage.frequency} Hz`);
  t.true(inPage.share > 0.8, `the 1 kHz tone is ${inPage.share} of what the page heard`);
  t.true(Math.abs(callerFrequency - 440) < 5, `the caller heard ${callerFrequency} Hz`);
  // Over PCMU (the engine offers it first) the page's 440 Hz arrives at 0.68 to 0.96 of the power on a loaded host
  // (libwebrtc's concealment of late packets); the frequency check above pins the tone itself.
  t.true(callerPower > 0.5, `the 440 Hz tone is ${callerPower} of what the caller heard`);

  const clicked = Date.now();
  await alice.page.click('#hang-up');
  await alice.page.locator('#call-state[data-state="ended (hangup)"]').waitFor();
  // sipp's scenario ends on the engine's BYE (it fails without one).
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  const ended = await endedCall(callId, bench);
  t.log(`the call ended ${ended.ended_at!.getTime() - clicked} ms after the page's Hang up`);
  // Operation 52 ended it, not the peer connection's close (noticed at once by the G.711 stack, ~15 s later by libwebrtc).
  t.is(ended.end_reason, 'hangup_requested');

  const events = await webhookEvents(bench, callId, 5);
  t.deepEqual(
    events.map((event) => event.type),
    ['call.started', 'call.answered', 'call.ringing', 'call.connected', 'call.ended'],
  );
  t.deepEqual(
    events.map((event) => event.sequence),
    [...events.map((event) => event.sequence)].sort((a, b) => a - b),
    'in sequence order',
  );
  t.like(events[2].ring, { ringSeq: 1, memberIds: [], externalUserIds: ['alice'], offerId });
  t.like(events[3].leg, { role: 'browser', memberId: null, externalUserId: 'alice' });
  t.like(events[4], { connected: true, call: { endReason: 'hangup_requested' } });
  t.deepEqual(alice.errors, []);
}

for (const [stack, on] of [
  ['g711', () => bench],
  ['libwebrtc', () => libwebrtcBench],
] as const) {
  test.serial(
    `${stack}: alice's /phone page answers a sipp call: tones both ways, her hang-up ends the call at once, sipp gets the BYE, and the events reach the webhook in order`,
    (t) => answeredOnThePage(t, on()),
  );
}

test.serial(
  "two pages of alice ring: one answers, the other's call is withdrawn, and a late accept of its offer is 409 call_conflict",
  async (t) => {
    const { line, token } = await phoneLine(t, bench, { users: ['alice'], strategy: 'simultaneous', timeoutSecs: 30 });
    const tokens = [await token('alice'), await token('alice')];
    const [winner, loser] = [await bench.openPage(t, tokens[0]!), await bench.openPage(t, tokens[1]!)];
    t.not(winner!.deviceId, loser!.deviceId, 'two browsers are two devices');
    const sipp = runSipp({ scenario: 'answered', sipPort: bench.sipPort, dialed: line.e164.slice(1) });
    const [won, lost] = await Promise.all([ringingOffer(winner!.page), ringingOffer(loser!.page)]);
    const callId = await callOfOffer(bench.service, won);
    t.is(await callOfOffer(bench.service, lost), callId, 'one call offered to both');

    const accepting = winner!.page.waitForRequest((request) => request.url().endsWith(`/offers/${won}/accept`));
    await winner!.page.locator(`#incoming li[data-offer-id="${won}"] .answer`).click();
    const accept = await accepting;
    const withdrawn = await logEntry(loser!.page, /ended: withdrawn$/, 10_000);
    const accepted = await accept.response();
    t.is(accepted?.status(), 200);
    await accepted?.finished();
    const sentAt = accept.timing().startTime;
    t.log(
      `the losing page showed the withdrawal ${Math.round(withdrawn.at - sentAt)} ms after the winner's accept was sent`,
    );
    t.true(withdrawn.at - sentAt < 10_000, 'the losing page stops ringing');
    t.is(await loser!.page.locator('#incoming li').count(), 0, 'the losing page shows no call');
    await winner!.page.locator('#call-state[data-state="connected"]').waitFor();

    const late = await bench.service.request('POST', `/api/v1/offers/${lost}/accept`, {
      auth: tokens[1],
      body: { sdp: 'v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 9 RTP/AVP 0\r\n' },
    });
    isError(t, late, 409, 'call_conflict');
    const offers = await bench.service.pool.query<{ id: string; state: string }>(
      'SELECT id, state FROM offers WHERE call_id = $1 ORDER BY state',
      [callId],
    );
    t.deepEqual(offers.rows, [
      { id: won, state: 'accepted' },
      { id: lost, state: 'withdrawn' },
    ]);

    await winner!.page.click('#hang-up');
    const run = await sipp;
    t.is(run.code, 0, sippFailed(run));
    t.is((await endedCall(callId)).end_reason, 'hangup_requested');
    const events = await webhookEvents(bench, callId, 5);
    t.deepEqual(
      events.map((event) => event.type),
      ['call.started', 'call.answered', 'call.ringing', 'call.connected', 'call.ended'],
    );
    t.like(events[2].ring, { ringSeq: 1, externalUserIds: ['alice'] });
    t.true([won, lost].includes(events[2].ring.offerId), 'the round names one of its offers');
    t.deepEqual([...winner!.errors, ...loser!.errors], []);
  },
);
