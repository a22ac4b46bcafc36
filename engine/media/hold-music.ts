/**
 * Hold music: what a caller waiting in a queue hears (the `queue` step, docs/contact-center.md) when the queue has
 * no prompt of its own. A quiet looped melody made in code, no file: sixteen notes of a major pentatonic tune (half a
 * second each, a soft attack and a bell-like decay) over a bass note a change every two seconds, as 8 kHz PCM. The
 * loop is 8 s long and ends where it starts (every note fades out), so it repeats without a click; peaks stay near
 * -19 dBFS, about half as loud as ringback.
 */
const rate = 8000;
const noteSecs = 0.5;

/** The melody, in Hz (C major pentatonic around A4): 16 notes, 8 s. */
const melody = [
  523.25, 440.0, 392.0, 440.0, 523.25, 587.33, 659.25, 587.33, 523.25, 440.0, 392.0, 329.63, 392.0, 440.0, 392.0,
  329.63,
];
/** One bass note (Hz) per four melody notes: C3, A2, F2, G2. */
const bass = [130.81, 110.0, 87.31, 98.0];
const melodyAmplitude = 3000;
const bassAmplitude = 1300;

/** A note's envelope at `t` seconds into a note of `length` seconds: 15 ms attack, decay, 40 ms fade out. */
function envelope(t: number, length: number): number {
  const attack = Math.min(1, t / 0.015);
  const decay = Math.exp(-2.2 * (t / length));
  const release = Math.min(1, Math.max(0, (length - t) / 0.04));
  return attack * decay * release;
}

function tone(pcm: Float64Array, start: number, seconds: number, frequency: number, amplitude: number): void {
  const samples = Math.round(seconds * rate);
  for (let index = 0; index < samples; index += 1) {
    const t = index / rate;
    // A touch of the octave above makes it sound less like a test tone.
    const wave = Math.sin(2 * Math.PI * frequency * t) + 0.25 * Math.sin(4 * Math.PI * frequency * t);
    pcm[start + index] = (pcm[start + index] ?? 0) + (amplitude / 1.25) * envelope(t, seconds) * wave;
  }
}

function compose(): Int16Array {
  const noteSamples = Math.round(noteSecs * rate);
  const mixed = new Float64Array(melody.length * noteSamples);
  melody.forEach((frequency, index) => tone(mixed, index * noteSamples, noteSecs, frequency, melodyAmplitude));
  bass.forEach((frequency, index) => tone(mixed, index * 4 * noteSamples, 4 * noteSecs, frequency, bassAmplitude));
  return Int16Array.from(mixed, (sample) => Math.max(-32768, Math.min(32767, Math.round(sample))));
}

let loop: Int16Array | undefined;

/** One 8 s loop of the hold music (8 kHz PCM, shared: read it, do not change it). */
export function holdMusicLoop(): Int16Array {
  loop ??= compose();
  return loop;
}

/** The frequencies the loop is made of (the melody's and the bass's), for checks of what a caller hears. */
export const holdMusicNotes: readonly number[] = [...new Set([...melody, ...bass])];
