/**
 * Re-framing a stream of samples into frames of a fixed length: WebRTC's audio comes and goes in 10 ms frames, RTP's
 * in 20 ms ones. Samples are kept until a whole frame is there; nothing is dropped or padded.
 */
export class Reframer {
  private buffer: Int16Array;
  private filled = 0;

  constructor(readonly frameSamples: number) {
    if (!Number.isInteger(frameSamples) || frameSamples <= 0) throw new RangeError(`invalid frame ${frameSamples}`);
    this.buffer = new Int16Array(frameSamples);
  }

  /** Adds `samples`; returns the frames completed by them, in order (each a new array). */
  push(samples: Int16Array): Int16Array[] {
    const frames: Int16Array[] = [];
    let offset = 0;
    while (offset < samples.length) {
      const count = Math.min(this.frameSamples - this.filled, samples.length - offset);
      this.buffer.set(samples.subarray(offset, offset + count), this.filled);
      this.filled += count;
      offset += count;
      if (this.filled === this.frameSamples) {
        frames.push(this.buffer);
        this.buffer = new Int16Array(this.frameSamples);
        this.filled = 0;
      }
    }
    return frames;
  }
}
