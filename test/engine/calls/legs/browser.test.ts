/**
 * The browser leg (engine/calls/legs/browser.ts) over a real WebRTC endpoint, with a stand-in browser (a plain
 * `@roamhq/wrtc` peer connection, test/helpers/webrtc-browser.ts), with each media stack (`WEBRTC_MEDIA`: `g711`,
 * engine/media/webrtc-g711.ts, and `libwebrtc`, webrtc.ts): the far end closing hangs the leg up, our `bye` closes it
 * without telling our own listeners, and no DTMF comes from a browser. And a real browser: Debian's Chromium answers
 * the engine's offer with PCMU, the first codec offered, and connects (the tones through Chromium are measured in
 * test/client/phone-calls.test.ts).
 */
import test from 'ava';
import { chromium } from 'playwright-core';
import { BrowserLeg } from '../../../../engine/calls/legs/browser.ts';
import { WebRtcEndpoint } from '../../../../engine/media/webrtc.ts';
import type { WebRtcEndpointOptions, WebRtcMedia } from '../../../../engine/media/webrtc-endpoint.ts';
import { G711WebRtcEndpoint } from '../../../../engine/media/webrtc-g711.ts';
import { answerOffer } from '../../../helpers/webrtc-browser.ts';
import { exitPastWrtc } from '../../../helpers/engine-service.ts';

// The binding's exit crash (engine/media/webrtc.ts): end the worker the way `process.exit` does.
exitPastWrtc();

const stacks: Array<[string, (options?: WebRtcEndpointOptions) => WebRtcMedia]> = [
  ['g711', (options) => new G711WebRtcEndpoint(options)],
  ['libwebrtc', (options) => new WebRtcEndpoint(options)],
];

async function connectedLeg(newEndpoint: (options?: WebRtcEndpointOptions) => WebRtcMedia) {
  const endpoint = newEndpoint();
  const browser = await answerOffer(await endpoint.createOffer(), false);
  await endpoint.acceptAnswer(browser.answer);
  await Promise.all([endpoint.connected(), browser.connected()]);
  return { leg: new BrowserLeg('3f0c7f1e-5d1a-4c1e-9a1b-2c3d4e5f6a7b', endpoint, 'device'), endpoint, browser };
}

for (const [stack, newEndpoint] of stacks) {
  test(`${stack}: the browser closing its peer connection hangs the leg up`, async (t) => {
    const { leg, endpoint, browser } = await connectedLeg(newEndpoint);
    const hungUp = new Promise<void>((resolve) => leg.onHangup(resolve));
    t.is(leg.onDtmf(() => t.fail('a browser sends no DTMF'))(), undefined);
    const started = Date.now();
    browser.close();
    await hungUp;
    t.true(leg.ended);
    t.log(`hung up ${Date.now() - started} ms after the browser closed (${endpoint.state})`);
    await leg.bye();
    t.true(endpoint.closed);
  });

  test(`${stack}: our bye closes the peer connection; the leg does not hear it as the far end hanging up`, async (t) => {
    const { leg, endpoint, browser } = await connectedLeg(newEndpoint);
    leg.onHangup(() => t.fail('our own bye is not a hangup of the far end'));
    await leg.bye();
    t.true(endpoint.closed);
    t.true(leg.ended);
    browser.close();
  });

  test(`${stack}: Chromium answers the engine's offer with PCMU, the first codec offered, and connects`, async (t) => {
    const endpoint = newEndpoint();
    t.teardown(() => endpoint.close());
    const offer = await endpoint.createOffer();
    const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true });
    t.teardown(() => browser.close());
    const page = await browser.newPage();
    const answer = await page.evaluate(async (sdp) => {
      const pc = new RTCPeerConnection();
      await pc.setRemoteDescription({ type: 'offer', sdp });
      await pc.setLocalDescription(await pc.createAnswer());
      (window as unknown as { pc: RTCPeerConnection }).pc = pc;
      await new Promise<void>((resolve) => {
        if (pc.iceGatheringState === 'complete') resolve();
        pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && resolve());
      });
      return pc.localDescription?.sdp ?? '';
    }, offer);
    const mLine = answer.split('\r\n').find((line) => line.startsWith('m=audio ')) ?? '';
    const first = mLine.split(' ')[3];
    t.log(`Chromium's answer: ${mLine}`);
    t.regex(answer, new RegExp(`^a=rtpmap:${first} PCMU/8000\\r$`, 'm'), 'the first codec of the answer is PCMU');
    await endpoint.acceptAnswer(answer);
    await endpoint.connected();
    // Chromium's side, without named functions (the test's transpiler would wrap them in a helper the page lacks).
    const chromiumState = await page.evaluate(
      () =>
        new Promise<string>((resolve) => {
          const pc = (window as unknown as { pc: RTCPeerConnection }).pc;
          if (!['new', 'connecting'].includes(pc.connectionState)) resolve(pc.connectionState);
          pc.addEventListener('connectionstatechange', () => {
            if (!['new', 'connecting'].includes(pc.connectionState)) resolve(pc.connectionState);
          });
        }),
    );
    t.is(chromiumState, 'connected');
  });
}
