/**
 * Supervision of a call (operation 56, docs/contact-center.md "Call control"): the modes, whether a supervisor can be
 * offered a leg, and the engine's side of the recorded requests (taking one up once). The API records a request with
 * the other call commands (commands.ts), one per supervisor.
 */
import type pg from 'pg';
import { type Static, Type } from 'typebox';
import type { Queryable } from '../database.ts';
import { memberHasLiveDevice } from '../devices/devices.ts';

/** `listen` hears both parties; `whisper` also talks to the agent (the party); `barge` talks to both. */
export const SuperviseMode = Type.Union([Type.Literal('listen'), Type.Literal('whisper'), Type.Literal('barge')]);
export type SuperviseMode = Static<typeof SuperviseMode>;

/**
 * Whether the workspace's member can supervise the call now: `unknown` (no such member), `unreachable` (no live
 * device, a browser or mobile device present or a SIP device registered, that is free or already on this call: the
 * supervisor's own leg when the mode changes) or `reachable`. A device on another call cannot be offered this one.
 */
export async function supervisorReach(
  db: Queryable,
  workspaceId: string,
  memberId: string,
  callId: string,
): Promise<'unknown' | 'unreachable' | 'reachable'> {
  const result = await db.query<{ live: boolean }>(
    `SELECT ${memberHasLiveDevice('m.id', { orOnCall: '$3::uuid' })} AS live
       FROM members m WHERE m.id = $1 AND m.workspace_id = $2`,
    [memberId, workspaceId, callId],
  );
  const row = result.rows[0];
  if (row === undefined) return 'unknown';
  return row.live ? 'reachable' : 'unreachable';
}

/**
 * The engine takes up the recorded request `requestId` of the supervisor `memberId` on the call: true once (it is
 * removed), false when it is gone (taken already, or replaced by a newer one, which is taken in its turn).
 */
export async function takeSuperviseRequest(
  pool: pg.Pool,
  callId: string,
  memberId: string,
  requestId: string,
): Promise<boolean> {
  const result = await pool.query(
    `UPDATE calls SET supervise_requests = nullif(supervise_requests - $2::text, '{}'::jsonb)
      WHERE id = $1 AND supervise_requests -> $2::text ->> 'id' = $3 AND ended_at IS NULL`,
    [callId, memberId, requestId],
  );
  return result.rowCount === 1;
}
