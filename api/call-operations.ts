/**
 * What the call operations share (api/routes/calls.ts, call-transfers.ts, call-supervision.ts): the call as the API
 * shows it, and the recording of a call command in the request's transaction.
 */
import { Type } from 'typebox';
import { type CallRow, callObject } from '../core/calls/calls.ts';
import { type CallCommand, type CommandedCall, recordCallCommand } from '../core/calls/commands.ts';
import { ApiError, notFound } from '../core/errors.ts';
import { CallObject } from '../core/events/types.ts';
import { type HandlerContext, requireWorkspace } from './route.ts';
import { DateTime, Uuid } from './schemas.ts';

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

export function callJson(row: CallRow) {
  return {
    ...callObject(row),
    workspaceId: row.workspace_id,
    routingPlanId: row.routing_plan_id,
    routingPlanVersion: row.routing_plan_version,
    connectedAt: row.connected_at?.toISOString() ?? null,
    stepsTaken: row.steps_taken,
  };
}

/**
 * Records a command on the workspace's call and announces it, in the request's idempotent transaction: recorded, so
 * that an engine that missed the notice (its listener reconnecting) finds it; the owning engine hears it once this
 * commits. A 4xx rolls the request back, so nothing is recorded or announced for a call not found (404) or over
 * (409 `call_ended`).
 */
export async function commandCall(context: HandlerContext, command: CallCommand): Promise<CommandedCall> {
  const row = await recordCallCommand(context.db, requireWorkspace(context).id, command);
  if (row === undefined) throw notFound('call');
  if (row.ended_at !== null) throw new ApiError('call_ended', 'the call has already ended');
  return row;
}
