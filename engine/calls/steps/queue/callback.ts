/**
 * A queue's callback (a `queue` step with `offerCallback`, run by wait.ts): every `callbackPromptMs` the caller hears
 * `callbackPrompt`; pressing `callbackKey` makes the entry `callback` (its place kept, the caller's number on it), the
 * caller hears a goodbye and is hung up, and the call waits on without them. When the entry reaches an agent, the
 * agent's devices ring first; once one answers, the caller is dialled through the number's carrier and connected to
 * the agent. A caller who does not answer: the agent is released (no missed offer) and the entry goes back in line;
 * after `callbackAttempts` such tries it leaves `abandoned` and the call ends (`callback_unanswered`). `maxWaitMs`
 * still counts from the call's entering: once it passes (after any offer ringing then), the entry leaves `abandoned`
 * and the call ends (`callback_expired`).
 *
 * Whether a callback may dial the caller: the one dial-out policy decides
 * (core/calls/dial-policy.ts), asked when the caller enters (an offer only to a number that passes) and again when
 * the entry reaches an agent (the workspace's policy may have changed meanwhile); refused by then, the entry leaves
 * and the call ends `callback_refused` before any ring.
 */
import { dialOutRefusal } from '../../../../core/calls/dial-policy.ts';
import type { QueueCall } from '../../control.ts';
import type { CallServices } from '../../services.ts';

/** How often a caller of a queue with `offerCallback` hears the offer. */
export const callbackPromptMs = 30_000;
export const callbackKey = '1';
export const callbackPrompt = 'Press 1 to hang up and be called back. You keep your place in line.';
export const callbackGoodbye = 'Thank you. We will call you back when an agent is free. Goodbye.';
/** How long a callback rings the caller. */
export const callbackRingMs = 30_000;
/** Callbacks the caller did not answer before the entry is given up. */
export const callbackAttempts = 3;

/** Whether the policy lets a callback dial `number` now; a blocked number (not a withheld one) is logged. */
export async function callbackAllowed(services: CallServices, call: QueueCall, number: string): Promise<boolean> {
  const refusal = await dialOutRefusal(services.pool, { workspaceId: call.workspaceId, kind: 'callback', to: number });
  if (refusal !== undefined && refusal.code !== 'invalid_destination') {
    services.log.info({ callId: call.callId, code: refusal.code }, refusal.message);
  }
  return refusal === undefined;
}
