/**
 * Operations 50-52: calls (docs/calls.md). Calls are written by the engine (core/calls/calls.ts); the API lists
 * them, shows one with its legs, and asks the engine that holds a call's media to hang it up: a notice on
 * `callControlChannel`, then the answer once the engine has ended the call (or after 5 seconds, marked
 * `hangupRequested`).
 */
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { Type } from 'typebox';
import { announce, callControlChannel } from '../../core/change-notices.ts';
import type { Queryable } from '../../core/database.ts';
import { ApiError, notFound } from '../../core/errors.ts';
import { CallObject } from '../../core/events/types.ts';
import { type CallRow, type CallState, callColumns, callObject } from '../../core/calls/calls.ts';
import { ListQuery, listPage, pageOf } from '../pagination.ts';
import { defineOperation, requireWorkspace, type Services } from '../route.ts';
import { DateTime, IdParams, Uuid } from '../schemas.ts';

/** The channel the engines LISTEN on for call control: `{ callId, action: 'hangup' }` as JSON. */

/** How long a hangup waits for the owning engine to end the call, and how often it looks. */
const hangupWaitMillis = 5_000;
const hangupPollMillis = 50;

const callStates = [
  'initiated',
  'routing',
  'offering',
  'connected',
  'voicemail',
  'ended',
] as const satisfies readonly CallState[];

export const Call = Type.Object({
  ...CallObject.properties,
  workspaceId: Uuid,
  routingPlanId: Type.Union([Uuid, Type.Null()]),
  routingPlanVersion: Type.Union([Type.Integer(), Type.Null()], { description: 'The plan version the call runs' }),
  connectedAt: Type.Union([DateTime, Type.Null()], { description: 'When a second leg was first bridged' }),
  stepsTaken: Type.Array(Type.String(), {
    description: 'The plan steps the call went through, in order (filled in when the plan run ends)',
  }),
});

const Leg = Type.Object({
  id: Uuid,
  role: Type.String({ description: '`caller` (the inbound leg) or `forward` (a dial-out of a forward step)' }),
  remote: Type.String(),
  state: Type.String(),
  startedAt: DateTime,
  answeredAt: Type.Union([DateTime, Type.Null()]),
  endedAt: Type.Union([DateTime, Type.Null()]),
  packetsIn: Type.Integer({ description: 'RTP packets received from this leg (counted when it ends)' }),
  packetsOut: Type.Integer({ description: 'RTP packets sent to this leg (counted when it ends)' }),
});

const CallWithLegs = Type.Object({ ...Call.properties, legs: Type.Array(Leg, { description: 'Oldest first' }) });

const HangupAnswer = Type.Object({
  ...Call.properties,
  hangupRequested: Type.Optional(
    Type.Boolean({
      description: 'Present (true) when the engine had not ended the call within 5 seconds; it is still asked to',
    }),
  ),
});

const CallListQuery = Type.Object(
  {
    ...ListQuery.properties,
    state: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description: `Only calls in this state: ${callStates.join(', ')} (states may grow: any other value lists none)`,
      }),
    ),
    phoneNumberId: Type.Optional(Uuid),
    since: Type.Optional(Type.String({ format: 'date-time', description: 'Only calls started at or after this' })),
  },
  { additionalProperties: false },
);

interface LegRow {
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

function callJson(row: CallRow) {
  return {
    ...callObject(row),
    workspaceId: row.workspace_id,
    routingPlanId: row.routing_plan_id,
    routingPlanVersion: row.routing_plan_version,
    connectedAt: row.connected_at?.toISOString() ?? null,
    stepsTaken: row.steps_taken,
  };
}

function legJson(row: LegRow) {
  return {
    id: row.id,
    role: row.role,
    remote: row.remote,
    state: row.state,
    startedAt: row.started_at.toISOString(),
    answeredAt: row.answered_at?.toISOString() ?? null,
    endedAt: row.ended_at?.toISOString() ?? null,
    packetsIn: Number(row.packets_in),
    packetsOut: Number(row.packets_out),
  };
}

async function workspaceCall(db: Queryable, id: string, workspaceId: string): Promise<CallRow | undefined> {
  const result = await db.query<CallRow>(
    `SELECT ${callColumns} FROM calls c JOIN workspaces w ON w.id = c.workspace_id
      WHERE c.id = $1 AND c.workspace_id = $2`,
    [id, workspaceId],
  );
  return result.rows[0];
}

/** A pool connection, waited for no longer than `ms` (the database may be unreachable: answer 503, not hang). */
async function poolClient(pool: pg.Pool, ms: number): Promise<pg.PoolClient> {
  const pending = pool.connect();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new ApiError('unavailable', 'no database connection is free to reach the call engine; retry')),
      ms,
    );
  });
  try {
    return await Promise.race([pending, timeout]);
  } catch (error) {
    // The connection may still come: hand it straight back.
    pending.then((client) => client.release()).catch(() => {});
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function callRoutes(app: FastifyInstance, services: Services) {
  // Hangup notices go out on connections of their own: under load every connection of the main pool can be held by
  // request transactions (each hangup holds one while it waits for the engine), and the notice must not queue
  // behind them.
  const control = new pg.Pool({
    connectionString: services.databaseUrl,
    max: 2,
    application_name: 'switchboard-call-control',
  });
  control.on('error', (error) => app.log.warn({ err: error }, 'call control connection lost'));
  app.addHook('onClose', () => control.end());
  // A user token (U) sees all of its workspace's calls, as keys and member tokens do: no call belongs to one
  // application user yet (calls come from carriers into routing plans), so there is nothing narrower to show.
  defineOperation(app, services, 'listCalls', {
    schemas: { querystring: CallListQuery, response: { 200: pageOf(Call) } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { query } = context;
      const params: unknown[] = [workspace.id];
      const where = ['workspace_id = $1'];
      const add = (condition: (n: number) => string, value: unknown) => {
        params.push(value);
        where.push(condition(params.length));
      };
      if (query.state !== undefined) add((n) => `state = $${n}`, query.state);
      if (query.phoneNumberId !== undefined) add((n) => `phone_number_id = $${n}::uuid`, query.phoneNumberId);
      if (query.since !== undefined) {
        const since = new Date(query.since as string);
        // The date-time format lets through a leap second (23:59:60) or an hour-only offset (+05) that Date cannot read.
        if (Number.isNaN(since.getTime())) {
          throw new ApiError('invalid_request', 'query.since must be an instant such as 2026-03-08T09:30:00Z');
        }
        add((n) => `started_at >= $${n}::timestamptz`, since);
      }
      const page = await listPage<CallRow & { cursor_ts: string }>({
        db: context.db,
        key: services.keys.cursors,
        list: 'calls',
        owner: workspace.id,
        // A subquery PostgreSQL flattens: the outer names are the call's own (calls_page serves the order).
        select: `SELECT * FROM (SELECT ${callColumns}, c.created_at, c.created_at::text AS cursor_ts
                                  FROM calls c JOIN workspaces w ON w.id = c.workspace_id) AS listed`,
        where: where.join(' AND '),
        params,
        query,
      });
      return { status: 200, body: { data: page.rows.map(callJson), nextCursor: page.nextCursor } };
    },
  });

  defineOperation(app, services, 'getCall', {
    schemas: { params: IdParams, response: { 200: CallWithLegs } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const row = await workspaceCall(context.db, context.params.id as string, workspace.id);
      if (row === undefined) throw notFound('call');
      const legs = await context.db.query<LegRow>(
        `SELECT id, role, remote, state, started_at, answered_at, ended_at, packets_in, packets_out FROM call_legs
          WHERE call_id = $1 ORDER BY started_at, id`,
        [row.id],
      );
      return { status: 200, body: { ...callJson(row), legs: legs.rows.map(legJson) } };
    },
  });

  defineOperation(app, services, 'hangupCall', {
    schemas: {
      params: IdParams,
      body: Type.Object({}, { additionalProperties: false }),
      response: { 200: HangupAnswer },
    },
    optionalBody: true,
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      // `db` is the idempotent transaction: its answer is stored when it commits, after this returns. The call row
      // is only read here, never locked, so the engine's own transaction that ends the call is not held up by it.
      const { db, request } = context;
      const found = await workspaceCall(db, context.params.id as string, workspace.id);
      if (found === undefined) throw notFound('call');
      if (found.ended_at !== null) throw new ApiError('call_ended', 'the call has already ended');

      // Only the engine that holds the call's media can end it. The notice goes out on a pool connection of its
      // own (autocommit): sent in the transaction, it would be delivered only at commit, after the wait below.
      const started = Date.now();
      const client = await poolClient(control, hangupWaitMillis);
      try {
        // The request is recorded first: an engine that missed the notice (its listener reconnecting) finds it.
        await client.query(
          'UPDATE calls SET hangup_requested_at = clock_timestamp() WHERE id = $1 AND ended_at IS NULL',
          [found.id],
        );
        await announce(client, callControlChannel, JSON.stringify({ callId: found.id, action: 'hangup' }));
      } finally {
        client.release();
      }

      // The transaction is READ COMMITTED: each read sees the engine's commit as soon as it is made.
      let row = found;
      while (row.ended_at === null && Date.now() - started < hangupWaitMillis) {
        await sleep(hangupPollMillis);
        row = (await workspaceCall(db, found.id, workspace.id)) ?? row;
      }
      if (row.ended_at !== null) return { status: 200, body: callJson(row) };
      request.log.warn(
        { callId: row.id, engineOwner: row.engine_owner, waitedMs: Date.now() - started },
        'hangup: the engine did not end the call in time; answering with hangupRequested',
      );
      return { status: 200, body: { ...callJson(row), hangupRequested: true } };
    },
  });
}
