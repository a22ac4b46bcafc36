/**
 * The recordings table: a voicemail's WAV file (under SWITCHBOARD_DATA_DIR/recordings) and its length, for a call.
 * The engine writes the row in the transaction that also writes `voicemail.ready`.
 */
import type { Queryable } from '../database.ts';

export interface NewRecording {
  callId: string;
  workspaceId: string;
  kind: 'voicemail';
  path: string;
  durationMs: number;
}

/** Records a finished recording; its id. */
export async function insertRecording(db: Queryable, recording: NewRecording): Promise<string> {
  const inserted = await db.query<{ id: string }>(
    `INSERT INTO recordings (call_id, workspace_id, kind, path, duration_ms) VALUES ($1, $2, $3, $4, $5)
     RETURNING id`,
    [recording.callId, recording.workspaceId, recording.kind, recording.path, recording.durationMs],
  );
  return (inserted.rows[0] as { id: string }).id;
}
