/**
 * The service's own softphone page (`GET /phone`, client/softphone.ts) in Debian's Chromium, driven by playwright-core
 * with fake media devices: the fake microphone plays a 440 Hz WAV made here. `PhoneBench` is what the end-to-end
 * phone tests share: a service with the API and the engine, sipp as its carrier, one Chromium (a browser context per
 * page, so each page is a browser of its own: its own storage, so its own device), and an HTTPS webhook receiver.
 * `phoneLine` makes a workspace whose number's plan rings its users, with one token per user and a webhook endpoint.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ExecutionContext } from 'ava';
import { type Browser, chromium, type Page } from 'playwright-core';
import { type Line, addSippCarrier, numberRunning, ringThenHangUp, workspaceApi } from './phone-lines.ts';
import { startService, type TestService } from './service.ts';
import { sine } from './webrtc-browser.ts';
import { Receiver } from './webhook-receiver.ts';
import { until } from './until.ts';

/** 2 s of a sine, 48 kHz 16-bit mono (440 Hz: 880 whole periods, so it loops without a click). */
export function toneWav(frequency = 440, rate = 48000, seconds = 2): Buffer {
  const samples = sine(frequency, rate)(rate * seconds);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0);
  header.writeUInt32LE(36 + samples.byteLength, 4);
  header.write('WAVEfmt ', 8);
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36);
  header.writeUInt32LE(samples.byteLength, 40);
  return Buffer.concat([header, Buffer.from(samples.buffer)]);
}

/** Chromium's flags: headless, no sandbox (containers), fake devices with the microphone fed from `wav`. */
export function chromiumArgs(wav: string): string[] {
  return [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--use-fake-ui-for-media-stream',
    '--use-fake-device-for-media-stream',
    `--use-file-for-fake-audio-capture=${wav}`,
    '--autoplay-policy=no-user-gesture-required',
  ];
}

/**
 * tsx compiles the tests with esbuild's keepNames: the functions given to page.evaluate call its __name helper, which
 * a page does not have.
 */
export const keepNamesShim = 'globalThis.__name = (target) => target;';

/**
 * In the page: the dominant frequency of the remote audio (the page's <audio> element's stream) over half a second,
 * through an AnalyserNode (FFT of 8192 points, the peak interpolated), and the share of the power within 30 Hz of it.
 */
export function pageHears(page: Page) {
  return page.evaluate(async () => {
    const stream = (document.getElementById('remote-audio') as HTMLAudioElement).srcObject as MediaStream;
    const context = new AudioContext();
    await context.resume();
    const analyser = context.createAnalyser();
    analyser.fftSize = 8192;
    analyser.smoothingTimeConstant = 0;
    context.createMediaStreamSource(stream).connect(analyser);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const bins = new Float32Array(analyser.frequencyBinCount);
    analyser.getFloatFrequencyData(bins);
    await context.close();
    const hz = context.sampleRate / analyser.fftSize;
    let peak = 1;
    for (let index = 1; index < bins.length - 1; index += 1) if (bins[index]! > bins[peak]!) peak = index;
    const [left, centre, right] = [bins[peak - 1]!, bins[peak]!, bins[peak + 1]!];
    const offset = (0.5 * (left - right)) / (left - 2 * centre + right);
    const power = Array.from(bins, (db) => 10 ** (db / 10));
    const total = power.reduce((sum, value) => sum + value, 0);
    const near = power.reduce((sum, value, index) => (Math.abs(index - peak) * hz <= 30 ? sum + value : sum), 0);
    return { frequency: (peak + offset) * hz, share: near / total, peakDb: centre };
  });
}

export interface PhonePage {
  page: Page;
  deviceId: string;
  /** Errors the page threw. */
  errors: string[];
}

/** One entry of the page's log, with the time (ms since the epoch, the page's clock) it was added. */
export interface LogEntry {
  text: string;
  at: number;
}

export interface PhoneBench {
  service: TestService;
  sipPort: number;
  browser: Browser;
  receiver: Receiver;
  /** A directory of the run's own (the WAV, files sipp writes). */
  work: string;
  /** Opens /phone in a browser context of its own and signs in with `token`; resolves once registered. */
  openPage(t: ExecutionContext, token: string): Promise<PhonePage>;
  close(): Promise<void>;
}

export async function startPhoneBench(env: Record<string, string> = {}): Promise<PhoneBench> {
  const service = await startService({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', ...env }, ['api', 'engine']);
  await addSippCarrier(service);
  const work = await mkdtemp(path.join(os.tmpdir(), 'switchboard-phone-calls-'));
  const wav = path.join(work, 'microphone.wav');
  await writeFile(wav, toneWav());
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: chromiumArgs(wav),
  });
  const receiver = await Receiver.start();
  return {
    service,
    sipPort: service.sipPort as number,
    browser,
    receiver,
    work,
    async openPage(t, token) {
      const context = await browser.newContext();
      t.teardown(() => context.close());
      await context.addInitScript(keepNamesShim);
      const page = await context.newPage();
      const errors: string[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      await page.goto(`${service.url}/phone`);
      // Every line of the page's log, with when it was added.
      await page.evaluate(() => {
        const entries: { text: string; at: number }[] = [];
        (window as unknown as { phoneLog: typeof entries }).phoneLog = entries;
        new MutationObserver((changes) => {
          for (const change of changes) {
            for (const node of change.addedNodes) entries.push({ text: node.textContent ?? '', at: Date.now() });
          }
        }).observe(document.getElementById('log')!, { childList: true });
      });
      await page.fill('#token', token);
      await page.click('#start');
      const deviceId = await page.locator('#status[data-device-id]').getAttribute('data-device-id');
      return { page, deviceId: deviceId!, errors };
    },
    async close() {
      await browser.close();
      await receiver.close();
      await service.close();
      await rm(work, { recursive: true, force: true });
    },
  };
}

/** The page's log so far (see `openPage`), oldest first. */
export function pageLog(page: Page): Promise<LogEntry[]> {
  return page.evaluate(() => (window as unknown as { phoneLog: { text: string; at: number }[] }).phoneLog);
}

/** Resolves with the first entry of the page's log that matches `pattern`, once there is one. */
export async function logEntry(page: Page, pattern: RegExp, timeoutMs = 30_000): Promise<LogEntry> {
  const found = await page.waitForFunction(
    (source) =>
      (window as unknown as { phoneLog: { text: string; at: number }[] }).phoneLog.find((entry) =>
        new RegExp(source).test(entry.text),
      ),
    pattern.source,
    { timeout: timeoutMs },
  );
  return (await found.jsonValue()) as LogEntry;
}

/** The offer the page shows ringing (its incoming list), once there is one. */
export async function ringingOffer(page: Page): Promise<string> {
  return (await page.locator('#incoming li[data-offer-id]').first().getAttribute('data-offer-id'))!;
}

/**
 * A fresh workspace whose number's plan rings `users` (alice first, then the others, made here) with `strategy`
 * for `timeoutSecs` each, then hangs up, and a webhook endpoint of the workspace's application at the bench's receiver.
 * `token` makes a user token with devices:* and calls:* (what the page needs to answer and to hang up at once).
 */
export async function phoneLine(
  t: ExecutionContext,
  bench: PhoneBench,
  options: { users: string[]; strategy: 'simultaneous' | 'sequential'; timeoutSecs: number },
): Promise<{ line: Line; token: (externalUserId: string) => Promise<string> }> {
  const { service } = bench;
  const tenant = await workspaceApi(service);
  const { setup, api } = tenant;
  const userIds: string[] = [];
  for (const externalUserId of options.users) {
    if (externalUserId === 'alice') {
      userIds.push(setup.user.id as string);
      continue;
    }
    const user = await api('POST', '/users', { externalUserId, displayName: externalUserId });
    t.is(user.status, 201, user.text);
    userIds.push(user.body.id as string);
  }
  const webhook = await api('POST', '/webhooks', { url: bench.receiver.url() });
  t.is(webhook.status, 201, webhook.text);
  const line = await numberRunning(
    t,
    service,
    ringThenHangUp(
      userIds.map((userId) => ({ userId })),
      { strategy: options.strategy, timeoutSecs: options.timeoutSecs },
    ),
    tenant,
  );
  const token = async (externalUserId: string) => {
    const session = await service.request('POST', '/api/v1/sessions', {
      auth: setup.apiKey,
      body: {
        externalWorkspaceId: setup.workspace.externalWorkspaceId,
        externalUserId,
        scopes: ['devices:*', 'calls:*'],
      },
    });
    t.is(session.status, 201, session.text);
    return session.body.token as string;
  };
  return { line, token };
}

/** The call of an offer (the page shows offers; the tests follow their calls). */
export async function callOfOffer(service: TestService, offerId: string): Promise<string> {
  const result = await service.pool.query<{ call_id: string }>('SELECT call_id FROM offers WHERE id = $1', [offerId]);
  return result.rows[0]!.call_id;
}

/** The events of `callId` at the receiver, once `count` came: `type` and the event, in arrival order. */
export function webhookEvents(bench: PhoneBench, callId: string, count: number) {
  return until(`${count} events of the call at the webhook receiver`, async () => {
    const received = bench.receiver.received.filter((request) => request.stream === callId);
    return received.length >= count ? received.map((request) => request.event) : undefined;
  });
}
