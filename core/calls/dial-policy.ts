/**
 * The one decision every call the service places goes through (docs/calls.md, Dialling out): a queue's callback, a
 * `ring` step's cell, a `forward`, a transfer to a number, a voice verification code. The engine asks it before each
 * dial (`dialThroughCarrier`, engine/calls/dial-out.ts), so a number that comes from outside (a caller's `From`, a
 * plan published before the workspace's policy changed) is never dialled past it; the API asks it too, to answer a
 * request at once with the same codes.
 *
 * In order: the number must be E.164 with a country calling code (`invalid_destination`); emergency numbers are
 * refused, since no call the service places today is an emergency call (`emergency_unavailable`); then the
 * workspace's destination policy, its allowed and blocked prefixes (`destination_blocked`).
 */
import type { Queryable } from '../database.ts';
import { destinationPolicyOf } from '../identity/workspaces.ts';
import { checkDestination, type DestinationPolicy } from '../routing/destinations.ts';

/** Every kind of call the service places, as its refusals name it. */
export type DialKind = 'callback' | 'cell' | 'forward' | 'transfer' | 'verification';

export interface DialRefusal {
  code: 'invalid_destination' | 'emergency_unavailable' | 'destination_blocked';
  message: string;
}

/** Why `policy` refuses a `kind` call to `to`, or undefined when it may be dialled. */
export function judgeDialOut(kind: DialKind, to: string, policy: DestinationPolicy): DialRefusal | undefined {
  switch (checkDestination(to, policy)) {
    case 'ok':
      return undefined;
    case 'invalid_number':
      return {
        code: 'invalid_destination',
        message: `a ${kind} to ${JSON.stringify(to)}: not a dialable E.164 number`,
      };
    case 'emergency_number':
      return { code: 'emergency_unavailable', message: `a ${kind} to ${to}: emergency numbers are not dialled` };
    case 'destination_blocked':
      return {
        code: 'destination_blocked',
        message: `a ${kind} to ${to}: outside the workspace's destination policy`,
      };
  }
}

/**
 * Why the workspace's policy refuses a `kind` call to `to` now, or undefined when it may be dialled. A workspace that
 * is gone dials nothing.
 */
export async function dialOutRefusal(
  db: Queryable,
  request: { workspaceId: string; kind: DialKind; to: string },
): Promise<DialRefusal | undefined> {
  const policy = await destinationPolicyOf(db, request.workspaceId);
  if (policy === undefined) {
    return { code: 'destination_blocked', message: `a ${request.kind} to ${request.to}: the workspace is gone` };
  }
  return judgeDialOut(request.kind, request.to, policy);
}
