/**
 * The audio of prompts, as 8 kHz 16-bit mono PCM ready for `RtpEndpoint.play`: `{ tts }` spoken by the TTS
 * command, `{ audioUrl }` downloaded. Each prompt is produced once and cached, in memory (least recently used first
 * out past `maxMemoryBytes`) and on disk under `cacheDir` as `<sha256>.wav`, the hash of what the prompt is (the
 * text and TTS command, or the URL): a file that changes behind the same URL is not fetched again, so publish a
 * new URL for new audio. Concurrent requests for one prompt share one production. The PCM handed out is shared:
 * read it, do not change it.
 *
 * TTS runs `<ttsCommand> --stdout <text>` (espeak-ng by default) with the text as one argument, no shell; a text
 * that starts with "-" gets a leading space so the command cannot take it for an option. Its WAV output (any rate)
 * is converted to 8 kHz by `resample.ts` (a low-pass windowed-sinc resampler; no samples are just dropped), in
 * slices so the event loop, and the pacing of calls, goes on meanwhile.
 *
 * `audioUrl` is fetched by `download.ts` (https only, the webhook SSRF rules unless `allowPrivateNetworks`, no
 * redirects, at most `maxBytes`, default 10 MB) and must be a WAV file: PCM 8 or 16-bit, or A-law/mu-law, any rate,
 * mono or stereo. MP3 is refused with a message saying so (the sox build here cannot decode it either).
 *
 * Anything that goes wrong is a `PromptError` with a message for the log; the caller plays silence instead.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { download, DownloadError } from './download.ts';
import { resampleInSlices } from './resample.ts';
import { decodeWav, wavFile, WavError } from './wav.ts';

export class PromptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PromptError';
  }
}

export type Prompt = { tts: string } | { audioUrl: string };

export interface PromptsOptions {
  cacheDir: string;
  /** The TTS executable (a command name or path, no arguments); default 'espeak-ng'. */
  ttsCommand?: string;
  allowPrivateNetworks: boolean;
  /** The largest audio file downloaded, and the largest TTS output read; default 10 MB. */
  maxBytes?: number;
  /** The time limit of one download or one TTS run; default 30 s. */
  timeoutMs?: number;
  /** The PCM kept in memory; default 64 MB. */
  maxMemoryBytes?: number;
}

export interface PromptStats {
  /** TTS processes started. */
  ttsRuns: number;
  /** Audio files downloaded. */
  downloads: number;
  memoryHits: number;
  diskHits: number;
  /** Cache files that could not be written (the prompt was still produced). */
  cacheWriteErrors: number;
}

export const sampleRate = 8000;
const maxTextLength = 5000;
const maxStderr = 2000;

function sha256(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex');
}

/** The URL without its query and fragment, for messages (a query may carry a token). */
function shown(location: string): string {
  try {
    const url = new URL(location);
    return `${url.origin}${url.pathname}`;
  } catch {
    return 'the audio URL';
  }
}

function looksLikeMp3(body: Buffer): boolean {
  if (body.length >= 3 && body.toString('latin1', 0, 3) === 'ID3') return true;
  // An MPEG audio frame header: 11 sync bits, then layer bits that are not "reserved".
  return (
    body.length >= 2 && body[0] === 0xff && ((body[1] as number) & 0xe0) === 0xe0 && ((body[1] as number) & 0x06) !== 0
  );
}

function clip(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > 300 ? `${flat.slice(0, 299)}…` : flat;
}

export class Prompts {
  private readonly cacheDir: string;
  private readonly ttsCommand: string;
  private readonly allowPrivateNetworks: boolean;
  private readonly maxBytes: number;
  private readonly timeoutMs: number;
  private readonly maxMemoryBytes: number;
  private readonly memory = new Map<string, Promise<Int16Array>>();
  private readonly sizes = new Map<string, number>();
  private memoryBytes = 0;
  private readonly counts: PromptStats = { ttsRuns: 0, downloads: 0, memoryHits: 0, diskHits: 0, cacheWriteErrors: 0 };

  constructor(options: PromptsOptions) {
    this.cacheDir = options.cacheDir;
    this.ttsCommand = options.ttsCommand ?? 'espeak-ng';
    this.allowPrivateNetworks = options.allowPrivateNetworks;
    this.maxBytes = options.maxBytes ?? 10 * 1024 * 1024;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.maxMemoryBytes = options.maxMemoryBytes ?? 64 * 1024 * 1024;
  }

  get stats(): PromptStats {
    return { ...this.counts };
  }

  /** The prompt's audio, 8 kHz 16-bit mono. Rejects with `PromptError` when it cannot be produced. */
  pcm(prompt: Prompt): Promise<Int16Array> {
    let key: string;
    let produce: () => Promise<Int16Array>;
    const given = prompt as Partial<Record<'tts' | 'audioUrl', unknown>> | null;
    if (given !== null && typeof given === 'object' && typeof given.tts === 'string' && !('audioUrl' in given)) {
      const text = given.tts;
      if (text.trim() === '') return Promise.reject(new PromptError('the TTS text is empty'));
      if (text.length > maxTextLength) {
        return Promise.reject(new PromptError(`the TTS text is over ${maxTextLength} characters`));
      }
      key = sha256(['tts', this.ttsCommand, text]);
      produce = () => this.speak(text);
    } else if (given !== null && typeof given === 'object' && typeof given.audioUrl === 'string' && !('tts' in given)) {
      const location = given.audioUrl;
      key = sha256(['audioUrl', location]);
      produce = () => this.fetchAudio(location);
    } else {
      return Promise.reject(new PromptError('a prompt is either { tts: string } or { audioUrl: string }'));
    }

    const cached = this.memory.get(key);
    if (cached !== undefined) {
      this.counts.memoryHits += 1;
      this.memory.delete(key); // most recently used goes last
      this.memory.set(key, cached);
      return cached;
    }
    const pending = this.load(key, produce);
    this.memory.set(key, pending);
    pending.then(
      (pcm) => this.remember(key, pcm.byteLength),
      () => this.memory.delete(key),
    );
    return pending;
  }

  private remember(key: string, bytes: number): void {
    if (!this.memory.has(key)) return;
    this.sizes.set(key, bytes);
    this.memoryBytes += bytes;
    for (const oldest of this.memory.keys()) {
      if (this.memoryBytes <= this.maxMemoryBytes) break;
      const size = this.sizes.get(oldest);
      if (size === undefined || oldest === key) continue; // still being produced, or the newest
      this.memory.delete(oldest);
      this.sizes.delete(oldest);
      this.memoryBytes -= size;
    }
  }

  private async load(key: string, produce: () => Promise<Int16Array>): Promise<Int16Array> {
    const file = path.join(this.cacheDir, `${key}.wav`);
    try {
      const wav = decodeWav(await readFile(file));
      if (wav.sampleRate === sampleRate) {
        this.counts.diskHits += 1;
        return wav.pcm;
      }
    } catch {
      // Not cached yet (or an unreadable cache file, which is produced again and replaced).
    }
    let pcm: Int16Array;
    try {
      pcm = await produce();
    } catch (error) {
      throw error instanceof PromptError
        ? error
        : new PromptError(`the prompt could not be produced: ${String(error)}`);
    }
    const temporary = `${file}.${randomBytes(6).toString('hex')}.tmp`;
    try {
      await mkdir(this.cacheDir, { recursive: true });
      await writeFile(temporary, wavFile(pcm, sampleRate));
      await rename(temporary, file);
    } catch {
      this.counts.cacheWriteErrors += 1;
      await rm(temporary, { force: true }).catch(() => {});
    }
    return pcm;
  }

  private async speak(text: string): Promise<Int16Array> {
    const output = await this.runTts(text.startsWith('-') ? ` ${text}` : text);
    let wav;
    try {
      wav = decodeWav(output);
    } catch (error) {
      throw new PromptError(`TTS output of ${this.ttsCommand} is not usable: ${(error as Error).message}`);
    }
    const pcm = await resampleInSlices(wav.pcm, wav.sampleRate, sampleRate);
    if (pcm.length === 0) throw new PromptError(`TTS ${this.ttsCommand} produced no audio`);
    return pcm;
  }

  private runTts(argument: string): Promise<Buffer> {
    this.counts.ttsRuns += 1;
    return new Promise((resolve, reject) => {
      const child = spawn(this.ttsCommand, ['--stdout', argument], { stdio: ['ignore', 'pipe', 'pipe'] });
      const chunks: Buffer[] = [];
      let bytes = 0;
      let stderr = '';
      let failure: PromptError | undefined;
      const stop = (error: PromptError) => {
        failure ??= error;
        child.kill('SIGKILL');
      };
      const timer = setTimeout(
        () => stop(new PromptError(`TTS ${this.ttsCommand} did not finish within ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
      child.stdout.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes > this.maxBytes) stop(new PromptError(`TTS output is over ${this.maxBytes} bytes`));
        else chunks.push(chunk);
      });
      child.stderr.on('data', (chunk: Buffer) => {
        if (stderr.length < maxStderr) stderr += chunk.toString('utf8');
      });
      child.on('error', (error: NodeJS.ErrnoException) => {
        failure ??= new PromptError(`TTS command ${this.ttsCommand} could not run: ${error.code ?? error.message}`);
      });
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        if (failure !== undefined) reject(failure);
        else if (code !== 0) {
          const why = signal === null ? `exited with ${code}` : `was killed by ${signal}`;
          reject(new PromptError(`TTS ${this.ttsCommand} ${why}${stderr === '' ? '' : `: ${clip(stderr)}`}`));
        } else resolve(Buffer.concat(chunks));
      });
    });
  }

  private async fetchAudio(location: string): Promise<Int16Array> {
    let body: Buffer;
    try {
      body = await download(location, {
        allowPrivateNetworks: this.allowPrivateNetworks,
        maxBytes: this.maxBytes,
        timeoutMs: this.timeoutMs,
      });
    } catch (error) {
      if (error instanceof DownloadError) throw new PromptError(`audio ${shown(location)}: ${error.message}`);
      throw error;
    }
    this.counts.downloads += 1;
    if (looksLikeMp3(body)) {
      throw new PromptError(`audio ${shown(location)} is MP3, which is not supported: give a WAV file (PCM)`);
    }
    let wav;
    try {
      wav = decodeWav(body);
    } catch (error) {
      if (error instanceof WavError) throw new PromptError(`audio ${shown(location)}: ${error.message}`);
      throw error;
    }
    const pcm = await resampleInSlices(wav.pcm, wav.sampleRate, sampleRate);
    if (pcm.length === 0) throw new PromptError(`audio ${shown(location)} holds no samples`);
    return pcm;
  }
}
