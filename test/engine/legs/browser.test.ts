/**
 * The browser leg (engine/calls/legs/browser.ts) over a real WebRTC endpoint, with a stand-in browser (a plain
 * `@roamhq/wrtc` peer connection, test/helpers/webrtc-browser.ts): the far end closing hangs the leg up, our `bye`
 * closes it without telling our own listeners, and no DTMF comes from a browser. And the codec a real browser picks:
 * Debian's Chromium answers the engine's offer with PCMU, the first codec it offers (engine/media/webrtc.ts; the tones
 * through Chromium are measured in test/client/phone-calls.test.ts).
 */
import test from 'ava';
import { chromium } from 'playwright-core';
import { BrowserLeg } from '../../../engine/calls/legs/browser.ts';
import { WebRtcEndpoint } from '../../../engine/media/webrtc.ts';
import { answerOffer } from '../../helpers/webrtc-browser.ts';
import { exitPastWrtc } from '../../helpers/engine-service.ts';

// The binding's exit crash (engine/media/webrtc.ts): end the worker the way `process.exit` does.
exitPastWrtc();

async function connectedLeg() {
  const endpoint = new WebRtcEndpoint();
  const browser = await answerOffer(await endpoint.createOffer(), false);
  await endpoint.acceptAnswer(browser.answer);
  await Promise.all([endpoint.connected(), browser.connected()]);
  return { leg: new BrowserLeg('3f0c7f1e-5d1a-4c1e-9a1b-2c3d4e5f6a7b', endpoint, 'device'), endpoint, browser };
}

test('the browser closing its peer connection hangs the leg up', async (t) => {
  const { leg, endpoint, browser } = await connectedLeg();
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

test('our bye closes the peer connection; the leg does not hear it as the far end hanging up', async (t) => {
  const { leg, endpoint, browser } = await connectedLeg();
  leg.onHangup(() => t.fail('our own bye is not a hangup of the far end'));
  await leg.bye();
  t.true(endpoint.closed);
  t.true(leg.ended);
  browser.close();
});

test("Chromium answers the engine's offer with PCMU, the first codec offered, and the endpoint takes the answer", async (t) => {
  const endpoint = new WebRtcEndpoint();
  t.teardown(() => endpoint.close());
  const offer = await endpoint.createOffer();
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true });
  t.teardown(() => browser.close());
  const page = await browser.newPage();
  const answer = await page.evaluate(async (sdp) => {
    const pc = new RTCPeerConnection();
    await pc.setRemoteDescription({ type: 'offer', sdp });
    await pc.setLocalDescription(await pc.createAnswer());
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
});
