/**
 * Debian's Chromium for the browser tests, driven by playwright-core (never a downloaded browser): launched headless
 * with fake media devices whose microphone plays a WAV, and measures taken in a page.
 */
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { sine } from './webrtc-browser.ts';

/** 2 s of a 440 Hz sine, 48 kHz 16-bit mono (880 whole periods: it loops without a click). */
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

/**
 * Chromium with its profile in `profileDir`, its fake microphone playing `wav` (looped), autoplay allowed, and the
 * `__name` helper every page needs for functions compiled by tsx.
 */
export async function launchChromium(profileDir: string, wav: string): Promise<BrowserContext> {
  const browser = await chromium.launchPersistentContext(profileDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--use-fake-ui-for-media-stream',
      '--use-fake-device-for-media-stream',
      `--use-file-for-fake-audio-capture=${wav}`,
      '--autoplay-policy=no-user-gesture-required',
    ],
  });
  // tsx compiles this file with esbuild's keepNames: the functions given to page.evaluate call its __name helper,
  // which the page does not have.
  await browser.addInitScript('globalThis.__name = (target) => target;');
  return browser;
}

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
