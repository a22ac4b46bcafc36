/**
 * Supervision of a call (operation 56, docs/contact-center.md "Call control"): the modes, and whether a supervisor can
 * be offered a leg. The request is a call command (commands.ts: recorded by the API, one per supervisor, and taken up
 * once by the engine).
 */
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
