/**
 * Recording a leg to a WAV file (8 kHz, 16-bit, mono PCM), e.g. a voicemail.
 *
 * `write` is synchronous for the media path: frames are gathered in memory and written out in blocks of 32 KiB
 * (2 s of audio) behind a queue. `close` writes what is left, then the header with the real sizes over the
 * placeholder written at `open`, and resolves with the duration and the file's size in bytes (header included).
 * A write that failed (a full disk) makes `close` reject with that error; frames written after `close` are dropped.
 */
import { type FileHandle, open } from 'node:fs/promises';
import { wavHeader, wavHeaderBytes } from './wav.ts';

const blockBytes = 32 * 1024;

export class WavRecorder {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private dataBytes = 0;
  private queue: Promise<void> = Promise.resolve();
  private failure: unknown;
  private closing: Promise<{ durationMs: number; bytes: number }> | undefined;

  private constructor(
    private readonly file: FileHandle,
    readonly path: string,
  ) {}

  /** Creates (or truncates) the file at `path`. */
  static async open(path: string): Promise<WavRecorder> {
    const file = await open(path, 'w');
    try {
      await file.write(wavHeader(0), 0, wavHeaderBytes, 0);
    } catch (error) {
      await file.close();
      throw error;
    }
    return new WavRecorder(file, path);
  }

  /** Samples written so far (including those not yet on disk). */
  get samples(): number {
    return (this.dataBytes + this.pendingBytes) / 2;
  }

  write(frame: Int16Array): void {
    if (this.closing !== undefined || frame.length === 0) return;
    const bytes = Buffer.alloc(frame.length * 2);
    for (let index = 0; index < frame.length; index += 1) bytes.writeInt16LE(frame[index] as number, index * 2);
    this.pending.push(bytes);
    this.pendingBytes += bytes.length;
    if (this.pendingBytes >= blockBytes) this.flush();
  }

  close(): Promise<{ durationMs: number; bytes: number }> {
    this.closing ??= this.finish();
    return this.closing;
  }

  private flush(): void {
    if (this.pending.length === 0) return;
    const block = Buffer.concat(this.pending);
    const position = wavHeaderBytes + this.dataBytes;
    this.dataBytes += block.length;
    this.pending = [];
    this.pendingBytes = 0;
    this.queue = this.queue.then(async () => {
      if (this.failure !== undefined) return;
      try {
        await this.file.write(block, 0, block.length, position);
      } catch (error) {
        this.failure = error;
      }
    });
  }

  private async finish(): Promise<{ durationMs: number; bytes: number }> {
    this.flush();
    try {
      await this.queue;
      if (this.failure !== undefined) throw this.failure;
      await this.file.write(wavHeader(this.dataBytes), 0, wavHeaderBytes, 0);
      await this.file.sync();
    } finally {
      await this.file.close();
    }
    return { durationMs: Math.round(this.dataBytes / 16), bytes: wavHeaderBytes + this.dataBytes };
  }
}
