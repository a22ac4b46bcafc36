/**
 * What a browser leg's codec costs the engine, G.711 (PCMU, what the engine offers first) against Opus (what a
 * browser that will not do G.711 gets), measured in one process with no database or SIP: `node --import=tsx
 * bench/phone-codecs.ts`. For each codec, in turns (PCMU, Opus, PCMU, Opus: the host may be shared, and turns show
 * the noise), BENCH_CODECS_CALLS (20) engine endpoints (engine/media/webrtc.ts) are each connected to a stand-in
 * browser (test/helpers/webrtc-browser.ts, which answers in the offer's order; for Opus it is offered Opus alone),
 * then for BENCH_CODECS_SECONDS (5) every endpoint is sent 20 ms of an 8 kHz tone each 20 ms, as a bridge would, while
 * it hears the browser's side (the stand-in sends nothing, so that is libwebrtc's playout of silence).
 *
 * Printed for each turn: the wall time of `send` per 20 ms frame (two `RTCAudioSource.onData` calls: on a busy host
 * this includes time the thread waited for a core), the main thread's CPU (/proc/self/task/<pid>/stat: the event
 * loop, which runs `send` and the sinks' callbacks) and the whole process's (libwebrtc's threads too, the stand-in
 * browsers' included), each as a share of one core and per call.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { WebRtcEndpoint } from '../engine/media/webrtc.ts';
import { answerOffer, type FakeBrowser, sine } from '../test/helpers/webrtc-browser.ts';

const calls = Number(process.env.BENCH_CODECS_CALLS ?? 20);
const seconds = Number(process.env.BENCH_CODECS_SECONDS ?? 5);
const clockTicksPerSecond = 100;

/** CPU ticks (user + system) the main thread has used so far. */
function mainThreadTicks(): number {
  const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/** `offer` with its G.711 codecs taken out: what a browser that insists on Opus answers. */
function opusOnly(offer: string): string {
  const dropped = [...offer.matchAll(/^a=rtpmap:(\d+) (PCMU|PCMA)\/8000\r$/gm)].map((match) => match[1] as string);
  const attribute = (line: string) =>
    dropped.some((pt) => new RegExp(`^a=(rtpmap|fmtp|rtcp-fb):${pt}( |\\r)`).test(line));
  const mLine = (line: string) =>
    line
      .split(' ')
      .filter((word, index) => index < 3 || !dropped.includes(word))
      .join(' ');
  return offer
    .split('\n')
    .filter((line) => !attribute(line))
    .map((line) => (line.startsWith('m=audio ') ? mLine(line) : line))
    .join('\n');
}

async function turn(codec: 'pcmu' | 'opus'): Promise<string> {
  const pairs: { endpoint: WebRtcEndpoint; browser: FakeBrowser }[] = [];
  try {
    for (let index = 0; index < calls; index += 1) {
      const endpoint = new WebRtcEndpoint();
      const offer = await endpoint.createOffer();
      const browser = await answerOffer(codec === 'opus' ? opusOnly(offer) : offer, false);
      pairs.push({ endpoint, browser });
      await endpoint.acceptAnswer(browser.answer);
      await Promise.all([endpoint.connected(), browser.connected()]);
    }
    const frame = sine(1000, 8000)(160);
    let heard = 0;
    for (const { endpoint } of pairs) endpoint.onAudio(() => (heard += 1));
    let sendNs = 0n;
    let sends = 0;
    const ticks = mainThreadTicks();
    const cpu = process.cpuUsage();
    const started = performance.now();
    const timer = setInterval(() => {
      for (const { endpoint } of pairs) {
        const before = process.hrtime.bigint();
        endpoint.send(frame);
        sendNs += process.hrtime.bigint() - before;
        sends += 1;
      }
    }, 20);
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    clearInterval(timer);
    const wallMs = performance.now() - started;
    const used = process.cpuUsage(cpu);
    const main = ((mainThreadTicks() - ticks) * 1000) / clockTicksPerSecond / wallMs;
    const whole = (used.user + used.system) / 1000 / wallMs;
    const share = (value: number) => `${(value * 100).toFixed(0)}% (${((value * 100) / calls).toFixed(2)}% per call)`;
    return (
      `${codec === 'pcmu' ? 'PCMU' : 'Opus'}: send ${(Number(sendNs) / sends / 1000).toFixed(0)} µs per 20 ms frame; ` +
      `main thread ${share(main)}, process ${share(whole)} of a core; ` +
      `${((heard / calls / wallMs) * 1000).toFixed(1)} frames/s heard per call`
    );
  } finally {
    for (const { endpoint, browser } of pairs) {
      endpoint.close();
      browser.close();
    }
  }
}

process.stdout.write(
  `codec bench: ${calls} calls, ${seconds} s a turn, ${os.cpus().length} CPUs, load average ${os.loadavg()[0]?.toFixed(1)}\n`,
);
for (const codec of ['pcmu', 'opus', 'pcmu', 'opus'] as const) process.stdout.write(`${await turn(codec)}\n`);
// A process that made an RTCAudioSource crashes at its natural exit (engine/media/webrtc.ts).
process.exit(0);
