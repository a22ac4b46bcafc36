/**
 * Operation 53: transfer a connected call (docs/contact-center.md "Transfer"). The request is a typed call command
 * (core/calls/commands.ts) recorded on the call and announced in the request's transaction; the engine holding the
 * call acts on it and writes `call.transferred` (a blind transfer as the caller moves, a warm one at completion).
 *
 * `{ target, warm }` starts a transfer: `target` is exactly one of `{ e164 }` (dialled out through the called
 * number's carrier), `{ queueId }` (the caller waits in that queue; blind only) or `{ memberId }` (their devices
 * ring). `{ action: "complete" | "cancel" }` ends the warm transfer being consulted.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { TransferTarget as Target } from '../../core/calls/transfers.ts';
import { TransferTarget } from '../../core/calls/transfers.ts';
import { dialOutRefusal } from '../../core/calls/dial-policy.ts';
import { ApiError } from '../../core/errors.ts';
import { unknownMembers } from '../../core/identity/members.ts';
import { queueById } from '../../core/queues/queues.ts';
import { actorOf } from '../auth.ts';
import { Call, callJson, commandCall } from '../call-operations.ts';
import { defineOperation, type HandlerContext, requireWorkspace, type Services } from '../route.ts';
import { IdParams } from '../schemas.ts';

/**
 * One object (code generators take it better than a union): `target` (with `warm`) starts a transfer, `action` ends
 * the warm one being consulted; exactly one of the two (checked by the handler, 400 otherwise).
 */
const TransferBody = Type.Object(
  {
    target: Type.Optional(TransferTarget),
    warm: Type.Optional(
      Type.Boolean({
        description:
          'false (default): the caller is moved at once. true: the agent talks to the target first while the caller ' +
          'holds, then completes or cancels (not for a queue)',
      }),
    ),
    action: Type.Optional(
      Type.Union([Type.Literal('complete'), Type.Literal('cancel')], {
        description: 'Ends the warm transfer being consulted: complete (the caller goes to the target) or cancel',
      }),
    ),
  },
  { additionalProperties: false },
);

const TransferAnswer = Type.Object({
  ...Call.properties,
  transfer: Type.Object({
    target: Type.Optional(TransferTarget),
    warm: Type.Optional(Type.Boolean()),
    action: Type.Optional(Type.String()),
    actor: Type.Union([Type.String(), Type.Null()]),
  }),
});

/**
 * 404 `target_not_found` for a member or queue the workspace does not have; a number is checked as a plan's numbers
 * are (400 `invalid_destination`, 403 `destination_blocked`, 422 `emergency_unavailable`).
 */
async function checkTarget(context: HandlerContext, target: Target): Promise<void> {
  const workspace = requireWorkspace(context);
  if ('memberId' in target) {
    const unknown = await unknownMembers(context.db, workspace.id, [target.memberId.toLowerCase()]);
    if (unknown.length > 0) throw new ApiError('target_not_found', 'the workspace has no such member');
  } else if ('e164' in target) {
    // The dial-out policy every call the service places goes through (the engine asks it again as it dials).
    const refusal = await dialOutRefusal(context.db, { workspaceId: workspace.id, kind: 'transfer', to: target.e164 });
    if (refusal !== undefined) throw new ApiError(refusal.code, `target.e164: ${refusal.message}`);
  } else if ('queueId' in target) {
    // queueById answers a queue the workspace lacks with 404 not_found; any other failure is not a missing target.
    await queueById(context.db, workspace.id, target.queueId).catch((error: unknown) => {
      if (error instanceof ApiError && error.code === 'not_found') {
        throw new ApiError('target_not_found', 'the workspace has no such queue');
      }
      throw error;
    });
  }
}

function lowerIds(target: Target): Target {
  if ('memberId' in target) return { memberId: target.memberId.toLowerCase() };
  if ('queueId' in target) return { queueId: target.queueId.toLowerCase() };
  return target;
}

export function callTransferRoutes(app: FastifyInstance, services: Services) {
  defineOperation(app, services, 'transferCall', {
    schemas: { params: IdParams, body: TransferBody, response: { 200: TransferAnswer } },
    handler: async (context) => {
      const body = context.body;
      const callId = context.params.id;
      const actor = actorOf(context.principal);
      const malformed = () => new ApiError('invalid_request', 'body must have either target (and warm) or action');
      if (body.action !== undefined) {
        if (body.target !== undefined || body.warm !== undefined) throw malformed();
        const row = await commandCall(context, {
          action: 'finish_transfer',
          callId,
          id: randomUUID(),
          finish: body.action,
          actor,
        });
        if (row.state !== 'connected' || row.consulting !== true) {
          throw new ApiError('call_conflict', 'the call has no warm transfer being consulted');
        }
        return { status: 200, body: { ...callJson(row), transfer: { action: body.action, actor } } };
      }
      if (body.target === undefined) throw malformed();
      const target = lowerIds(body.target);
      const warm = body.warm ?? false;
      if (warm && 'queueId' in target) {
        throw new ApiError('invalid_request', 'a transfer to a queue is blind: body.warm must be false');
      }
      // The call first (another workspace's call is 404 whatever the target); a refusal after it rolls the recorded
      // command and its announcement back with the request.
      const row = await commandCall(context, { action: 'transfer', callId, id: randomUUID(), target, warm, actor });
      await checkTarget(context, target);
      if (row.state !== 'connected') {
        throw new ApiError('call_conflict', `the call is ${row.state}: only a connected call can be transferred`);
      }
      if (row.consulting === true) {
        throw new ApiError('call_conflict', 'a warm transfer of the call is being consulted: complete or cancel it');
      }
      return { status: 200, body: { ...callJson(row), transfer: { target, warm, actor } } };
    },
  });
}
