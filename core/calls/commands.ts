/**
 * Commands to a running call (docs/architecture.md, "Call commands"; docs/calls.md). The API records a command on the
 * call and announces it on `callControlChannel` in the same transaction; the engine that owns the call parses the
 * announcement against `CallCommand` (anything else is dropped) and dispatches it to the call
 * (engine/calls/commands.ts). On reconnecting, and every 2 s, the engine also reads the commands recorded for its
 * calls (`pendingCallCommands`), so a missed announcement is not lost.
 *
 * Today the commands are `hangup` and `hold`. A new one (transfer, recording, supervise) is a member of the union and
 * its schema here, how it is recorded on the call (`recordCallCommand`) and read back (`pendingCallCommands`), and
 * its case in the engine's dispatch (the compiler lists the switch that lacks it).
 */
import { type Static, Type } from 'typebox';
import { Compile } from 'typebox/compile';
import { announce, callControlChannel, parseNotice } from '../change-notices.ts';
import type { Queryable } from '../database.ts';
import { type CallRow, callColumns } from './calls.ts';

/** End the call from our side (`POST /calls/{id}/hangup`): recorded as `calls.hangup_requested_at`. */
export const HangupCommand = Type.Object({ action: Type.Literal('hangup'), callId: Type.String() });
export type HangupCommand = Static<typeof HangupCommand>;

/**
 * Hold (`hold: true`) or resume a connected call (`POST /calls/{id}/hold`): recorded as `calls.hold_requested`, which
 * a new connection of the call clears. Acting on it twice is acting on it once.
 */
export const HoldCommand = Type.Object({ action: Type.Literal('hold'), callId: Type.String(), hold: Type.Boolean() });
export type HoldCommand = Static<typeof HoldCommand>;

export const CallCommand = Type.Union([HangupCommand, HoldCommand]);
export type CallCommand = Static<typeof CallCommand>;

const callCommand = Compile(CallCommand);

/** An announcement's payload as a command; undefined for anything that is not one (unreadable, unknown action). */
export function parseCallCommand(payload: string): CallCommand | undefined {
  return parseNotice(payload, callCommand);
}

/**
 * Records `command` on its call in the workspace (row-locked until the transaction commits) and announces it: the
 * owning engine hears it once `db`'s transaction commits. Returns the call as it is, or undefined when the workspace
 * has no such call. A call that has already ended is returned without an announcement: the caller refuses it and
 * rolls the transaction back, so nothing stays recorded.
 */
export async function recordCallCommand(
  db: Queryable,
  workspaceId: string,
  command: CallCommand,
): Promise<CallRow | undefined> {
  let row: CallRow | undefined;
  switch (command.action) {
    case 'hangup': {
      const result = await db.query<CallRow>(
        `UPDATE calls c SET hangup_requested_at = clock_timestamp() FROM workspaces w
          WHERE c.id = $1 AND c.workspace_id = $2 AND w.id = c.workspace_id RETURNING ${callColumns}`,
        [command.callId, workspaceId],
      );
      row = result.rows[0];
      break;
    }
    case 'hold': {
      // Only a connected call is recorded; the caller reads the state it is in and refuses any other.
      const result = await db.query<CallRow>(
        `UPDATE calls c SET hold_requested = CASE WHEN c.state = 'connected' THEN $3 ELSE c.hold_requested END
           FROM workspaces w
          WHERE c.id = $1 AND c.workspace_id = $2 AND w.id = c.workspace_id RETURNING ${callColumns}`,
        [command.callId, workspaceId, command.hold],
      );
      row = result.rows[0];
      if (row !== undefined && row.ended_at === null && row.state !== 'connected') return row;
      break;
    }
  }
  if (row === undefined || row.ended_at !== null) return row;
  // The call's id as stored (the path may spell it in capitals): the engine finds its calls by it.
  await announce(db, callControlChannel, JSON.stringify({ ...command, callId: row.id }));
  return row;
}

/** The commands recorded for the live calls an engine owns (the re-check on reconnect and the 2 s poll). */
export async function pendingCallCommands(db: Queryable, engineOwner: string): Promise<CallCommand[]> {
  const result = await db.query<{ id: string; hangup: boolean; hold: boolean | null }>(
    `SELECT id, hangup_requested_at IS NOT NULL AS hangup, CASE WHEN state = 'connected' THEN hold_requested END AS hold
       FROM calls
      WHERE engine_owner = $1 AND ended_at IS NULL
        AND (hangup_requested_at IS NOT NULL OR (state = 'connected' AND hold_requested IS NOT NULL))`,
    [engineOwner],
  );
  return result.rows.map(({ id, hangup, hold }): CallCommand =>
    hangup ? { action: 'hangup', callId: id } : { action: 'hold', callId: id, hold: hold === true },
  );
}
