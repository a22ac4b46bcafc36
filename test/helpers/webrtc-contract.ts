/**
 * What every WebRTC media stack of the engine must do (engine/media/webrtc-endpoint.ts), as tests each stack's file
 * registers (test/engine/media/webrtc.test.ts, webrtc-g711.test.ts): a stand-in browser (test/helpers/webrtc-browser.ts)
 * talks PCMU with the endpoint, tones go both ways and are measured by frequency, directly and through a bridge to a
 * G.711 RTP endpoint, and answers the endpoint cannot use are refused without harm.
 *
 * The tone tests are serial: the stand-in browsers of one process share libwebrtc's playout mixer, which hands every
 * RTCAudioSink the highest rate any of them wants, and a stand-in's record of what it heard is readable at one rate.
 */
import type { ExecutionContext, TestFn } from 'ava';
import { bridge } from '../../engine/media/bridge.ts';
import { frameAt, frameCount, pace } from '../../engine/media/player.ts';
import { RtpEndpoint, PortPool } from '../../engine/media/rtp.ts';
import {
  WebRtcAnswerError,
  type WebRtcAnswerProblem,
  type WebRtcEndpointOptions,
  type WebRtcMedia,
} from '../../engine/media/webrtc-endpoint.ts';
import {
  answerOffer,
  browserHears,
  browserTone,
  type FakeBrowser,
  hear,
  receivedCodec,
  sine,
  tonePower,
  zeroCrossingFrequency,
} from './webrtc-browser.ts';
import { loopbackCarrier } from './media-peer.ts';

export type NewEndpoint = (options?: WebRtcEndpointOptions) => WebRtcMedia;
type BadAnswer = [what: string, answer: (good: string) => unknown, problem: WebRtcAnswerProblem];

const host = '127.0.0.1';

/** An engine endpoint and a stand-in browser, connected; both closed at teardown. */
export async function connectedPair<E extends WebRtcMedia>(
  t: ExecutionContext,
  newEndpoint: () => E,
): Promise<{ endpoint: E; browser: FakeBrowser }> {
  const endpoint = newEndpoint();
  t.teardown(() => endpoint.close());
  const browser = await answerOffer(await endpoint.createOffer());
  t.teardown(() => browser.close());
  await endpoint.acceptAnswer(browser.answer);
  await Promise.all([endpoint.connected(), browser.connected()]);
  return { endpoint, browser };
}

/**
 * A 1 kHz tone from the engine to the browser and a 440 Hz one from the browser's microphone to the engine, at once:
 * both heard at their frequency, with most of their power in the tone.
 */
export async function tonesBothWays(t: ExecutionContext, endpoint: WebRtcMedia, browser: FakeBrowser): Promise<void> {
  const tone = sine(1000, 8000);
  const timer = setInterval(() => endpoint.send(tone(160)), 20);
  const stopBrowser = browserTone(browser, 440);
  t.teardown(() => {
    clearInterval(timer);
    stopBrowser();
  });
  const [atBrowser, atEngine] = await Promise.all([
    browserHears(browser, 0.3, 0.5),
    hear((listener) => endpoint.onAudio(listener), 2400, 4000),
  ]);
  const browserFrequency = zeroCrossingFrequency(atBrowser, browser.rate);
  const engineFrequency = zeroCrossingFrequency(atEngine, 8000);
  t.log(
    `engine -> browser: ${browserFrequency.toFixed(1)} Hz at ${browser.rate} Hz, tone power ${tonePower(atBrowser, 1000, browser.rate).toFixed(3)}`,
  );
  t.log(
    `browser -> engine: ${engineFrequency.toFixed(1)} Hz at 8000 Hz, tone power ${tonePower(atEngine, 440, 8000).toFixed(3)}`,
  );
  t.true(Math.abs(browserFrequency - 1000) < 10, `the browser heard ${browserFrequency} Hz`);
  t.true(tonePower(atBrowser, 1000, browser.rate) > 0.8);
  t.true(Math.abs(engineFrequency - 440) < 5, `the engine heard ${engineFrequency} Hz`);
  t.true(tonePower(atEngine, 440, 8000) > 0.8);
}

/** Registers the tests every stack passes; `badAnswers` adds refusals of the stack's own. */
export function webrtcContract(test: TestFn, newEndpoint: NewEndpoint, badAnswers: BadAnswer[] = []): void {
  const base = 22000 + 2 * Math.floor(Math.random() * 4500);
  const pool = new PortPool(base, base + 99);

  test.serial(
    'a 1 kHz tone from the engine reaches the browser as PCMU, and a 440 Hz tone from the browser reaches the engine',
    async (t) => {
      const { endpoint, browser } = await connectedPair(t, newEndpoint);
      await tonesBothWays(t, endpoint, browser);
      t.true(endpoint.stats.framesIn > 0 && endpoint.stats.framesOut > 0);
      t.is(await receivedCodec(browser), 'audio/PCMU', 'the browser answered with the first codec offered, PCMU');
    },
  );

  test.serial(
    'bridged to a G.711 RTP endpoint: a tone from the carrier side reaches the browser, and back',
    async (t) => {
      const { endpoint, browser } = await connectedPair(t, newEndpoint);
      const leg = await RtpEndpoint.open(pool, host, { peer: loopbackCarrier });
      const carrier = await RtpEndpoint.open(pool, host, { peer: loopbackCarrier });
      t.teardown(() => {
        leg.close();
        carrier.close();
      });
      const remote = (port: number) => ({
        address: host,
        port,
        codec: 'PCMU' as const,
        payloadType: 0,
        telephoneEventPt: 101,
      });
      leg.setRemote(remote(carrier.localPort));
      carrier.setRemote(remote(leg.localPort));
      t.teardown(bridge(leg, endpoint));
      // The carrier plays 3 s of 1 kHz (G.711 over loopback, through the bridge, PCMU to the browser).
      const tone = sine(1000, 8000)(24000);
      const playing = new AbortController();
      t.teardown(() => playing.abort());
      const played = pace(frameCount(tone), (index) => carrier.send(frameAt(tone, index)), playing.signal);
      const stopBrowser = browserTone(browser, 440);
      t.teardown(stopBrowser);
      const [atBrowser, atCarrier] = await Promise.all([
        browserHears(browser, 0.3, 0.5),
        hear((listener) => carrier.onAudio(listener), 2400, 4000),
      ]);
      playing.abort();
      await played;
      const browserFrequency = zeroCrossingFrequency(atBrowser, browser.rate);
      const carrierFrequency = zeroCrossingFrequency(atCarrier, 8000);
      t.log(
        `carrier -> bridge -> browser: ${browserFrequency.toFixed(1)} Hz; browser -> bridge -> carrier: ${carrierFrequency.toFixed(1)} Hz`,
      );
      t.true(Math.abs(browserFrequency - 1000) < 10, `the browser heard ${browserFrequency} Hz`);
      t.true(tonePower(atBrowser, 1000, browser.rate) > 0.7);
      t.true(Math.abs(carrierFrequency - 440) < 5, `the carrier heard ${carrierFrequency} Hz`);
      t.true(tonePower(atCarrier, 440, 8000) > 0.7);
    },
  );

  test('answers the endpoint cannot use are WebRtcAnswerErrors, and a good answer still works after them', async (t) => {
    const endpoint = newEndpoint();
    t.teardown(() => endpoint.close());
    const early = await t.throwsAsync(endpoint.acceptAnswer('v=0\r\n'), { instanceOf: WebRtcAnswerError });
    t.is(early?.problem, 'no_offer', 'an answer before the offer');
    const browser = await answerOffer(await endpoint.createOffer());
    t.teardown(() => browser.close());
    const good = browser.answer;
    const audioAt = good.indexOf('m=audio');
    const sessionPart = good.slice(0, audioAt);
    const bad: BadAnswer[] = [
      ['garbage', () => 'garbage \u0000\u00ff not sdp', 'malformed'],
      ['not a string', () => ({ sdp: good }), 'malformed'],
      ['empty', () => '', 'malformed'],
      ['too long', () => `${good}${'a=x\r\n'.repeat(20000)}`, 'malformed'],
      ['no m-line at all', () => sessionPart, 'no_audio'],
      ['only a video m-line', () => `${sessionPart}${good.slice(audioAt).replace('m=audio', 'm=video')}`, 'no_audio'],
      ['the audio refused (port 0)', () => good.replace(/^m=audio \d+/m, 'm=audio 0'), 'no_audio'],
      ['none of the offered codecs', () => good.replace(/^(m=audio \d+ \S+) .*$/m, '$1 96'), 'no_audio'],
      ['no fingerprint', () => good.replace(/^a=fingerprint:.*\r\n/gm, ''), 'malformed'],
      ['no ICE credentials', () => good.replace(/^a=ice-(ufrag|pwd):.*\r\n/gm, ''), 'malformed'],
      ...badAnswers,
    ];
    for (const [what, answer, problem] of bad) {
      const error = await t.throwsAsync(endpoint.acceptAnswer(answer(good)), { instanceOf: WebRtcAnswerError }, what);
      t.is(error?.problem, problem, what);
    }
    await endpoint.acceptAnswer(good);
    await Promise.all([endpoint.connected(), browser.connected()]);
    const again = await t.throwsAsync(endpoint.acceptAnswer(good), { instanceOf: WebRtcAnswerError });
    t.is(again?.problem, 'answered');
    endpoint.close();
    endpoint.close();
    t.is(endpoint.state, 'closed');
    const closed = await t.throwsAsync(endpoint.acceptAnswer(good), { instanceOf: WebRtcAnswerError });
    t.is(closed?.problem, 'closed');
    endpoint.send(new Int16Array(160)); // dropped, no throw
  });
}
