/**
 * WebRTC media for browser legs (engine/media/webrtc.ts, docs/phones.md "Legs"): the engine's endpoint answered by a
 * plain `@roamhq/wrtc` peer connection standing in for the browser (test/helpers/webrtc-browser.ts; Chromium's
 * answer is in test/engine/legs/browser.test.ts), the codecs offered (G.711 first) and the one the browser gets,
 * tones both ways measured by frequency (over PCMU, and over Opus for a browser that takes nothing else), a bridge to
 * a G.711 RTP endpoint, answers the endpoint must refuse, and the churn: 1,000 legs opened and closed in one process
 * (a child run with --expose-gc, test/helpers/webrtc-churn.ts) with memory and threads measured. The resampling and
 * re-framing are in stream-resample.test.ts.
 *
 * Audio is paced by timers, as a microphone would be; waits for state are on events or counters, never sleeps.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { bridge } from '../../engine/media/bridge.ts';
import { pace, frameAt, frameCount } from '../../engine/media/player.ts';
import { MediaEndpoint, PortPool } from '../../engine/media/rtp.ts';
import { WebRtcAnswerError, type WebRtcAnswerProblem, WebRtcEndpoint } from '../../engine/media/webrtc.ts';
import { answerOffer, type FakeBrowser, sine, tonePower, zeroCrossingFrequency } from '../helpers/webrtc-browser.ts';
import { exitPastWrtc } from '../helpers/engine-service.ts';

// The binding crashes (SIGSEGV, in its N-API cleanup) when a process exits by itself while an RTCAudioSource has not
// been garbage-collected yet; ending the way `process.exit` does skips that cleanup (engine/media/webrtc.ts). ava
// replaces `process.exit` in its workers, and the worker ends by itself: this ends it like `process.exit` would,
// after the 'exit' listeners registered before this one (ava's) have run.
exitPastWrtc();

const host = '127.0.0.1';
const base = 22000 + 2 * Math.floor(Math.random() * 4500);
const pool = new PortPool(base, base + 99);

/** Resolves once `check` holds; polls each 5 ms and fails after `ms`. */
async function until(what: string, check: () => boolean, ms = 10000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** An engine endpoint and a stand-in browser, connected; both closed at teardown. */
async function connectedPair(t: ExecutionContext): Promise<{ endpoint: WebRtcEndpoint; browser: FakeBrowser }> {
  const endpoint = new WebRtcEndpoint();
  t.teardown(() => endpoint.close());
  const browser = await answerOffer(await endpoint.createOffer());
  t.teardown(() => browser.close());
  await endpoint.acceptAnswer(browser.answer);
  await Promise.all([endpoint.connected(), browser.connected()]);
  return { endpoint, browser };
}

/** Feeds the browser's microphone with `frequency` at 48 kHz, 10 ms at a time, until the returned stop. */
function browserTone(browser: FakeBrowser, frequency: number): () => void {
  const next = sine(frequency, 48000);
  const timer = setInterval(() => browser.send(next(480)), 10);
  return () => clearInterval(timer);
}

/** Collects 8 kHz audio from `listen` until `samples` were heard after skipping `skip` (the start-up). */
async function hear(
  listen: (listener: (frame: Int16Array) => void) => () => void,
  skip: number,
  samples: number,
): Promise<number[]> {
  const heard: number[] = [];
  let stop = () => {};
  await new Promise<void>((resolve) => {
    stop = listen((frame) => {
      heard.push(...frame);
      if (heard.length >= skip + samples) resolve();
    });
  });
  stop();
  return heard.slice(skip, skip + samples);
}

/**
 * Waits until the browser heard `seconds` of audio after skipping `skipSeconds`, all at one rate (libwebrtc's playout
 * rate changes while a peer connection of the process has had no packet yet: the wait starts again then); returns it.
 */
async function browserHears(browser: FakeBrowser, skipSeconds: number, seconds: number): Promise<number[]> {
  let start = browser.heard.length;
  let rate = browser.rate;
  await until('the browser heard enough', () => {
    if (browser.rate !== rate) [start, rate] = [browser.heard.length, browser.rate];
    return rate > 0 && browser.heard.length - start >= (skipSeconds + seconds) * rate;
  });
  return browser.heard.slice(start + skipSeconds * rate, start + (skipSeconds + seconds) * rate);
}

/** The codec of what the browser received (its inbound-rtp's codec), e.g. `audio/PCMU`; waits for its statistics. */
async function receivedCodec(browser: FakeBrowser): Promise<string | undefined> {
  for (const deadline = Date.now() + 5000; Date.now() < deadline;) {
    const stats = [...(await browser.getStats()).values()] as { type: string; id: string; [key: string]: unknown }[];
    const inbound = stats.find((entry) => entry.type === 'inbound-rtp' && Number(entry.packetsReceived) > 0);
    const codec = stats.find((entry) => entry.type === 'codec' && entry.id === inbound?.codecId);
    if (codec !== undefined) return String(codec.mimeType);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return undefined;
}

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

// The tone tests run one at a time (serial tests run before the others): the peer connections of one process share
// libwebrtc's playout mixer, which hands every RTCAudioSink the highest rate any of them wants (48 kHz while an Opus
// call lasts, 16 kHz for one that has had no packet yet), and the stand-in browser's record of what it heard
// (test/helpers/webrtc-browser.ts) is only readable at one rate. The engine converts whatever rate comes.
test.serial(
  'a 1 kHz tone from the engine reaches the browser, and a 440 Hz tone from the browser reaches the engine',
  async (t) => {
    const { endpoint, browser } = await connectedPair(t);
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
    t.true(endpoint.stats.framesIn > 0 && endpoint.stats.framesOut > 0);
    t.is(await receivedCodec(browser), 'audio/PCMU', 'the browser answered with the first codec offered, PCMU');
  },
);

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
      `Opus: engine -> browser ${browserFrequency.toFixed(1)} Hz, browser -> engine ${engineFrequency.toFixed(1)} Hz`,
    );
    t.is(await receivedCodec(browser), 'audio/opus');
    t.true(Math.abs(browserFrequency - 1000) < 10, `the browser heard ${browserFrequency} Hz`);
    t.true(tonePower(atBrowser, 1000, browser.rate) > 0.8);
    t.true(Math.abs(engineFrequency - 440) < 5, `the engine heard ${engineFrequency} Hz`);
    t.true(tonePower(atEngine, 440, 8000) > 0.8);
  },
);

test.serial(
  'bridged to a G.711 RTP endpoint: a tone from the carrier side reaches the browser, and back',
  async (t) => {
    const { endpoint, browser } = await connectedPair(t);
    const leg = await MediaEndpoint.open(pool, host);
    const carrier = await MediaEndpoint.open(pool, host);
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
    const stopBridge = bridge(leg, endpoint);
    t.teardown(stopBridge);
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
  const endpoint = new WebRtcEndpoint();
  t.teardown(() => endpoint.close());
  const early = await t.throwsAsync(endpoint.acceptAnswer('v=0\r\n'), { instanceOf: WebRtcAnswerError });
  t.is(early?.problem, 'no_offer', 'an answer before the offer');
  const offer = await endpoint.createOffer();
  const browser = await answerOffer(offer);
  t.teardown(() => browser.close());
  const good = browser.answer;
  const audioAt = good.indexOf('m=audio');
  const sessionPart = good.slice(0, audioAt);
  const bad: [string, unknown, WebRtcAnswerProblem][] = [
    ['garbage', 'garbage \u0000\u00ff not sdp', 'malformed'],
    ['not a string', { sdp: good }, 'malformed'],
    ['empty', '', 'malformed'],
    ['too long', `${good}${'a=x\r\n'.repeat(20000)}`, 'malformed'],
    ['no m-line at all', sessionPart, 'no_audio'],
    ['only a video m-line', `${sessionPart}${good.slice(audioAt).replace('m=audio', 'm=video')}`, 'no_audio'],
    ['the audio refused (port 0)', good.replace(/^m=audio \d+/m, 'm=audio 0'), 'no_audio'],
    ['none of the offered codecs', good.replace(/^(m=audio \d+ \S+) .*$/m, '$1 96'), 'no_audio'],
    ['no fingerprint', good.replace(/^a=fingerprint:.*\r\n/gm, ''), 'malformed'],
    ['no ICE credentials', good.replace(/^a=ice-(ufrag|pwd):.*\r\n/gm, ''), 'malformed'],
    ['a line libwebrtc cannot read', good.replace(/^a=ice-pwd:.*$/m, '$&\r\nb=AS:notanumber\r\nx'), 'refused'],
  ];
  for (const [what, answer, problem] of bad) {
    const error = await t.throwsAsync(endpoint.acceptAnswer(answer), { instanceOf: WebRtcAnswerError }, what);
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

test('churn: 1,000 legs opened and closed in one process, no crash, memory and threads flat', async (t) => {
  const legs = 1000;
  const child = spawn(process.execPath, ['--expose-gc', '--import=tsx', path.resolve('test/helpers/webrtc-churn.ts')], {
    env: { ...process.env, LEGS: String(legs), CONCURRENCY: '8', CHECKPOINT: '100' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
    child.on('exit', (exitCode, exitSignal) => resolve([exitCode, exitSignal])),
  );
  t.log(stdout.trim());
  t.is(signal, null, `the churn process died of ${signal}: ${stderr}`);
  t.is(code, 0, stderr);
  const lines = stdout
    .trim()
    .split('\n')
    .map(
      (line) =>
        JSON.parse(line) as {
          legs: number;
          seconds: number;
          heapUsed: number;
          external: number;
          rss: number;
          threads: number;
          errors: number;
        },
    );
  const early = lines[0];
  const end = lines.at(-1);
  if (early === undefined || end === undefined || lines.length < 2) return t.fail(`no measurements: ${stdout}`);
  const mb = (bytes: number) => (bytes / 1048576).toFixed(1);
  t.log(
    `${end.legs} legs in ${end.seconds} s; after ${early.legs} -> ${end.legs}: heap+external ${mb(early.heapUsed + early.external)} -> ${mb(end.heapUsed + end.external)} MB, RSS ${mb(early.rss)} -> ${mb(end.rss)} MB, threads ${early.threads} -> ${end.threads}`,
  );
  t.is(end.legs, legs);
  t.is(end.errors, 0);
  t.true(end.threads <= early.threads + 2, `threads ${early.threads} -> ${end.threads}`);
  t.true(
    end.heapUsed + end.external <= early.heapUsed + early.external + 4 * 1048576,
    'heap + external within 4 MB of the checkpoint',
  );
  // The binding's native memory (RSS) settles slowly; 80 MB over 900 legs is 90 KB a leg, a leak well above
  // what test/helpers/webrtc-churn.ts measures (see docs/phones.md, "Legs").
  t.true(end.rss <= early.rss + 80 * 1048576, `RSS ${mb(early.rss)} -> ${mb(end.rss)} MB`);
});
