/**
 * Sample-rate conversion of a stream of 16-bit mono PCM, chunk by chunk as it arrives (a call's audio, where
 * `resample.ts` converts a whole prompt at once). The same approach: a windowed-sinc (Blackman) band-limited
 * interpolator with its cutoff at 90% of the lower of the two Nyquist frequencies and its weights normalised to sum
 * to one. Its half-width is 12 zero crossings of the cutoff (24 in `resample.ts`): a call converts 100 chunks a
 * second for as long as it lasts, and 12 still keep the telephone band flat and the aliases out.
 *
 * The rates must be whole numbers of hertz; the output of sample n is centred on input time n × from / to, so there
 * are to / gcd(from, to) distinct sets of weights (6 from 8 kHz to 48 kHz, 1 the other way), computed once. The
 * stream starts from silence, and each output sample waits for the input it needs: the converter delays the audio
 * by its half-width (about 1.7 ms between 8 and 48 kHz), and `push` returns as many samples as are ready.
 */
import { blackman, sinc } from './resample.ts';

const zeroCrossings = 12;
const cutoffFraction = 0.9;

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

export class StreamResampler {
  /** Input samples the output advances by per sample, as step / phases. */
  private readonly step: number;
  private readonly phases: number;
  private readonly reach: number;
  /** weights[phase][j] applies to input sample (position - reach + 1 + j). */
  private readonly weights: Float32Array[] = [];
  /** Input not yet fully used; pending[0] is input sample `pendingStart`. */
  private pending: Float32Array;
  private pendingStart: number;
  /** The next output sample is centred on input sample `position` + `phase` / `phases`. */
  private position = 0;
  private phase = 0;

  /**
   * `before`: the audio just before the stream (at its own rate, e.g. the output rate of what came before); the
   * converter starts from it, linearly interpolated, instead of from silence, so a stream that changes rate goes on
   * without a dip.
   */
  constructor(
    readonly fromRate: number,
    readonly toRate: number,
    before?: { samples: Int16Array; rate: number },
  ) {
    if (!Number.isInteger(fromRate) || !Number.isInteger(toRate) || fromRate <= 0 || toRate <= 0) {
      throw new RangeError(`invalid sample rates ${fromRate} -> ${toRate}`);
    }
    const divisor = gcd(fromRate, toRate);
    this.step = fromRate / divisor;
    this.phases = toRate / divisor;
    const cutoff = Math.min(1, toRate / fromRate) * cutoffFraction; // of the input's Nyquist frequency
    const halfWidth = zeroCrossings / cutoff; // in input samples
    this.reach = Math.ceil(halfWidth);
    for (let phase = 0; phase < this.phases; phase += 1) {
      const weights = new Float32Array(2 * this.reach);
      let sum = 0;
      for (let j = 0; j < weights.length; j += 1) {
        const x = phase / this.phases + this.reach - 1 - j; // centre minus the input sample's time
        const weight = Math.abs(x) >= halfWidth ? 0 : sinc(cutoff * x) * blackman(x / halfWidth);
        weights[j] = weight;
        sum += weight;
      }
      for (let j = 0; j < weights.length; j += 1) weights[j] = (weights[j] as number) / sum;
      this.weights.push(weights);
    }
    // Silence (or `before`) before the stream's first sample.
    this.pending = new Float32Array(this.reach - 1);
    this.pendingStart = -(this.reach - 1);
    const { samples, rate } = before ?? { samples: new Int16Array(0), rate: fromRate };
    for (let index = 0; index < this.pending.length && samples.length >= 2; index += 1) {
      // This sample's time as an index into `before` (whose next sample, at samples.length, would be the stream's
      // first): interpolated between its two neighbours, or extrapolated from the last two past its end.
      const at = samples.length + ((index - this.pending.length) * rate) / fromRate;
      const below = Math.min(samples.length - 2, Math.floor(at));
      const fraction = at - below;
      if (at >= 0) {
        this.pending[index] = (samples[below] as number) * (1 - fraction) + (samples[below + 1] as number) * fraction;
      }
    }
  }

  /**
   * Ends the stream: the output samples still held back (those centred before the end of the input so far), computed
   * as if the last input sample went on. The converter is not to be used after.
   */
  flush(): Int16Array {
    if (this.fromRate === this.toRate) return new Int16Array(0);
    const end = this.pendingStart + this.pending.length;
    const held = Math.max(0, Math.ceil(((end - this.position) * this.phases - this.phase) / this.step));
    const last = this.pending.length > 0 ? Math.round(this.pending[this.pending.length - 1] as number) : 0;
    return this.push(new Int16Array(this.reach + 1).fill(last)).subarray(0, held);
  }

  /** Converts the next chunk of the stream; returns the output samples that are ready (possibly none). */
  push(input: Int16Array): Int16Array {
    if (this.fromRate === this.toRate) return Int16Array.from(input);
    const joined = new Float32Array(this.pending.length + input.length);
    joined.set(this.pending);
    joined.set(input, this.pending.length);
    const end = this.pendingStart + joined.length; // one past the last input sample
    // Output k (from 0) is centred on position + floor((phase + k × step) / phases) and needs input up to that
    // + reach, so the ready ones are those with phase + k × step < (end - reach - position) × phases.
    const room = (end - this.reach - this.position) * this.phases - this.phase;
    const output = new Int16Array(room > 0 ? Math.ceil(room / this.step) : 0);
    for (let n = 0; n < output.length; n += 1) {
      const weights = this.weights[this.phase] as Float32Array;
      const first = this.position - this.reach + 1 - this.pendingStart;
      let sum = 0;
      for (let j = 0; j < weights.length; j += 1) sum += (weights[j] as number) * (joined[first + j] as number);
      const value = Math.round(sum);
      output[n] = value > 32767 ? 32767 : value < -32768 ? -32768 : value;
      this.phase += this.step;
      while (this.phase >= this.phases) {
        this.phase -= this.phases;
        this.position += 1;
      }
    }
    const keepFrom = this.position - this.reach + 1;
    // A view, not a copy: the next push copies it into its own buffer.
    this.pending = joined.subarray(keepFrom - this.pendingStart);
    this.pendingStart = keepFrom;
    return output;
  }
}

/**
 * A stream of 16-bit mono PCM whose rate may change from one chunk to the next (libwebrtc's playout, which hands a
 * sink the highest rate any peer connection of the process wants), converted to `toRate` without a gap or a jump:
 * chunks at `toRate` pass as they are; at another rate they go through a `StreamResampler` that starts from the
 * audio before it and is flushed when the rate changes again.
 */
export class RateFollower {
  private resampler: StreamResampler | null = null;
  /** The last output samples, what a new converter starts from. */
  private last: Int16Array = new Int16Array(0);

  constructor(readonly toRate: number) {}

  /** Converts the next chunk, at `rate`; returns the output samples ready (possibly none). */
  push(samples: Int16Array, rate: number): Int16Array {
    let output: Int16Array;
    if (rate === (this.resampler?.fromRate ?? this.toRate)) {
      output = this.resampler === null ? samples : this.resampler.push(samples);
    } else {
      const held = this.resampler?.flush() ?? new Int16Array(0);
      if (held.length > 0) this.last = joined(this.last, held);
      this.resampler =
        rate === this.toRate ? null : new StreamResampler(rate, this.toRate, { samples: this.last, rate: this.toRate });
      const converted = this.resampler === null ? samples : this.resampler.push(samples);
      output = held.length === 0 ? converted : joined(held, converted);
    }
    if (output.length > 0) this.last = output;
    return output;
  }
}

function joined(first: Int16Array, second: Int16Array): Int16Array {
  const both = new Int16Array(first.length + second.length);
  both.set(first);
  both.set(second, first.length);
  return both;
}
