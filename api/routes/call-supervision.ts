/**
 * Operation 56: supervise a connected call (docs/contact-center.md "Call control"). The request is a typed call
 * command (core/calls/commands.ts) recorded on the call and announced in the request's transaction; the engine
 * holding the call offers the supervisor's devices a leg (`listen`, `whisper` or `barge`), or changes the mode of the
 * supervisor's leg already on the call.
 *
 * Needs `calls:supervise` (api/operations.ts), which `calls:*` never implies. Refused, with nothing recorded: 404
 * `not_found` for a call or a member the workspace does not have, 409 `call_ended`, 409 `call_conflict` for a call
 * not `connected`, 409 `supervisor_unreachable` for a member without a live device free for this call.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { SuperviseMode, supervisorReach } from '../../core/calls/supervision.ts';
import { ApiError } from '../../core/errors.ts';
import { actorOf } from '../auth.ts';
import { Call, callJson, commandCall } from '../call-operations.ts';
import { defineOperation, requireWorkspace, type Services } from '../route.ts';
import { IdParams, Uuid } from '../schemas.ts';

const SuperviseBody = Type.Object(
  {
    memberId: Uuid,
    mode: SuperviseMode,
  },
  { additionalProperties: false },
);

const SuperviseAnswer = Type.Object({
  ...Call.properties,
  supervision: Type.Object({
    memberId: Type.String(),
    mode: SuperviseMode,
    actor: Type.String(),
  }),
});

export function callSupervisionRoutes(app: FastifyInstance, services: Services) {
  defineOperation(app, services, 'superviseCall', {
    schemas: { params: IdParams, body: SuperviseBody, response: { 200: SuperviseAnswer } },
    handler: async (context) => {
      const body = context.body;
      const memberId = body.memberId.toLowerCase();
      // Keys and member tokens only (api/operations.ts).
      const actor = actorOf(context.principal);
      const row = await commandCall(context, {
        action: 'supervise',
        callId: context.params.id,
        id: randomUUID(),
        memberId,
        mode: body.mode,
        actor,
      });
      if (row.state !== 'connected') {
        throw new ApiError('call_conflict', `the call is ${row.state}: only a connected call can be supervised`);
      }
      // Any refusal below rolls the recorded command back with the request.
      const reach = await supervisorReach(context.db, requireWorkspace(context).id, memberId, row.id);
      if (reach === 'unknown') throw new ApiError('not_found', 'the workspace has no such member');
      if (reach === 'unreachable') {
        throw new ApiError(
          'supervisor_unreachable',
          'the supervisor has no live device free to be offered the call on',
        );
      }
      return { status: 200, body: { ...callJson(row), supervision: { memberId, mode: body.mode, actor } } };
    },
  });
}
