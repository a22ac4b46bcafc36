/**
 * WebRTC media for browser legs (engine/media/webrtc.ts, docs/phones.md "Legs"): the engine's endpoint answered by a
 * plain `@roamhq/wrtc` peer connection standing in for the browser (test/helpers/webrtc-browser.ts; Chromium's
 * answer is in test/engine/calls/legs/browser.test.ts), the codecs offered (G.711 first) and the one the browser gets,
 * what every stack does (test/helpers/webrtc-contract.ts: tones both ways over PCMU measured by frequency, a bridge to
 * a G.711 RTP endpoint, answers the endpoint must refuse), tones over Opus for a browser that takes nothing else,
 * and the churn: 1,000 legs opened and closed in one process
 * (a child run with --expose-gc, test/helpers/webrtc-churn.ts) with memory and threads measured. The resampling and
 * re-framing are in stream-resample.test.ts.
 *
 * Audio is paced by timers, as a microphone would be; waits for state are on events or counters, never sleeps.
 */
import test from 'ava';
import { WebRtcEndpoint } from '../../../engine/media/webrtc.ts';
import { answerOffer, receivedCodec } from '../../helpers/webrtc-browser.ts';
import { tonesBothWays, webrtcContract } from '../../helpers/webrtc-contract.ts';
import { exitPastWrtc } from '../../helpers/engine-service.ts';
import { churn } from '../../helpers/webrtc-churn-check.ts';

// The binding crashes (SIGSEGV, in its N-API cleanup) when a process exits by itself while an RTCAudioSource has not
// been garbage-collected yet; ending the way `process.exit` does skips that cleanup (engine/media/webrtc.ts). ava
// replaces `process.exit` in its workers, and the worker ends by itself: this ends it like `process.exit` would,
// after the 'exit' listeners registered before this one (ava's) have run.
exitPastWrtc();

/** `offer` with only Opus left of its audio codecs (and telephone-event): what a browser that insists on Opus sees. */
function opusOnly(offer: string): string {
  const dropped = [...offer.matchAll(/^a=rtpmap:(\d+) (PCMU|PCMA)\/8000\r$/gm)].map((match) => match[1] as string);
  return offer
    .split('\n')
    .filter((line) => !dropped.some((pt) => new RegExp(`^a=(rtpmap|fmtp|rtcp-fb):${pt}( |\r)`).test(line)))
    .map((line) =>
      line.startsWith('m=audio ')
        ? line
            .split(' ')
            .filter((word, index) => index < 3 || !dropped.includes(word))
            .join(' ')
        : line,
    )
    .join('\n');
}

test('the engine offers audio only, G.711 first (PCMU, PCMA), then Opus and telephone-event, and its host candidates', async (t) => {
  const endpoint = new WebRtcEndpoint();
  t.teardown(() => endpoint.close());
  const offer = await endpoint.createOffer();
  t.is(await endpoint.createOffer(), offer, 'a second call gives the same offer');
  const mLines = offer.split('\r\n').filter((line) => line.startsWith('m='));
  t.is(mLines.length, 1);
  t.regex(mLines[0] ?? '', /^m=audio \d+ UDP\/TLS\/RTP\/SAVPF /);
  // The m= line's order is the engine's preference: the browser's answer keeps it, and each side sends the first.
  const names = new Map(
    [...offer.matchAll(/^a=rtpmap:(\d+) ([^/\r\n]+)\/(\d+)/gm)].map((match) => [match[1], `${match[2]}/${match[3]}`]),
  );
  const codecs = (mLines[0] ?? '')
    .split(' ')
    .slice(3)
    .map((pt) => names.get(pt));
  t.deepEqual(codecs, ['PCMU/8000', 'PCMA/8000', 'opus/48000', 'telephone-event/8000', 'telephone-event/48000']);
  t.regex(offer, /^a=fingerprint:sha-256 /m, 'DTLS-SRTP');
  const candidates = offer.split('\r\n').filter((line) => line.startsWith('a=candidate:'));
  t.true(candidates.length > 0, 'the host candidates are in the offer');
  t.true(
    candidates.every((line) => / typ host( |$)/.test(line)),
    'no ICE servers: host candidates only',
  );
  // Host-only, the offer goes with its UDP candidates, before libwebrtc's TCP step (about 100 ms later).
  t.true(
    candidates.every((line) => line.split(' ')[2]?.toLowerCase() === 'udp'),
    'UDP host candidates, made before the TCP ones',
  );
  // With a STUN server the engine waits for gathering to complete (server-reflexive candidates come late); this one
  // never answers, so the offer goes at gatherTimeoutMs, by then with the TCP candidates too.
  const withStun = new WebRtcEndpoint({ iceServers: [{ urls: 'stun:127.0.0.1:9' }], gatherTimeoutMs: 1000 });
  t.teardown(() => withStun.close());
  const complete = await withStun.createOffer();
  t.true(/^a=candidate:\S+ \d+ tcp /im.test(complete), 'no shortcut: the TCP candidates are in too');
});

test.serial(
  'a browser that takes Opus only still gets a call: tones both ways, through the 48 kHz resampler',
  async (t) => {
    const endpoint = new WebRtcEndpoint();
    t.teardown(() => endpoint.close());
    const browser = await answerOffer(opusOnly(await endpoint.createOffer()));
    t.teardown(() => browser.close());
    t.notRegex(browser.answer, /PCM[UA]\/8000/, 'the browser answered without G.711');
    await endpoint.acceptAnswer(browser.answer);
    await Promise.all([endpoint.connected(), browser.connected()]);
    await tonesBothWays(t, endpoint, browser);
    t.is(await receivedCodec(browser), 'audio/opus');
  },
);

webrtcContract(test, (options) => new WebRtcEndpoint(options), [
  ['a line libwebrtc cannot read', (good) => good.replace(/^a=ice-pwd:.*$/m, '$&\r\nb=AS:notanumber\r\nx'), 'refused'],
]);

test('churn: 1,000 legs opened and closed in one process, no crash, memory and threads flat', async (t) => {
  await churn(t, 'libwebrtc');
});
