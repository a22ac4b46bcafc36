/**
 * A stand-in for the browser's side of a WebRTC leg: a plain `@roamhq/wrtc` RTCPeerConnection (not our code) that
 * answers the engine's offer, sends audio from an RTCAudioSource and records what its RTCAudioSink hears. The
 * Chromium tests use a real browser instead; this one lets the media tests run in one process.
 */
import wrtc from '@roamhq/wrtc';
import { until } from './until.ts';

export interface FakeBrowser {
  /** The SDP answer, with its candidates. */
  answer: string;
  /** Audio heard so far (the first channel), at `rate` (the sink's rate, 0 until audio came). */
  heard: number[];
  rate: number;
  /** 10 ms sink frames received. */
  frames: number;
  /** Sends 10 ms of mono PCM at `sampleRate` (48 kHz, a browser's microphone, unless given). */
  send(samples: Int16Array, sampleRate?: number): void;
  connected(timeoutMs?: number): Promise<void>;
  /** The peer connection's statistics (its inbound-rtp, outbound-rtp and remote-inbound-rtp among them). */
  getStats(): Promise<RTCStatsReport>;
  close(): void;
}

export async function answerOffer(offer: string, keepAudio = true): Promise<FakeBrowser> {
  const pc = new wrtc.RTCPeerConnection({ iceServers: [] });
  const source = new wrtc.nonstandard.RTCAudioSource();
  const track = source.createTrack();
  let sink: InstanceType<typeof wrtc.nonstandard.RTCAudioSink> | null = null;
  let closed = false;
  const browser: FakeBrowser = {
    answer: '',
    heard: [],
    rate: 0,
    frames: 0,
    send(samples, sampleRate = 48000) {
      if (!closed) source.onData({ samples, sampleRate, bitsPerSample: 16, channelCount: 1 });
    },
    connected(timeoutMs = 10000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (pc.connectionState === 'connected') done();
          else if (pc.connectionState === 'failed' || pc.connectionState === 'closed') done(new Error('failed'));
        };
        const timer = setTimeout(() => done(new Error('the browser side did not connect')), timeoutMs);
        const done = (error?: Error) => {
          clearTimeout(timer);
          pc.removeEventListener('connectionstatechange', check);
          if (error === undefined) resolve();
          else reject(error);
        };
        pc.addEventListener('connectionstatechange', check);
        check();
      });
    },
    getStats: () => pc.getStats(),
    close() {
      if (closed) return;
      closed = true;
      sink?.stop();
      track.stop();
      pc.close();
    },
  };
  pc.addEventListener('track', (event) => {
    if (sink !== null || closed) return;
    sink = new wrtc.nonstandard.RTCAudioSink(event.track);
    sink.ondata = (data: { samples: Int16Array; sampleRate: number; channelCount?: number }) => {
      const channels = data.channelCount ?? 1;
      browser.rate = data.sampleRate;
      browser.frames += 1;
      if (!keepAudio) return;
      for (let index = 0; index < data.samples.length; index += channels) browser.heard.push(data.samples[index] ?? 0);
    };
  });
  try {
    await pc.setRemoteDescription({ type: 'offer', sdp: offer });
    pc.getTransceivers()[0]?.sender.replaceTrack(track);
    const transceiver = pc.getTransceivers()[0];
    if (transceiver !== undefined) transceiver.direction = 'sendrecv';
    await pc.setLocalDescription(await pc.createAnswer());
    await new Promise<void>((resolve) => {
      const check = () => {
        if (pc.iceGatheringState !== 'complete') return;
        pc.removeEventListener('icegatheringstatechange', check);
        resolve();
      };
      pc.addEventListener('icegatheringstatechange', check);
      check();
    });
    browser.answer = pc.localDescription?.sdp ?? '';
    return browser;
  } catch (error) {
    browser.close();
    throw error;
  }
}

/** A streaming sine generator: consecutive chunks of `frequency` at `rate`, amplitude `amplitude`. */
export function sine(frequency: number, rate: number, amplitude = 8000): (samples: number) => Int16Array {
  let phase = 0;
  return (samples) => {
    const out = new Int16Array(samples);
    for (let index = 0; index < samples; index += 1) {
      out[index] = Math.round(amplitude * Math.sin(phase));
      phase += (2 * Math.PI * frequency) / rate;
    }
    phase %= 2 * Math.PI;
    return out;
  };
}

/** The frequency of a tone from its zero crossings (rising ones), in Hz. */
export function zeroCrossingFrequency(pcm: ArrayLike<number>, rate: number): number {
  let rising = 0;
  let first = -1;
  let last = -1;
  for (let index = 1; index < pcm.length; index += 1) {
    if ((pcm[index - 1] as number) < 0 && (pcm[index] as number) >= 0) {
      rising += 1;
      if (first < 0) first = index;
      last = index;
    }
  }
  return rising < 2 ? 0 : ((rising - 1) * rate) / (last - first);
}

/** The power of `frequency` in `pcm` (Goertzel), relative to the signal's total power (1 for a pure tone). */
export function tonePower(pcm: ArrayLike<number>, frequency: number, rate: number): number {
  const coefficient = 2 * Math.cos((2 * Math.PI * frequency) / rate);
  let previous = 0;
  let beforePrevious = 0;
  let total = 0;
  for (let index = 0; index < pcm.length; index += 1) {
    const sample = pcm[index] as number;
    total += sample * sample;
    const current = sample + coefficient * previous - beforePrevious;
    beforePrevious = previous;
    previous = current;
  }
  const power = previous * previous + beforePrevious * beforePrevious - coefficient * previous * beforePrevious;
  return power / Math.max(1, (total * pcm.length) / 2);
}

/** The share of the last `samples` heard in `frequency`, once there are that many (else 0). */
export function share(heard: readonly number[], frequency: number, rate: number, samples: number): number {
  const recent = heard.slice(-samples);
  return recent.length === samples && rate > 0 ? tonePower(recent, frequency, rate) : 0;
}

/** Threads of this process (Linux). */
export async function threadCount(): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  const match = /^Threads:\s+(\d+)/m.exec(await readFile('/proc/self/status', 'utf8'));
  return match === null ? 0 : Number(match[1]);
}

/** Feeds the browser's microphone with `frequency` at 48 kHz, 10 ms at a time, until the returned stop. */
export function browserTone(browser: FakeBrowser, frequency: number): () => void {
  const next = sine(frequency, 48000);
  const timer = setInterval(() => browser.send(next(480)), 10);
  return () => clearInterval(timer);
}

/** Collects 8 kHz audio from `listen` until `samples` were heard after skipping `skip` (the start-up). */
export async function hear(
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
export async function browserHears(browser: FakeBrowser, skipSeconds: number, seconds: number): Promise<number[]> {
  let start = browser.heard.length;
  let rate = browser.rate;
  await until(
    'the browser heard enough',
    () => {
      if (browser.rate !== rate) [start, rate] = [browser.heard.length, browser.rate];
      return rate > 0 && browser.heard.length - start >= (skipSeconds + seconds) * rate ? true : undefined;
    },
    10_000,
  );
  return browser.heard.slice(start + skipSeconds * rate, start + (skipSeconds + seconds) * rate);
}

/** The codec of what the browser received (its inbound-rtp's codec), e.g. `audio/PCMU`; waits for its statistics. */
export async function receivedCodec(browser: FakeBrowser): Promise<string | undefined> {
  for (const deadline = Date.now() + 5000; Date.now() < deadline;) {
    const stats = [...(await browser.getStats()).values()] as { type: string; id: string; [key: string]: unknown }[];
    const inbound = stats.find((entry) => entry.type === 'inbound-rtp' && Number(entry.packetsReceived) > 0);
    const codec = stats.find((entry) => entry.type === 'codec' && entry.id === inbound?.codecId);
    if (codec !== undefined) return String(codec.mimeType);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return undefined;
}
