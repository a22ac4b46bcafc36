/**
 * The browser leg (engine/calls/legs/browser.ts) over a real WebRTC endpoint, with a stand-in browser (a plain
 * `@roamhq/wrtc` peer connection, test/helpers/webrtc-browser.ts): the far end closing hangs the leg up, our `bye`
 * closes it without telling our own listeners, and no DTMF comes from a browser.
 */
import test from 'ava';
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
