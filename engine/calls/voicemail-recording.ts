/**
 * A voicemail recording (the `voicemail` step): a beep, then the caller's audio into a WAV file under
 * SWITCHBOARD_DATA_DIR/recordings until they hang up or the time is up; then its row in `recordings`
 * (core/calls/recordings.ts) with `voicemail.ready` in the same transaction. A caller gone before the beep has ended
 * leaves no voicemail.
 */
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type pg from 'pg';
import type { CallRow } from '../../core/calls/calls.ts';
import { insertRecording } from '../../core/calls/recordings.ts';
import { inTransaction } from '../../core/database.ts';
import { appendEvent } from '../../core/events/outbox.ts';
import type { RtpEndpoint } from '../media/rtp.ts';
import { WavRecorder } from '../media/recorder.ts';

/** At start: the folder recordings go to. */
export async function prepareRecordings(recordingsDir: string): Promise<void> {
  await mkdir(recordingsDir, { recursive: true });
}

/** A 1 kHz beep, 300 ms, before a voicemail recording starts. */
function beep(): Int16Array {
  const samples = new Int16Array(2400);
  for (let i = 0; i < samples.length; i += 1) samples[i] = Math.round(8000 * Math.sin((2 * Math.PI * 1000 * i) / 8000));
  return samples;
}

/** What a voicemail recording needs of the caller's media: to play the beep and hear the caller. */
export type VoicemailMedia = Pick<RtpEndpoint, 'play' | 'onAudio'>;

/**
 * The beep, then the caller's audio into `file` from the moment the beep ends until `callOver` aborts (the call is over) or
 * `maxMs` passes. The file is opened before the beep so that no frame after it is lost to the opening. A caller who
 * hangs up before the beep has ended left no message: no file, undefined.
 */
export async function recordCaller(
  media: VoicemailMedia,
  file: string,
  callOver: AbortSignal,
  maxMs: number,
): Promise<{ durationMs: number } | undefined> {
  const recorder = await WavRecorder.open(file);
  if ((await media.play(beep(), callOver)) === 'aborted' || callOver.aborted) {
    await recorder.close().catch(() => undefined);
    await rm(file, { force: true });
    return undefined;
  }
  const stopRecording = media.onAudio((frame) => recorder.write(frame));
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, maxMs);
    callOver.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
  stopRecording();
  return recorder.close();
}

/** Records the caller on `media` (`recordCaller`), then writes the recording down with `voicemail.ready`. */
export async function recordVoicemail(
  options: { pool: pg.Pool; recordingsDir: string },
  row: CallRow,
  media: VoicemailMedia,
  callOver: AbortSignal,
  maxMs: number,
): Promise<void> {
  const file = path.join(options.recordingsDir, `${row.id}.wav`);
  const written = await recordCaller(media, file, callOver, maxMs);
  if (written === undefined) return;
  await inTransaction(options.pool, async (db) => {
    const recordingId = await insertRecording(db, {
      callId: row.id,
      workspaceId: row.workspace_id,
      kind: 'voicemail',
      path: file,
      durationMs: written.durationMs,
    });
    await appendEvent(db, {
      type: 'voicemail.ready',
      streamId: row.id,
      applicationId: row.application_id,
      workspaceId: row.workspace_id,
      externalWorkspaceId: row.external_workspace_id,
      fields: {
        callId: row.id,
        voicemail: {
          id: recordingId,
          recordingId,
          from: row.from_number.slice(0, 64) || 'anonymous',
          to: row.to_number.slice(0, 64),
          durationSeconds: Math.round(written.durationMs / 1000),
        },
      },
    });
  });
}
