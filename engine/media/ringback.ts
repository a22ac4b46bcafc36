/**
 * Ringback: what a caller hears while people's phones ring (the `ring` step). One cadence of the European tone,
 * 425 Hz for 1 s then 4 s of silence (ITU-T E.180), as 8 kHz PCM made in code; the call plays it again and again
 * until the round ends.
 */
const rate = 8000;
const frequency = 425;
const amplitude = 6000;

/** One 5 s cadence of ringback: 1 s of 425 Hz, 4 s of silence. */
export function ringbackCadence(): Int16Array {
  const pcm = new Int16Array(5 * rate);
  for (let index = 0; index < rate; index += 1) {
    pcm[index] = Math.round(amplitude * Math.sin((2 * Math.PI * frequency * index) / rate));
  }
  return pcm;
}
