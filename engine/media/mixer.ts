/**
 * A mixer of named audio inputs (8 kHz), ticking every 20 ms: each input's frames arrive as they come and wait in
 * a small jitter buffer of their own; at each tick one frame (160 samples) is taken from every input that has one,
 * and every output is sent the sum of its inputs' frames (clipped to 16 bits), or nothing when none of them had
 * audio. The ticks are paced from the start (player.ts's `pace`), so the mix neither drifts nor bursts.
 *
 * A jitter buffer starts giving frames once it holds `prefillSamples` (40 ms), and fills again that far when it
 * runs dry, so audio arriving a little early or late is not cut into pieces; it keeps at most `maxSamples` (120 ms),
 * dropping the oldest, so an input whose clock runs faster than ours adds no delay over time.
 *
 * The supervision of a call (engine/calls/supervision.ts) mixes the caller, the party and the supervisor with it.
 */
import { frameSamples, pace } from './player.ts';

const prefillSamples = 2 * frameSamples;
const maxSamples = 6 * frameSamples;

/** One input's buffered samples, oldest first. */
class JitterBuffer {
  private readonly samples = new Int16Array(maxSamples);
  private start = 0;
  private count = 0;
  private flowing = false;

  push(frame: Int16Array): void {
    for (const sample of frame) {
      if (this.count === maxSamples) {
        this.start = (this.start + 1) % maxSamples;
        this.count -= 1;
      }
      this.samples[(this.start + this.count) % maxSamples] = sample;
      this.count += 1;
    }
  }

  /** The next frame (padded with silence when the buffer runs dry in it), or undefined while filling. */
  take(): Int16Array | undefined {
    if (!this.flowing && this.count < prefillSamples) return undefined;
    // A buffer that runs dry (now, or within this frame) fills to the prefill again before it gives more.
    this.flowing = this.count >= frameSamples;
    if (this.count === 0) return undefined;
    const frame = new Int16Array(frameSamples);
    const taken = Math.min(frameSamples, this.count);
    for (let index = 0; index < taken; index += 1) frame[index] = this.samples[(this.start + index) % maxSamples]!;
    this.start = (this.start + taken) % maxSamples;
    this.count -= taken;
    return frame;
  }

  clear(): void {
    this.start = 0;
    this.count = 0;
    this.flowing = false;
  }
}

/** An output: the inputs it hears and where their mix goes. */
export interface MixOutput<Name extends string> {
  from: readonly Name[];
  to(frame: Int16Array): void;
}

export class Mixer<Name extends string> {
  private readonly inputs = new Map<Name, JitterBuffer>();
  private outputs: readonly MixOutput<Name>[] = [];
  private readonly stopped = new AbortController();

  constructor(names: readonly Name[]) {
    for (const name of names) this.inputs.set(name, new JitterBuffer());
  }

  /** Starts ticking; it stops with `stop` or when `signal` aborts. */
  start(signal: AbortSignal): void {
    const until = AbortSignal.any([signal, this.stopped.signal]);
    void pace(Number.POSITIVE_INFINITY, () => this.tick(), until).catch(() => {});
  }

  stop(): void {
    this.stopped.abort();
  }

  /** A frame of `name`'s audio, as it arrives. */
  input(name: Name, frame: Int16Array): void {
    if (!this.stopped.signal.aborted) this.inputs.get(name)?.push(frame);
  }

  /** Forgets what `name` has buffered (its audio stopped coming: stale frames are not played later). */
  clear(name: Name): void {
    this.inputs.get(name)?.clear();
  }

  /** Where the mixes go from the next tick on (none: nothing is sent). */
  route(outputs: readonly MixOutput<Name>[]): void {
    this.outputs = outputs;
  }

  /** One 20 ms step: `start` calls it on its pacer (tests call it directly, as a clock of their own). */
  tick(): void {
    const frames = new Map<Name, Int16Array>();
    for (const [name, buffer] of this.inputs) {
      const frame = buffer.take();
      if (frame !== undefined) frames.set(name, frame);
    }
    for (const output of this.outputs) {
      const heard = output.from.flatMap((name) => frames.get(name) ?? []);
      if (heard.length === 0) continue;
      try {
        output.to(heard.length === 1 ? heard[0]! : mix(heard));
      } catch {
        // A closed endpoint drops what it is sent; the others still get theirs.
      }
    }
  }
}

/** The sum of `frames` (each `frameSamples` long), clipped to 16 bits. */
export function mix(frames: readonly Int16Array[]): Int16Array {
  const sum = new Int16Array(frameSamples);
  for (let index = 0; index < frameSamples; index += 1) {
    let value = 0;
    for (const frame of frames) value += frame[index] ?? 0;
    sum[index] = Math.max(-32768, Math.min(32767, value));
  }
  return sum;
}
