/**
 * Recording a voicemail's audio (engine/calls/voicemail-recording.ts `recordCaller`) through a double of the caller's
 * media: what is recorded is what the caller sends from the end of the beep until they hang up or the time is up, and
 * a caller gone before the beep ended leaves nothing. The whole call through sipp is in test/engine/calls/calls.test.ts.
 */
import { access, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { recordCaller, type VoicemailMedia } from '../../../engine/calls/voicemail-recording.ts';

/** The caller's media: `play` lasts until `endBeep` (or its signal), `say` sends a frame to whoever listens. */
function callerMedia() {
  const listeners = new Set<(frame: Int16Array) => void>();
  let endBeep: () => void = () => {};
  let beepStarted: () => void = () => {};
  const playing = new Promise<void>((resolve) => (beepStarted = resolve));
  const media: VoicemailMedia = {
    play: (_pcm, signal) =>
      new Promise((resolve) => {
        endBeep = () => resolve('done');
        signal?.addEventListener('abort', () => resolve('aborted'), { once: true });
        beepStarted();
      }),
    onAudio: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
  return {
    media,
    playing,
    endBeep: () => endBeep(),
    say: (value: number) => {
      for (const listener of listeners) listener(new Int16Array(160).fill(value));
    },
  };
}

async function recordingsDir(t: ExecutionContext) {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-voicemail-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test('the recording is what the caller sends from the end of the beep until they hang up', async (t) => {
  const file = path.join(await recordingsDir(t), 'call.wav');
  const caller = callerMedia();
  const gone = new AbortController();
  const recording = recordCaller(caller.media, file, gone.signal, 60_000);
  await caller.playing;
  await t.notThrowsAsync(access(file), 'the file is open before the beep is played');
  caller.say(1); // during the beep: not the message
  caller.endBeep();
  await new Promise((resolve) => setImmediate(resolve));
  for (let frame = 0; frame < 50; frame += 1) caller.say(1000);
  gone.abort();
  t.deepEqual(await recording, { durationMs: 1000, bytes: 44 + 50 * 160 * 2 });
  caller.say(2); // after the hangup
  const wav = await readFile(file);
  const samples = new Set<number>();
  for (let offset = 44; offset < wav.length; offset += 2) samples.add(wav.readInt16LE(offset));
  t.deepEqual([...samples], [1000]);
});

test('a caller who hangs up before the beep has ended leaves no message and no file', async (t) => {
  const dir = await recordingsDir(t);
  const caller = callerMedia();
  const gone = new AbortController();
  const recording = recordCaller(caller.media, path.join(dir, 'call.wav'), gone.signal, 5 * 60_000);
  await caller.playing;
  gone.abort();
  t.is(await recording, undefined);
  await t.throwsAsync(access(path.join(dir, 'call.wav')));
});

test('a caller who stays past the longest message is recorded up to it', async (t) => {
  const file = path.join(await recordingsDir(t), 'call.wav');
  const caller = callerMedia();
  const recording = recordCaller(caller.media, file, new AbortController().signal, 50);
  await caller.playing;
  caller.endBeep();
  await new Promise((resolve) => setImmediate(resolve));
  caller.say(500);
  t.deepEqual(await recording, { durationMs: 20, bytes: 44 + 160 * 2 });
});
