/**
 * The browser phone (client/phone.ts, the /phone page of api/routes/phone.ts) in Debian's Chromium, driven by
 * playwright-core, against the engine's WebRTC endpoint (engine/media/webrtc.ts) in this process: the page registers
 * its device and long-polls; an offer made as the ring step makes one (`makeOffers`, with the endpoint's SDP offer)
 * rings it; it answers; a 1 kHz tone from the engine is measured in the page (an AnalyserNode on the remote stream)
 * and the page's fake microphone (a 440 Hz WAV made here) at the engine (Goertzel and zero crossings); hanging up in
 * the page ends the engine's connection. Two pages of one user: one accepts, the other's offer is withdrawn, and a
 * second accept is 409 call_conflict.
 *
 * The tests run one at a time: they count the service's waiting long-polls (its metrics) to know the pages wait.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import type { CallRow } from '../../core/calls/calls.ts';
import { callOffers, makeOffers } from '../../core/devices/offers.ts';
import { WebRtcEndpoint } from '../../engine/media/webrtc.ts';
import type { WebRtcState } from '../../engine/media/webrtc-endpoint.ts';
import {
  isError,
  liveCall,
  startService,
  type TestService,
  userToken as sessionToken,
  workspaceWithUser,
} from '../helpers/service.ts';
import { chromiumArgs, keepNamesShim, pageHears, toneWav } from '../helpers/phone-pages.ts';
import { sine, tonePower, zeroCrossingFrequency } from '../helpers/webrtc-browser.ts';
import { exitPastWrtc } from '../helpers/engine-service.ts';

// This worker makes RTCAudioSources (the engine's endpoints): end it as `process.exit` would, or the binding's N-API
// cleanup crashes it at exit (see test/engine/media/webrtc.test.ts).
exitPastWrtc();

let service: TestService;
let browser: BrowserContext;
let work: string;

test.before(async () => {
  service = await startService({}, ['api']);
  work = await mkdtemp(path.join(os.tmpdir(), 'switchboard-phone-'));
  const wav = path.join(work, 'microphone.wav');
  await writeFile(wav, toneWav());
  browser = await chromium.launchPersistentContext(path.join(work, 'profile'), {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: chromiumArgs(wav),
  });
  await browser.addInitScript(keepNamesShim);
});

test.after.always(async () => {
  await browser?.close();
  await service?.close();
  if (work !== undefined) await rm(work, { recursive: true, force: true });
});

type Setup = Awaited<ReturnType<typeof workspaceWithUser>>;

const userToken = (setup: Setup) => sessionToken(service, setup);

/** Resolves once at least `count` long-polls wait in the service (its switchboard_offer_long_polls gauge). */
async function pollsWaiting(count: number): Promise<void> {
  for (;;) {
    const metrics = await service.request('GET', '/metrics');
    const value = Number(/^switchboard_offer_long_polls (\d+)$/m.exec(metrics.text)?.[1] ?? -1);
    if (value >= count) return;
  }
}

/** A live call of the setup's workspace, written as the engine writes one. */
function newCall(setup: Setup): Promise<CallRow> {
  return liveCall(service.pool, setup, { from: '+14155551234' });
}

/** The call's accepted offer's SDP answer, once a device accepted (read every 20 ms). */
async function acceptedAnswer(callId: string, ms = 15000): Promise<string> {
  const deadline = Date.now() + ms;
  for (;;) {
    const accepted = (await callOffers(service.pool, callId)).find((offer) => offer.state === 'accepted');
    if (accepted?.sdp_answer) return accepted.sdp_answer;
    if (Date.now() > deadline) throw new Error('no offer of the call was accepted');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Resolves with the endpoint's state once it is one of `states`; rejects after `ms`. */
function endpointState(endpoint: WebRtcEndpoint, states: WebRtcState[], ms: number): Promise<WebRtcState> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`still ${endpoint.state} after ${ms} ms`)), ms);
    const check = (state: WebRtcState) => {
      if (states.includes(state)) done(undefined, state);
    };
    const stop = endpoint.onState(check);
    const done = (error?: Error, state?: WebRtcState) => {
      clearTimeout(timer);
      stop();
      if (error === undefined) resolve(state as WebRtcState);
      else reject(error);
    };
    check(endpoint.state);
  });
}

/** Collects `samples` of the engine's 8 kHz audio after skipping `skip`. */
function engineHears(endpoint: WebRtcEndpoint, skip: number, samples: number): Promise<number[]> {
  const heard: number[] = [];
  return new Promise((resolve) => {
    const stop = endpoint.onAudio((frame) => {
      heard.push(...frame);
      if (heard.length < skip + samples) return;
      stop();
      resolve(heard.slice(skip, skip + samples));
    });
  });
}

test.serial(
  'the /phone page answers an offer: tones both ways through Chromium and the engine, and hang-up ends the leg',
  async (t) => {
    const setup = await workspaceWithUser(service);
    const token = await userToken(setup);
    const page = await browser.newPage();
    t.teardown(() => page.close());
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(error.message));
    await page.goto(`${service.url}/phone`);
    await page.fill('#token', token);
    t.is(await page.inputValue('#base-url'), service.url, 'the service defaults to the page origin');
    await page.click('#start');
    const deviceId = await page.locator('#status[data-device-id]').getAttribute('data-device-id');
    const devices = await service.request('GET', '/api/v1/devices', { auth: token });
    t.deepEqual(
      devices.body.data.map((device: { id: string; kind: string }) => [device.id, device.kind]),
      [[deviceId, 'browser']],
    );
    await pollsWaiting(1);

    const call = await newCall(setup);
    const endpoint = new WebRtcEndpoint();
    t.teardown(() => endpoint.close());
    const made = await makeOffers(service.pool, {
      callId: call.id,
      workspaceId: setup.workspace.id,
      ringSeq: 1,
      devices: [{ deviceId: deviceId!, sdpOffer: await endpoint.createOffer() }],
      expiresAt: new Date(Date.now() + 60_000),
    });
    t.deepEqual(made.notOffered, []);
    const ringing = page.locator(`#incoming li[data-offer-id="${made.offers[0]!.id}"]`);
    t.regex((await ringing.textContent()) ?? '', /\+14155551234 → \+14155550199/);
    await ringing.locator('.answer').click();

    await endpoint.acceptAnswer(await acceptedAnswer(call.id));
    await endpoint.connected();
    await page.locator('#call-state[data-state="connected"]').waitFor();

    const tone = sine(1000, 8000);
    const timer = setInterval(() => endpoint.send(tone(160)), 20);
    t.teardown(() => clearInterval(timer));
    const [inPage, atEngine] = await Promise.all([pageHears(page), engineHears(endpoint, 4000, 4000)]);
    clearInterval(timer);
    const engineFrequency = zeroCrossingFrequency(atEngine, 8000);
    const enginePower = tonePower(atEngine, 440, 8000);
    t.log(
      `engine -> Chromium: ${inPage.frequency.toFixed(1)} Hz, ${(inPage.share * 100).toFixed(1)}% of the power ` +
        `(peak ${inPage.peakDb.toFixed(1)} dBFS)`,
    );
    t.log(`Chromium's microphone -> engine: ${engineFrequency.toFixed(1)} Hz, 440 Hz power ${enginePower.toFixed(3)}`);
    t.true(Math.abs(inPage.frequency - 1000) < 10, `the page heard ${inPage.frequency} Hz`);
    t.true(inPage.share > 0.8, `the 1 kHz tone is ${inPage.share} of what the page heard`);
    t.true(Math.abs(engineFrequency - 440) < 5, `the engine heard ${engineFrequency} Hz`);
    t.true(enginePower > 0.7, `the 440 Hz tone is ${enginePower} of what the engine heard`);

    // Muted, the engine hears silence (the track is disabled: WebRTC sends zeros).
    await page.click('#mute');
    const muted = await engineHears(endpoint, 4000, 4000);
    t.true(
      muted.every((sample) => Math.abs(sample) < 100),
      'muted: silence',
    );
    await page.click('#mute');

    const hungUp = Date.now();
    await page.click('#hang-up');
    await page.locator('#call-state[data-state="ended (hangup)"]').waitFor();
    const state = await endpointState(endpoint, ['closed', 'failed', 'disconnected'], 40_000);
    t.log(`the engine's connection ${Date.now() - hungUp} ms after the page hung up: ${state}`);
    t.deepEqual(errors, []);
  },
);

test.serial(
  "two pages of one user: one accepts, the other's offer is withdrawn and a second accept is 409",
  async (t) => {
    const setup = await workspaceWithUser(service);
    const token = await userToken(setup);
    const pages = await Promise.all([browser.newPage(), browser.newPage()]);
    t.teardown(() => Promise.all(pages.map((page) => page.close())));
    const before = Number(
      /^switchboard_offer_long_polls (\d+)$/m.exec((await service.request('GET', '/metrics')).text)?.[1],
    );
    const deviceIds = await Promise.all(
      pages.map(async (page, index) => {
        await page.goto(`${service.url}/phone`);
        // The library, as an application would use it. The first page's first token is stale: it gets a 401 and
        // the library fetches a new one.
        return page.evaluate(
          async ({ token, index }) => {
            const library = '/phone/phone.js';
            const { createPhone } = await import(library);
            const state = { events: [] as unknown[], tokens: 0, call: undefined as unknown };
            (window as unknown as { phoneTest: unknown }).phoneTest = state;
            const phone = createPhone({
              baseUrl: location.origin,
              fetchToken: async () => {
                state.tokens += 1;
                return index === 0 && state.tokens === 1 ? 'not-a-token' : token;
              },
              device: { kind: 'browser', name: `tab ${index}`, clientId: `tab-${index}` },
            });
            phone.on('incoming', (call: { id: string }) => {
              state.call = call;
              state.events.push({ event: 'incoming', id: call.id });
            });
            phone.on('connected', ({ call }: { call: { id: string } }) =>
              state.events.push({ event: 'connected', id: call.id }),
            );
            phone.on('ended', ({ call, reason }: { call: { id: string }; reason: string }) =>
              state.events.push({ event: 'ended', id: call.id, reason }),
            );
            phone.on('error', (error: { code: string }) => state.events.push({ event: 'error', code: error.code }));
            await phone.start();
            return { deviceId: phone.deviceId as string, tokens: state.tokens };
          },
          { token, index },
        );
      }),
    );
    t.deepEqual(
      deviceIds.map((started) => started.tokens),
      [2, 1],
      'a 401 fetches a new token',
    );
    await pollsWaiting(before + 2);

    const call = await newCall(setup);
    const endpoints = [new WebRtcEndpoint(), new WebRtcEndpoint()];
    t.teardown(() => endpoints.forEach((endpoint) => endpoint.close()));
    const made = await makeOffers(service.pool, {
      callId: call.id,
      workspaceId: setup.workspace.id,
      ringSeq: 1,
      devices: await Promise.all(
        deviceIds.map(async ({ deviceId }, index) => ({ deviceId, sdpOffer: await endpoints[index]!.createOffer() })),
      ),
      expiresAt: new Date(Date.now() + 60_000),
    });
    t.is(made.offers.length, 2);
    const offerOf = (deviceId: string) => made.offers.find((offer) => offer.device_id === deviceId)!.id;
    const ringing = () =>
      (window as unknown as { phoneTest: { call?: { id: string } } }).phoneTest.call?.id !== undefined;
    await Promise.all(pages.map((page) => page.waitForFunction(ringing)));

    await pages[0]!.evaluate(() =>
      (window as unknown as { phoneTest: { call: { accept(): Promise<void> } } }).phoneTest.call.accept(),
    );
    await pages[1]!.waitForFunction(() =>
      (window as unknown as { phoneTest: { events: { event: string }[] } }).phoneTest.events.some(
        (event) => event.event === 'ended',
      ),
    );
    const events = (page: Page) =>
      page.evaluate(() => (window as unknown as { phoneTest: { events: unknown[] } }).phoneTest.events);
    const losing = offerOf(deviceIds[1]!.deviceId);
    t.deepEqual(await events(pages[1]!), [
      { event: 'incoming', id: losing },
      { event: 'ended', id: losing, reason: 'withdrawn' },
    ]);
    t.deepEqual(await events(pages[0]!), [{ event: 'incoming', id: offerOf(deviceIds[0]!.deviceId) }]);
    const offers = await callOffers(service.pool, call.id);
    t.deepEqual(
      offers.map((offer) => [offer.device_id, offer.state]).sort(),
      [
        [deviceIds[0]!.deviceId, 'accepted'],
        [deviceIds[1]!.deviceId, 'withdrawn'],
      ].sort(),
    );
    const late = await service.request('POST', `/api/v1/offers/${losing}/accept`, {
      auth: token,
      body: { sdp: offers.find((offer) => offer.state === 'accepted')!.sdp_answer },
    });
    isError(t, late, 409, 'call_conflict');
  },
);

test.serial(
  'ring modes on the page: a ring offer plays the ringtone, a silent one does not; a muted one is answered muted',
  async (t) => {
    const setup = await workspaceWithUser(service);
    const token = await userToken(setup);
    const page = await browser.newPage();
    t.teardown(() => page.close());
    await page.goto(`${service.url}/phone`);
    await page.fill('#token', token);
    await page.click('#start');
    const deviceId = (await page.locator('#status[data-device-id]').getAttribute('data-device-id'))!;
    await pollsWaiting(1);
    const offerOne = async (mode: 'ring' | 'silent' | 'muted', sdpOffer = 'v=0\r\n') => {
      const made = await makeOffers(service.pool, {
        callId: (await newCall(setup)).id,
        workspaceId: setup.workspace.id,
        ringSeq: 1,
        devices: [{ deviceId, sdpOffer, mode }],
        expiresAt: new Date(Date.now() + 60_000),
      });
      const item = page.locator(`#incoming li[data-offer-id="${made.offers[0]!.id}"]`);
      await item.waitFor();
      return { item, callId: made.offers[0]!.call_id };
    };
    const ringtone = () => page.evaluate(() => document.body.dataset.ringing === 'true');

    const silent = await offerOne('silent');
    t.regex((await silent.item.textContent()) ?? '', /\(silent\)/);
    t.false(await ringtone(), 'a silent call plays no ringtone');
    const loud = await offerOne('ring');
    t.true(await ringtone(), 'a ring call plays the ringtone');
    await loud.item.locator('.decline').click();
    t.false(await ringtone(), 'declined: the ringtone stops');
    await silent.item.locator('.decline').click();

    const endpoint = new WebRtcEndpoint();
    t.teardown(() => endpoint.close());
    const muted = await offerOne('muted', await endpoint.createOffer());
    t.true(await ringtone(), 'a muted call rings');
    await muted.item.locator('.answer').click();
    await endpoint.acceptAnswer(await acceptedAnswer(muted.callId));
    await endpoint.connected();
    await page.locator('#call-state[data-state="connected"]').waitFor();
    t.false(await ringtone());
    t.is(await page.textContent('#mute'), 'Unmute');
    const silence = await engineHears(endpoint, 4000, 4000);
    t.true(
      silence.every((sample) => Math.abs(sample) < 100),
      'answered muted: the engine hears silence',
    );
    await page.click('#mute');
    t.is(await page.textContent('#mute'), 'Mute');
    const heard = await engineHears(endpoint, 4000, 4000);
    const power = tonePower(heard, 440, 8000);
    t.log(`unmuted: the engine hears 440 Hz with power ${power.toFixed(3)}`);
    t.true(power > 0.7, `unmuted, the microphone's 440 Hz reaches the engine (${power})`);
    await page.click('#hang-up');
  },
);
