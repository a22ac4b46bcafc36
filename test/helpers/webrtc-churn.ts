/**
 * The WebRTC churn (test/engine/media/webrtc.test.ts, webrtc-g711.test.ts), run as a process of its own with `--expose-gc`:
 * opens and closes `LEGS` engine endpoints of the stack `STACK` names (`libwebrtc`, the default, or `g711`), each answered by a stand-in browser, in batches of `CONCURRENCY` at a time: offer and answer, both
 * sides connected, audio both ways until each side heard a frame, then both closed. After `CHECKPOINT` legs (warmed
 * up), every `EVERY` legs when set, and at the end it collects garbage and writes one JSON line to stdout: legs, seconds, heap, external, RSS and
 * threads. It ends with `process.exit`: a process that created an RTCAudioSource crashes at its natural exit (see
 * engine/media/webrtc.ts).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { WebRtcEndpoint } from '../../engine/media/webrtc.ts';
import { G711WebRtcEndpoint } from '../../engine/media/webrtc-g711.ts';
import { answerOffer, threadCount } from './webrtc-browser.ts';

const legs = Number(process.env.LEGS ?? 1000);
const concurrency = Number(process.env.CONCURRENCY ?? 8);
const checkpoint = Number(process.env.CHECKPOINT ?? 100);
/** Measures again every `EVERY` legs after the checkpoint (0: only at the checkpoint and the end). */
const every = Number(process.env.EVERY ?? 0);
const Endpoint = process.env.STACK === 'g711' ? G711WebRtcEndpoint : WebRtcEndpoint;
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');

const silence8k = new Int16Array(160);
const silence48k = new Int16Array(480);
const started = performance.now();
let errors = 0;

async function measure(done: number): Promise<void> {
  for (let round = 0; round < 3; round += 1) {
    gc?.();
    await sleep(50); // lets the binding's threads hand their last callbacks to the event loop
  }
  const memory = process.memoryUsage();
  const line = {
    legs: done,
    seconds: Math.round((performance.now() - started) / 100) / 10,
    heapUsed: memory.heapUsed,
    external: memory.external,
    rss: memory.rss,
    threads: await threadCount(),
    errors,
  };
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

async function leg(): Promise<void> {
  const endpoint = new Endpoint({ onError: () => (errors += 1) });
  let browser: Awaited<ReturnType<typeof answerOffer>> | null = null;
  let timer: NodeJS.Timeout | undefined;
  try {
    browser = await answerOffer(await endpoint.createOffer(), false);
    await endpoint.acceptAnswer(browser.answer);
    await Promise.all([endpoint.connected(), browser.connected()]);
    const far = browser;
    const heard = new Promise<void>((resolve) => {
      const stop = endpoint.onAudio(() => {
        stop();
        resolve();
      });
    });
    timer = setInterval(() => {
      endpoint.send(silence8k);
      far.send(silence48k);
      far.send(silence48k);
    }, 20);
    await heard;
    while (far.frames === 0) await sleep(5);
  } finally {
    clearInterval(timer);
    endpoint.close();
    browser?.close();
  }
}

let done = 0;
try {
  // Batches of `concurrency` legs at once, so that nothing is in flight when memory and threads are measured.
  while (done < legs) {
    const batch = Math.min(concurrency, legs - done);
    await Promise.all(Array.from({ length: batch }, () => leg()));
    const before = done;
    done += batch;
    if (before < checkpoint && done >= checkpoint) await measure(done);
    else if (every > 0 && done < legs && Math.floor(before / every) < Math.floor(done / every)) await measure(done);
  }
  await measure(done);
  process.exit(0);
} catch (error) {
  process.stderr.write(`churn failed after ${done} legs: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
}
