/**
 * Commands to a running call (docs/architecture.md, "Call commands"; docs/calls.md). The API records a command on the
 * call and announces it on `callControlChannel` in the same transaction; the engine that owns the call parses the
 * announcement against `CallCommand` (anything else is dropped) and dispatches it to the call
 * (engine/calls/commands.ts). On reconnecting, and every 2 s, the engine also reads the commands recorded for its
 * calls (`pendingCallCommands`), so a missed announcement is not lost.
 *
 * Today the commands are `hangup`, `hold`, `transfer`, `finish_transfer` and `supervise`. A new one (recording) is a
 * member of the union and its schema here, how it is recorded on the call (`recordCallCommand`) and read back
 * (`pendingCallCommands`), and its case in the engine's dispatch (the compiler lists the switch that lacks it).
 *
 * This module is the one writer of the call's command columns (`hangup_requested_at`, `hold_requested`,
 * `transfer_request`, `transfer_consulting`, `supervise_requests`): the API's records, and the engine's side of them
 * (a request taken up once, a warm transfer's consultation, `call.transferred`). The rest of the call is calls.ts's.
 */
import { type Static, Type } from 'typebox';
import { Compile } from 'typebox/compile';
import { announce, callControlChannel, parseNotice } from '../change-notices.ts';
import type pg from 'pg';
import { inTransaction, type Queryable } from '../database.ts';
import { appendEvent } from '../events/outbox.ts';
import { callColumns, callEnvelope, callObject, type CallRow, readCall } from './calls.ts';
import { SuperviseMode } from './supervision.ts';
import { type Transfer, TransferTarget } from './transfers.ts';

/** End the call from our side (`POST /calls/{id}/hangup`): recorded as `calls.hangup_requested_at`. */
export const HangupCommand = Type.Object({ action: Type.Literal('hangup'), callId: Type.String() });
export type HangupCommand = Static<typeof HangupCommand>;

/**
 * Hold (`hold: true`) or resume a connected call (`POST /calls/{id}/hold`): recorded as `calls.hold_requested`, which
 * a new connection of the call clears. Acting on it twice is acting on it once.
 */
export const HoldCommand = Type.Object({ action: Type.Literal('hold'), callId: Type.String(), hold: Type.Boolean() });
export type HoldCommand = Static<typeof HoldCommand>;

/**
 * A transfer of a connected call (`POST /calls/{id}/transfer`, docs/contact-center.md "Transfer"): recorded as
 * `calls.transfer_request` (with its `id`, so that the engine takes it up once) unless a warm transfer is being
 * consulted. `actor` is who asked (`application`, `member:<id>`, `user:<id>`).
 */
export const TransferCommand = Type.Object({
  action: Type.Literal('transfer'),
  callId: Type.String(),
  id: Type.String(),
  target: TransferTarget,
  warm: Type.Boolean(),
  actor: Type.Union([Type.String(), Type.Null()]),
});
export type TransferCommand = Static<typeof TransferCommand>;

/** The end of a warm transfer being consulted: `complete` (the caller goes to the target) or `cancel`. */
export const FinishTransferCommand = Type.Object({
  action: Type.Literal('finish_transfer'),
  callId: Type.String(),
  id: Type.String(),
  finish: Type.Union([Type.Literal('complete'), Type.Literal('cancel')]),
  actor: Type.Union([Type.String(), Type.Null()]),
});
export type FinishTransferCommand = Static<typeof FinishTransferCommand>;

/**
 * A supervisor's leg on a connected call, or its new mode (`POST /calls/{id}/supervise`): recorded in
 * `calls.supervise_requests` under the supervisor's member id (with its `id`, taken up once by the engine).
 */
export const SuperviseCommand = Type.Object({
  action: Type.Literal('supervise'),
  callId: Type.String(),
  id: Type.String(),
  memberId: Type.String(),
  mode: SuperviseMode,
  actor: Type.Union([Type.String(), Type.Null()]),
});
export type SuperviseCommand = Static<typeof SuperviseCommand>;

export const CallCommand = Type.Union([
  HangupCommand,
  HoldCommand,
  TransferCommand,
  FinishTransferCommand,
  SuperviseCommand,
]);
export type CallCommand = Static<typeof CallCommand>;

const callCommand = Compile(CallCommand);

/** An announcement's payload as a command; undefined for anything that is not one (unreadable, unknown action). */
export function parseCallCommand(payload: string): CallCommand | undefined {
  return parseNotice(payload, callCommand);
}

/** The call a command was recorded on; `consulting` (transfers only): a warm transfer is being consulted. */
export type CommandedCall = CallRow & { consulting?: boolean };

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
): Promise<CommandedCall | undefined> {
  let row: CommandedCall | undefined;
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
    case 'transfer':
    case 'finish_transfer': {
      // A new transfer only while none is consulted, its end only while one is; the caller refuses the others.
      const { callId, action, ...request } = command;
      const wanted = action === 'transfer' ? 'IS NULL' : 'IS NOT NULL';
      const result = await db.query<CommandedCall>(
        `UPDATE calls c SET transfer_request = CASE WHEN c.state = 'connected' AND c.transfer_consulting ${wanted}
                                                    THEN $3::jsonb ELSE c.transfer_request END
           FROM workspaces w
          WHERE c.id = $1 AND c.workspace_id = $2 AND w.id = c.workspace_id
      RETURNING ${callColumns}, c.transfer_consulting IS NOT NULL AS consulting`,
        [callId, workspaceId, JSON.stringify({ action, ...request })],
      );
      row = result.rows[0];
      if (row === undefined || row.ended_at !== null) return row;
      if (row.state !== 'connected' || row.consulting !== (action === 'finish_transfer')) return row;
      break;
    }
    case 'supervise': {
      // Only a connected call is recorded (one request per supervisor, the newest kept); the caller refuses others.
      const { callId, memberId, id, mode, actor } = command;
      const result = await db.query<CallRow>(
        `UPDATE calls c SET supervise_requests = CASE WHEN c.state = 'connected'
                  THEN coalesce(c.supervise_requests, '{}'::jsonb) || jsonb_build_object($3::text, $4::jsonb)
                  ELSE c.supervise_requests END
           FROM workspaces w
          WHERE c.id = $1 AND c.workspace_id = $2 AND w.id = c.workspace_id RETURNING ${callColumns}`,
        [callId, workspaceId, memberId, JSON.stringify({ id, mode, actor })],
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
  const result = await db.query<{
    id: string;
    hangup: boolean;
    hold: boolean | null;
    transfer: unknown;
    supervise: Record<string, object> | null;
  }>(
    `SELECT id, hangup_requested_at IS NOT NULL AS hangup, CASE WHEN state = 'connected' THEN hold_requested END AS hold,
            CASE WHEN state = 'connected' THEN transfer_request END AS transfer,
            CASE WHEN state = 'connected' THEN supervise_requests END AS supervise
       FROM calls
      WHERE engine_owner = $1 AND ended_at IS NULL
        AND (hangup_requested_at IS NOT NULL
             OR (state = 'connected' AND (hold_requested IS NOT NULL OR transfer_request IS NOT NULL
                                          OR supervise_requests IS NOT NULL)))`,
    [engineOwner],
  );
  return result.rows.flatMap(({ id, hangup, hold, transfer, supervise }): CallCommand[] => {
    if (hangup) return [{ action: 'hangup', callId: id }];
    const commands: CallCommand[] = [];
    if (hold !== null) commands.push({ action: 'hold', callId: id, hold });
    // A request written by this code is a command once its call id is added; anything else is dropped.
    const recorded = [
      ...(transfer === null ? [] : [{ ...(transfer as object) }]),
      ...Object.entries(supervise ?? {}).map(([memberId, request]) => ({ action: 'supervise', memberId, ...request })),
    ].map((request) => ({ ...request, callId: id }));
    for (const command of recorded) if (callCommand.Check(command)) commands.push(command);
    return commands;
  });
}

/**
 * The engine takes up the recorded request `requestId` of the call: true once (it is cleared), false when it is gone
 * (taken already, replaced by a newer one, or cleared by a new connection).
 */
export async function takeTransferRequest(pool: pg.Pool, callId: string, requestId: string): Promise<boolean> {
  const result = await pool.query(
    `UPDATE calls SET transfer_request = NULL WHERE id = $1 AND transfer_request->>'id' = $2 AND ended_at IS NULL`,
    [callId, requestId],
  );
  return result.rowCount === 1;
}

/** A warm transfer's consultation starts (`transfer`) or ends (null). */
export async function setConsulting(pool: pg.Pool, callId: string, transfer: Transfer | null): Promise<void> {
  await pool.query('UPDATE calls SET transfer_consulting = $2 WHERE id = $1', [
    callId,
    transfer === null ? null : JSON.stringify(transfer),
  ]);
}

/**
 * Writes `call.transferred` (a blind transfer as the caller is moved, a warm one at completion) and clears the
 * consultation; false when the call has ended.
 */
export async function recordTransferred(pool: pg.Pool, callId: string, transfer: Transfer): Promise<boolean> {
  return inTransaction(pool, async (db) => {
    const current = await readCall(db, callId, true);
    if (current === undefined || current.ended_at !== null) return false;
    await db.query('UPDATE calls SET transfer_consulting = NULL WHERE id = $1', [callId]);
    await appendEvent(db, {
      type: 'call.transferred',
      ...callEnvelope(current),
      fields: { callId, call: callObject(current), transfer },
    });
    return true;
  });
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
