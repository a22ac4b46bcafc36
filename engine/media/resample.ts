/**
 * Sample-rate conversion of 16-bit mono PCM: a windowed-sinc (Blackman) band-limited interpolator, so that going
 * down to 8 kHz low-pass filters first instead of dropping samples (which would fold everything above 4 kHz back
 * into the telephone band as aliasing).
 *
 * The filter's cutoff is 90% of the lower of the two Nyquist frequencies (3.6 kHz towards 8 kHz), its half-width 24
 * zero crossings of that cutoff; the kernel is tabulated once per conversion (512 steps per input sample, linearly
 * interpolated) and the weights of each output sample are normalised to sum to one, so the DC gain is exactly 1.
 */

const zeroCrossings = 24;
const tableSteps = 512;
const cutoffFraction = 0.9;

/** sin(πx)/(πx). */
export function sinc(x: number): number {
  if (x === 0) return 1;
  const y = Math.PI * x;
  return Math.sin(y) / y;
}

/** The Blackman window at `t` in [-1, 1]. */
export function blackman(t: number): number {
  return 0.42 + 0.5 * Math.cos(Math.PI * t) + 0.08 * Math.cos(2 * Math.PI * t);
}

interface Converter {
  outputLength: number;
  /** Computes output samples [first, end). */
  fill(first: number, end: number): void;
  output: Int16Array;
}

function converter(input: Int16Array, fromRate: number, toRate: number): Converter {
  if (!(fromRate > 0) || !(toRate > 0)) throw new RangeError(`invalid sample rates ${fromRate} -> ${toRate}`);
  const ratio = toRate / fromRate;
  const cutoff = Math.min(1, ratio) * cutoffFraction; // of the input's Nyquist frequency
  const halfWidth = zeroCrossings / cutoff; // in input samples
  const tableLength = Math.ceil(halfWidth * tableSteps) + 2;
  const table = new Float64Array(tableLength);
  for (let index = 0; index < tableLength; index += 1) {
    const x = index / tableSteps;
    table[index] = x >= halfWidth ? 0 : sinc(cutoff * x) * blackman(x / halfWidth);
  }
  const kernel = (x: number): number => {
    const position = Math.abs(x) * tableSteps;
    const index = Math.floor(position);
    if (index + 1 >= tableLength) return 0;
    const fraction = position - index;
    return (table[index] as number) * (1 - fraction) + (table[index + 1] as number) * fraction;
  };
  const outputLength = Math.floor((input.length * toRate) / fromRate);
  const output = new Int16Array(outputLength);
  const reach = Math.ceil(halfWidth);
  const fill = (firstOutput: number, endOutput: number) => {
    for (let n = firstOutput; n < endOutput; n += 1) {
      const center = (n * fromRate) / toRate;
      const first = Math.max(0, Math.floor(center) - reach + 1);
      const last = Math.min(input.length - 1, Math.floor(center) + reach);
      let sum = 0;
      let weights = 0;
      for (let k = first; k <= last; k += 1) {
        const weight = kernel(center - k);
        sum += weight * (input[k] as number);
        weights += weight;
      }
      const value = weights === 0 ? 0 : Math.round(sum / weights);
      output[n] = value > 32767 ? 32767 : value < -32768 ? -32768 : value;
    }
  };
  return { outputLength, fill, output };
}

/** `input` at `fromRate` converted to `toRate` (both in Hz), in one go. */
export function resample(input: Int16Array, fromRate: number, toRate = 8000): Int16Array {
  if (fromRate === toRate) return Int16Array.from(input);
  const { outputLength, fill, output } = converter(input, fromRate, toRate);
  fill(0, outputLength);
  return output;
}

/**
 * The same conversion in slices of `sliceSamples` output samples, yielding to the event loop between them: a
 * minute of 44.1 kHz audio is about a second of CPU, which must not stall the 20 ms pacing of calls in progress.
 */
export async function resampleInSlices(
  input: Int16Array,
  fromRate: number,
  toRate = 8000,
  sliceSamples = 2000,
): Promise<Int16Array> {
  if (fromRate === toRate) return Int16Array.from(input);
  const { outputLength, fill, output } = converter(input, fromRate, toRate);
  for (let first = 0; first < outputLength; first += sliceSamples) {
    fill(first, Math.min(outputLength, first + sliceSamples));
    await new Promise((resolve) => setImmediate(resolve));
  }
  return output;
}
