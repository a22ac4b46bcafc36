/**
 * Call records (docs/calls.md): every state change is one transaction that writes the call row and its event in the
 * call's stream (`call.started`, `call.answered`, `call.connected`, `call.ended`). The engine process that holds a
 * call's media owns it (`engine_owner`); a restarted engine ends the calls it owned.
 */
import type pg from 'pg';
import { announce, callEndedChannel } from '../change-notices.ts';
import { inTransaction, type Queryable } from '../database.ts';
import { appendEvent } from '../events/outbox.ts';
import type { CallObject } from '../events/types.ts';
import { keysetPage, type PageWindow } from '../rows.ts';

/** A call's states (spec section 3), in the order a call goes through them; `ended` last. */
export const callStates = ['initiated', 'routing', 'queued', 'offering', 'connected', 'voicemail', 'ended'] as const;
export type CallState = (typeof callStates)[number];
/** The states of a call not ended. */
export const liveCallStates = callStates.filter((state) => state !== 'ended') as Exclude<CallState, 'ended'>[];

export interface CallRow {
  id: string;
  application_id: string;
  workspace_id: string;
  external_workspace_id: string;
  direction: string;
  from_number: string;
  to_number: string;
  phone_number_id: string | null;
  routing_plan_id: string | null;
  routing_plan_version: number | null;
  state: CallState;
  started_at: Date;
  answered_at: Date | null;
  connected_at: Date | null;
  ended_at: Date | null;
  end_reason: string | null;
  engine_owner: string;
  sip_call_id: string | null;
  steps_taken: string[];
  /** When the API asked the owning engine to hang up. */
  hangup_requested_at: Date | null;
}

export const callColumns = `c.id, c.application_id, c.workspace_id, w.external_workspace_id, c.direction, c.from_number,
  c.to_number, c.phone_number_id, c.routing_plan_id, c.routing_plan_version, c.state, c.started_at, c.answered_at,
  c.connected_at, c.ended_at, c.end_reason, c.engine_owner, c.sip_call_id, c.steps_taken, c.hangup_requested_at`;

/** The call object of spec section 2. */
export function callObject(row: CallRow): CallObject {
  return {
    id: row.id,
    direction: row.direction,
    from: row.from_number.slice(0, 64) || 'anonymous',
    to: row.to_number.slice(0, 64) || 'unknown',
    phoneNumberId: row.phone_number_id,
    state: row.state,
    startedAt: row.started_at.toISOString(),
    answeredAt: row.answered_at?.toISOString() ?? null,
    endedAt: row.ended_at?.toISOString() ?? null,
    endReason: row.end_reason,
  };
}

/** The call (locked until commit with `lock`), undefined when there is none. */
export async function readCall(db: Queryable, id: string, lock = false): Promise<CallRow | undefined> {
  const result = await db.query<CallRow>(
    `SELECT ${callColumns} FROM calls c JOIN workspaces w ON w.id = c.workspace_id WHERE c.id = $1
     ${lock ? 'FOR UPDATE OF c' : ''}`,
    [id],
  );
  return result.rows[0];
}

/** Updates the call (`set` over $1 = id and the `values` after it) and returns it as readCall would. */
async function updateCall(db: Queryable, callId: string, set: string, values: unknown[]): Promise<CallRow> {
  const result = await db.query<CallRow>(
    `UPDATE calls c SET ${set} FROM workspaces w WHERE c.id = $1 AND w.id = c.workspace_id RETURNING ${callColumns}`,
    [callId, ...values],
  );
  return result.rows[0] as CallRow;
}

/** The envelope of an event in the call's stream. */
export function callEnvelope(row: CallRow) {
  return {
    streamId: row.id,
    applicationId: row.application_id,
    workspaceId: row.workspace_id,
    externalWorkspaceId: row.external_workspace_id,
  };
}

export interface NewCall {
  applicationId: string;
  workspaceId: string;
  direction: 'inbound' | 'outbound';
  from: string;
  to: string;
  phoneNumberId: string | null;
  routingPlanId: string | null;
  routingPlanVersion: number | null;
  engineOwner: string;
  sipCallId: string | null;
}

/** A call at `initiated`, with `call.started`. */
export async function startCall(pool: pg.Pool, input: NewCall): Promise<CallRow> {
  return inTransaction(pool, async (db) => {
    const inserted = await db.query<CallRow>(
      `WITH c AS (
         INSERT INTO calls (application_id, workspace_id, direction, from_number, to_number, phone_number_id,
                            routing_plan_id, routing_plan_version, state, engine_owner, sip_call_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'initiated', $9, $10) RETURNING *)
       SELECT ${callColumns} FROM c JOIN workspaces w ON w.id = c.workspace_id`,
      [
        input.applicationId,
        input.workspaceId,
        input.direction,
        input.from,
        input.to,
        input.phoneNumberId,
        input.routingPlanId,
        input.routingPlanVersion,
        input.engineOwner,
        input.sipCallId,
      ],
    );
    const row = inserted.rows[0] as CallRow;
    await appendEvent(db, {
      type: 'call.started',
      ...callEnvelope(row),
      fields: { callId: row.id, call: callObject(row) },
    });
    return row;
  });
}

/** The leg of `call.connected`: whose it is when a person's device answered. */
export interface ConnectedLeg {
  id: string;
  role: string;
  memberId?: string | null;
  externalUserId?: string | null;
}

/** The `ring` of `call.ringing` (spec section 6): one round of a ring step. */
export interface RingFields {
  ringSeq: number;
  memberIds: string[];
  externalUserIds: string[];
  /** The round's first offer, or null when it offered none. */
  offerId: string | null;
  expiresAt: Date;
}

/**
 * Moves a live call to `state`. `answered` stamps answeredAt and writes `call.answered`; `connectedLeg` stamps
 * connectedAt and writes `call.connected` with the leg; `ringing` writes `call.ringing` with the round. Returns undefined when the call has already ended.
 */
export async function changeState(
  pool: pg.Pool,
  callId: string,
  state: Exclude<CallState, 'ended'>,
  options: {
    answered?: boolean;
    connectedLeg?: ConnectedLeg;
    /** A round of a `ring` step: writes `call.ringing` with these fields. */
    ringing?: RingFields;
  } = {},
): Promise<CallRow | undefined> {
  return inTransaction(pool, async (db) => {
    const current = await readCall(db, callId, true);
    if (current === undefined || current.ended_at !== null) return undefined;
    const row = await updateCall(
      db,
      callId,
      `state = $2,
       answered_at = CASE WHEN $3 THEN coalesce(c.answered_at, clock_timestamp()) ELSE c.answered_at END,
       connected_at = CASE WHEN $4 THEN coalesce(c.connected_at, clock_timestamp()) ELSE c.connected_at END,
       hold_requested = CASE WHEN $4 THEN NULL ELSE c.hold_requested END,
       transfer_request = CASE WHEN $4 THEN NULL ELSE c.transfer_request END`,
      [state, options.answered === true, options.connectedLeg !== undefined],
    );
    if (options.answered === true && current.answered_at === null) {
      await appendEvent(db, { type: 'call.answered', ...callEnvelope(row), fields: { callId, call: callObject(row) } });
    }
    if (options.connectedLeg !== undefined) {
      await appendEvent(db, {
        type: 'call.connected',
        ...callEnvelope(row),
        fields: {
          callId,
          call: callObject(row),
          leg: {
            id: options.connectedLeg.id,
            role: options.connectedLeg.role,
            memberId: options.connectedLeg.memberId ?? null,
            externalUserId: options.connectedLeg.externalUserId ?? null,
          },
        },
      });
    }
    if (options.ringing !== undefined) {
      const { ringSeq, memberIds, externalUserIds, offerId, expiresAt } = options.ringing;
      await appendEvent(db, {
        type: 'call.ringing',
        ...callEnvelope(row),
        fields: {
          callId,
          call: callObject(row),
          ring: { ringSeq, memberIds, externalUserIds, offerId, expiresAt: expiresAt.toISOString() },
        },
      });
    }
    return row;
  });
}

/**
 * Ends a live call with `call.ended`, recording the plan steps it took when given; undefined when it had already
 * ended (nothing is written then).
 */
export async function endCall(
  pool: pg.Pool,
  callId: string,
  reason: string,
  stepsTaken?: readonly string[],
): Promise<CallRow | undefined> {
  return inTransaction(pool, async (db) => endCallIn(db, callId, reason, stepsTaken));
}

async function endCallIn(
  db: Queryable,
  callId: string,
  reason: string,
  stepsTaken: readonly string[] | undefined,
): Promise<CallRow | undefined> {
  const current = await readCall(db, callId, true);
  if (current === undefined || current.ended_at !== null) return undefined;
  const row = await updateCall(
    db,
    callId,
    `state = 'ended', ended_at = clock_timestamp(), end_reason = $2, steps_taken = coalesce($3, c.steps_taken)`,
    [reason.slice(0, 200), stepsTaken === undefined ? null : [...stepsTaken]],
  );
  await db.query(
    `UPDATE call_legs SET state = 'ended', ended_at = clock_timestamp() WHERE call_id = $1 AND ended_at IS NULL`,
    [callId],
  );
  const endedAt = (row.ended_at as Date).getTime();
  await appendEvent(db, {
    type: 'call.ended',
    ...callEnvelope(row),
    fields: {
      callId,
      call: callObject(row),
      previousState: current.state,
      connected: row.connected_at !== null,
      durationSeconds:
        row.answered_at === null ? null : Math.max(0, Math.round((endedAt - row.answered_at.getTime()) / 1000)),
    },
  });
  // The API may be waiting for this end (a hangup it asked for): tell it at commit. Only then, as a NOTIFY
  // serialises committing transactions. The row lock above waits for a hangup request still being committed.
  if (current.hangup_requested_at !== null) await announce(db, callEndedChannel, callId);
  return row;
}

/** At start: the calls a previous run of this engine owned cannot go on (their media is gone); they end. */
export async function endOwnedCalls(pool: pg.Pool, owner: string, reason: string): Promise<number> {
  const live = await pool.query<{ id: string }>('SELECT id FROM calls WHERE engine_owner = $1 AND ended_at IS NULL', [
    owner,
  ]);
  let ended = 0;
  for (const { id } of live.rows) if ((await endCall(pool, id, reason)) !== undefined) ended += 1;
  return ended;
}

export async function addLeg(
  pool: pg.Pool,
  callId: string,
  leg: { role: string; remote: string; sipCallId: string | null },
): Promise<string> {
  const result = await pool.query<{ id: string }>(
    `INSERT INTO call_legs (call_id, role, remote, state, sip_call_id) VALUES ($1, $2, $3, 'ringing', $4) RETURNING id`,
    [callId, leg.role, leg.remote, leg.sipCallId],
  );
  return (result.rows[0] as { id: string }).id;
}

/**
 * A leg's state; a leg that has ended stays ended (an answer noted late does not reopen it), and one answered keeps
 * the time of its first answer.
 */
export async function setLegState(
  pool: pg.Pool,
  legId: string,
  state: 'answered' | 'ended',
  packets?: { in: number; out: number },
): Promise<void> {
  await pool.query(
    `UPDATE call_legs SET state = $2,
            answered_at = CASE WHEN $2 = 'answered' THEN coalesce(answered_at, clock_timestamp()) ELSE answered_at END,
            ended_at = CASE WHEN $2 = 'ended' THEN coalesce(ended_at, clock_timestamp()) ELSE ended_at END,
            packets_in = coalesce($3, packets_in), packets_out = coalesce($4, packets_out)
      WHERE id = $1 AND (ended_at IS NULL OR $2 = 'ended')`,
    [legId, state, packets?.in ?? null, packets?.out ?? null],
  );
}

/** A call of the workspace, as the API shows it. */
export async function workspaceCall(db: Queryable, id: string, workspaceId: string): Promise<CallRow | undefined> {
  const result = await db.query<CallRow>(
    `SELECT ${callColumns} FROM calls c JOIN workspaces w ON w.id = c.workspace_id
      WHERE c.id = $1 AND c.workspace_id = $2`,
    [id, workspaceId],
  );
  return result.rows[0];
}

/**
 * The workspace's calls not ended, counted by state (the live figures, operation 81): one statement on the live
 * calls' index `calls_workspace_live`, whatever the workspace's history; named (prepared once per connection).
 */
export async function liveCallCounts(db: Queryable, workspaceId: string): Promise<{ state: string; calls: number }[]> {
  const result = await db.query<{ state: string; calls: number }>({
    name: 'live-call-counts',
    text: `SELECT state, count(*)::int AS calls FROM calls WHERE workspace_id = $1 AND ended_at IS NULL
            GROUP BY state ORDER BY state`,
    values: [workspaceId],
  });
  return result.rows;
}

export interface LegRow {
  id: string;
  role: string;
  remote: string;
  state: string;
  started_at: Date;
  answered_at: Date | null;
  ended_at: Date | null;
  packets_in: string;
  packets_out: string;
}

/** A call's legs, oldest first. */
export async function callLegs(db: Queryable, callId: string): Promise<LegRow[]> {
  const legs = await db.query<LegRow>(
    `SELECT id, role, remote, state, started_at, answered_at, ended_at, packets_in, packets_out FROM call_legs
      WHERE call_id = $1 ORDER BY started_at, id`,
    [callId],
  );
  return legs.rows;
}

/** What the calls of a workspace are listed by (all given filters apply). */
export interface CallFilters {
  state?: string;
  phoneNumberId?: string;
  /** Started at or after. */
  since?: Date;
}

/** A page of the workspace's calls, newest first, narrowed by `filters` (keyset pages: core/rows.ts). */
export function listCalls(
  db: Queryable,
  workspaceId: string,
  filters: CallFilters,
  window: PageWindow,
): Promise<Array<CallRow & { cursor_ts: string }>> {
  const params: unknown[] = [workspaceId];
  const where = ['workspace_id = $1'];
  const add = (condition: (n: number) => string, value: unknown) => {
    params.push(value);
    where.push(condition(params.length));
  };
  if (filters.state !== undefined) add((n) => `state = $${n}`, filters.state);
  if (filters.phoneNumberId !== undefined) add((n) => `phone_number_id = $${n}::uuid`, filters.phoneNumberId);
  if (filters.since !== undefined) add((n) => `started_at >= $${n}::timestamptz`, filters.since);
  return keysetPage<CallRow & { cursor_ts: string }>(
    db,
    {
      // A subquery PostgreSQL flattens: the outer names are the call's own (calls_page serves the order).
      select: `SELECT * FROM (SELECT ${callColumns}, c.created_at, c.created_at::text AS cursor_ts
                                FROM calls c JOIN workspaces w ON w.id = c.workspace_id) AS listed`,
      where: where.join(' AND '),
      params,
    },
    window,
  );
}
