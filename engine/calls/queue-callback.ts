/**
 * Whether a queue's callback may dial the caller (queueing.ts): the one dial-out policy decides
 * (core/calls/dial-policy.ts), asked when the caller enters (an offer only to a number that passes) and again when
 * the entry reaches an agent (the workspace's policy may have changed meanwhile).
 */
import { dialOutRefusal } from '../../core/calls/dial-policy.ts';
import type { QueueCall } from './control.ts';
import type { CallServices } from './services.ts';

/** Whether the policy lets a callback dial `number` now; a blocked number (not a withheld one) is logged. */
export async function callbackAllowed(services: CallServices, call: QueueCall, number: string): Promise<boolean> {
  const refusal = await dialOutRefusal(services.pool, { workspaceId: call.workspaceId, kind: 'callback', to: number });
  if (refusal !== undefined && refusal.code !== 'invalid_destination') {
    services.log.info({ callId: call.callId, code: refusal.code }, refusal.message);
  }
  return refusal === undefined;
}
