/**
 * Operations 50-52 and 54: calls (docs/calls.md; hold: docs/contact-center.md). Calls are written by the engine
 * (core/calls/calls.ts); the API lists them, shows one with its legs, and asks the engine that holds a call's media
 * to hang it up or hold it: the command is recorded on the call and announced on `callControlChannel` in the
 * request's transaction. A hangup's answer then waits, with that transaction committed and no connection held, until
 * the engine has ended the call (or 5 seconds, marked `hangupRequested`).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { ApiError, notFound } from '../../core/errors.ts';
import { type CallRow, callStates, listCalls, callLegs, type LegRow, workspaceCall } from '../../core/calls/calls.ts';
import { CallEndings } from '../call-endings.ts';
import { Call, callJson, commandCall } from '../call-operations.ts';
import type { Answer } from '../idempotency.ts';
import { ListQuery, listPage, pageOf } from '../pagination.ts';
import { defineOperation, requireWorkspace, type Services } from '../route.ts';
import { DateTime, IdParams, NoFields, Uuid } from '../schemas.ts';

/** How long a hangup waits for the owning engine to end the call. */
const hangupWaitMillis = 5_000;

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

const HoldBody = Type.Object(
  { hold: Type.Boolean({ description: 'true: the caller hears hold music and the party silence; false: resume' }) },
  { additionalProperties: false },
);

const HoldAnswer = Type.Object({
  ...Call.properties,
  hold: Type.Boolean({ description: 'What was asked: the engine holding the call acts on it at once' }),
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

/**
 * The answer of a hangup once recorded: the call as soon as it has ended, or as it is after the wait, marked
 * `hangupRequested`. Runs after the request committed, holding a connection only for each short read.
 */
async function hangupOutcome(
  services: Services,
  endings: CallEndings,
  recorded: CallRow,
  wait: { started: number; until: number },
  request: FastifyRequest,
): Promise<Answer> {
  const watch = endings.watch(recorded.id);
  try {
    for (;;) {
      const row = (await workspaceCall(services.pool, recorded.id, recorded.workspace_id)) ?? recorded;
      if (row.ended_at !== null) return { status: 200, body: callJson(row) };
      const left = wait.until - Date.now();
      if (left <= 0) {
        request.log.warn(
          { callId: row.id, engineOwner: row.engine_owner, waitedMs: Date.now() - wait.started },
          'hangup: the engine did not end the call in time; answering with hangupRequested',
        );
        return { status: 200, body: { ...callJson(row), hangupRequested: true } };
      }
      await watch.next(left);
    }
  } finally {
    watch.stop();
  }
}

export function callRoutes(app: FastifyInstance, services: Services) {
  const hangupWait = services.hangupWaitMs ?? hangupWaitMillis;
  // Waiting hangups hear that their call ended through one listening connection for the process.
  const endings = new CallEndings(services.databaseUrl, (message) => app.log.warn(message));
  app.addHook('onReady', () => endings.start());
  app.addHook('onClose', () => endings.close());
  // A user token (U) sees all of its workspace's calls, as keys and member tokens do: no call belongs to one
  // application user yet (calls come from carriers into routing plans), so there is nothing narrower to show.
  defineOperation(app, services, 'listCalls', {
    schemas: { querystring: CallListQuery, response: { 200: pageOf(Call) } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { query } = context;
      let since: Date | undefined;
      if (query.since !== undefined) {
        since = new Date(query.since);
        // The date-time format lets through a leap second (23:59:60) or an hour-only offset (+05) that Date cannot read.
        if (Number.isNaN(since.getTime())) {
          throw new ApiError('invalid_request', 'query.since must be an instant such as 2026-03-08T09:30:00Z');
        }
      }
      const filters = {
        ...(query.state !== undefined ? { state: query.state } : {}),
        ...(query.phoneNumberId !== undefined ? { phoneNumberId: query.phoneNumberId } : {}),
        ...(since !== undefined ? { since } : {}),
      };
      const page = await listPage({
        key: services.keys.cursors,
        list: 'calls',
        owner: workspace.id,
        query,
        read: (window) => listCalls(context.db, workspace.id, filters, window),
      });
      return { status: 200, body: { data: page.rows.map(callJson), nextCursor: page.nextCursor } };
    },
  });

  defineOperation(app, services, 'getCall', {
    schemas: { params: IdParams, response: { 200: CallWithLegs } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const row = await workspaceCall(context.db, context.params.id, workspace.id);
      if (row === undefined) throw notFound('call');
      const legs = await callLegs(context.db, row.id);
      return { status: 200, body: { ...callJson(row), legs: legs.map(legJson) } };
    },
  });

  defineOperation(app, services, 'hangupCall', {
    schemas: { params: IdParams, body: NoFields, response: { 200: HangupAnswer } },
    optionalBody: true,
    handler: async (context) => {
      const started = Date.now();
      const row = await commandCall(context, { action: 'hangup', callId: context.params.id });
      // Stored as the answer until the wait below finishes (docs/calls.md: a retry meanwhile is 409
      // idempotency_in_progress, and a retry after a crash gets this one).
      return {
        status: 200,
        body: { ...callJson(row), hangupRequested: true },
        finishLater: {
          withinMs: hangupWait,
          finish: () =>
            hangupOutcome(services, endings, row, { started, until: started + hangupWait }, context.request),
        },
      };
    },
  });

  defineOperation(app, services, 'holdCall', {
    schemas: { params: IdParams, body: HoldBody, response: { 200: HoldAnswer } },
    handler: async (context) => {
      const { hold } = context.body;
      // A connected call only: for another, the 409 rolls the command back.
      const row = await commandCall(context, { action: 'hold', callId: context.params.id, hold });
      if (row.state !== 'connected') {
        throw new ApiError('call_conflict', `the call is ${row.state}: only a connected call can be held or resumed`);
      }
      return { status: 200, body: { ...callJson(row), hold } };
    },
  });
}
