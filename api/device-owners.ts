/**
 * Whose devices a credential acts on (api/routes/devices.ts, offers.ts): a user or member token its own person's, an
 * application key the whole workspace's.
 */
import { type DeviceOwner, type DeviceRow, deviceById } from '../core/devices/devices.ts';
import { ApiError, notFound } from '../core/errors.ts';
import type { Principal } from './auth.ts';
import { type HandlerContext, requireWorkspace } from './route.ts';
import type { IdParams } from './schemas.ts';

/** The person a token acts for; undefined for an application key (the whole workspace). */
export function ownerOf(principal: Principal): DeviceOwner | undefined {
  const token = principal.token;
  if (token === undefined) return undefined;
  return token.kind === 'member' ? { memberId: token.subjectId } : { userId: token.subjectId };
}

export function tokenOwner(principal: Principal): DeviceOwner {
  const owner = ownerOf(principal);
  // The operations calling this take user and member tokens only (api/operations.ts).
  if (owner === undefined) throw new ApiError('forbidden', 'a device is registered with a user or member token');
  return owner;
}

/** The token's own device named in the path (another person's is 404); with `lock`, locked until commit. */
export async function ownDevice(
  context: HandlerContext<{ params: typeof IdParams }>,
  lock = false,
): Promise<DeviceRow> {
  const workspace = requireWorkspace(context);
  const owner = tokenOwner(context.principal);
  const device = await deviceById(context.db, workspace.id, owner, context.params.id, lock);
  if (device === undefined) throw notFound('device');
  return device;
}
