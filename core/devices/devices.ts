/**
 * The `devices` table (docs/phones.md): one person's phones, a member's or an application user's, registered,
 * listed and unregistered through operations 59-61, their presence lease renewed by operation 62. The caller locks
 * the owner first (core/identity/users.ts `lockLiveUser`, members.ts `lockMember`), so that registrations of one
 * person are counted one at a time and none slips in beside a user's removal.
 */
import type { Queryable } from '../database.ts';
import { keysetPage, type PageWindow } from '../rows.ts';
import { type BindingJson, bindingsFromJson, liveBindingsJson, type SipBinding } from './sip-bindings.ts';
import { removeSipCredentials } from './sip-credentials.ts';

export type DeviceKind = 'browser' | 'mobile' | 'sip';
export const deviceKinds: readonly DeviceKind[] = ['browser', 'mobile', 'sip'];

/** How long a presence lease lasts from its renewal (the client library renews every 20 s). */
export const presenceLeaseSeconds = 60;

/** Whose phone a device is: exactly one of a member and an application user. */
export type DeviceOwner = { memberId: string } | { userId: string };

export interface DeviceRow {
  id: string;
  workspace_id: string;
  kind: DeviceKind;
  name: string | null;
  client_id: string | null;
  member_id: string | null;
  app_user_id: string | null;
  external_user_id: string | null;
  presence_live: boolean;
  presence_expires_at: Date | null;
  busy_call_id: string | null;
  sip_username: string | null;
  created_at: Date;
  cursor_ts: string;
}

// A `sip` device's presence is its registrations: live while a binding is, until the last one expires.
const presence = 'coalesce(b.expires_at, d.presence_expires_at)';
const columns = `d.id, d.workspace_id, d.kind, d.name, d.client_id, d.member_id, d.app_user_id,
  u.external_user_id, coalesce(${presence} > clock_timestamp(), false) AS presence_live,
  ${presence} AS presence_expires_at, d.busy_call_id, s.username AS sip_username, d.created_at,
  d.created_at::text AS cursor_ts`;
const from = `FROM devices d LEFT JOIN app_users u ON u.id = d.app_user_id
  LEFT JOIN sip_credentials s ON s.device_id = d.id
  LEFT JOIN LATERAL (SELECT max(expires_at) AS expires_at FROM sip_bindings WHERE device_id = d.id) b
    ON d.kind = 'sip'`;

/** The device as the API shows it. */
export function deviceJson(row: DeviceRow) {
  return {
    id: row.id,
    kind: row.kind,
    name: row.name,
    clientId: row.client_id,
    memberId: row.member_id,
    externalUserId: row.external_user_id,
    presence: { live: row.presence_live, expiresAt: row.presence_expires_at?.toISOString() ?? null },
    busy: row.busy_call_id !== null,
    sipUsername: row.sip_username,
    createdAt: row.created_at.toISOString(),
  };
}

function ownerColumn(owner: DeviceOwner): { column: 'member_id' | 'app_user_id'; id: string } {
  return 'memberId' in owner
    ? { column: 'member_id', id: owner.memberId }
    : { column: 'app_user_id', id: owner.userId };
}

/** A registration's lease: a renewal's for browser and mobile devices, none for a sip device (its binding counts). */
const lease = `clock_timestamp() + make_interval(secs => ${presenceLeaseSeconds})`;
const leaseOf = (kindParam: string) => `CASE WHEN ${kindParam} = 'sip' THEN NULL ELSE ${lease} END`;

async function readDevice(db: Queryable, id: string): Promise<DeviceRow> {
  const result = await db.query<DeviceRow>(`SELECT ${columns} ${from} WHERE d.id = $1`, [id]);
  return result.rows[0] as DeviceRow;
}

export interface Registration {
  kind: DeviceKind;
  name: string | null;
  clientId: string | null;
}

export type RegisterOutcome =
  | { outcome: 'created' | 'reregistered'; device: DeviceRow }
  | { outcome: 'busy'; device: DeviceRow }
  | { outcome: 'limit'; allowed: number };

/**
 * Registers the owner's device (the owner locked by the caller, in its transaction). A `clientId` the owner has
 * already re-registers that device (kind and name replaced, lease restarted; its SIP credentials go when it stops
 * being a sip device), unless it is on a call (`busy`). Otherwise a new device, unless the owner has as many
 * as the workspace's `limits.devicesPerUser` already (`limit`).
 */
export async function registerDevice(
  db: Queryable,
  workspaceId: string,
  owner: DeviceOwner,
  registration: Registration,
): Promise<RegisterOutcome> {
  const { column, id: ownerId } = ownerColumn(owner);
  if (registration.clientId !== null) {
    const found = await db.query<{ id: string; busy_call_id: string | null }>(
      `SELECT id, busy_call_id FROM devices WHERE ${column} = $1 AND client_id = $2 FOR UPDATE`,
      [ownerId, registration.clientId],
    );
    const existing = found.rows[0];
    if (existing !== undefined) {
      if (existing.busy_call_id !== null) return { outcome: 'busy', device: await readDevice(db, existing.id) };
      await db.query(
        `UPDATE devices SET kind = $2, name = $3, presence_expires_at = ${leaseOf('$2')},
                updated_at = clock_timestamp() WHERE id = $1`,
        [existing.id, registration.kind, registration.name],
      );
      if (registration.kind !== 'sip') await removeSipCredentials(db, existing.id);
      return { outcome: 'reregistered', device: await readDevice(db, existing.id) };
    }
  }
  // The workspace's limits.devicesPerUser (docs/foundation.md) holds for members and users alike.
  const counted = await db.query<{ count: number; allowed: number }>(
    `SELECT (SELECT count(*)::int FROM devices WHERE ${column} = $1) AS count,
            (SELECT (limits->>'devicesPerUser')::int FROM workspaces WHERE id = $2) AS allowed`,
    [ownerId, workspaceId],
  );
  const { count, allowed } = counted.rows[0] as { count: number; allowed: number };
  if (count >= allowed) return { outcome: 'limit', allowed };
  const inserted = await db.query<{ id: string }>(
    `INSERT INTO devices (workspace_id, ${column}, kind, name, client_id, presence_expires_at)
          VALUES ($1, $2, $3, $4, $5, ${leaseOf('$3')}) RETURNING id`,
    [workspaceId, ownerId, registration.kind, registration.name, registration.clientId],
  );
  return { outcome: 'created', device: await readDevice(db, (inserted.rows[0] as { id: string }).id) };
}

/**
 * The workspace's devices (an application key), or only those of `owner` (a token): one keyset page, newest first.
 */
export function listDevices(
  db: Queryable,
  workspaceId: string,
  owner: DeviceOwner | undefined,
  window: PageWindow,
): Promise<DeviceRow[]> {
  const params: unknown[] = [workspaceId];
  let where = 'workspace_id = $1';
  if (owner !== undefined) {
    const { column, id } = ownerColumn(owner);
    params.push(id);
    where += ` AND ${column} = $2`;
  }
  // The joined rows as one relation, so that the page's conditions name its columns alone (the planner flattens it).
  return keysetPage<DeviceRow>(
    db,
    { select: `SELECT * FROM (SELECT ${columns} ${from}) AS listed`, where, params },
    window,
  );
}

/** One device of the workspace (of `owner` when given), or undefined: another person's device is not found. */
export async function deviceById(
  db: Queryable,
  workspaceId: string,
  owner: DeviceOwner | undefined,
  id: string,
  lock = false,
): Promise<DeviceRow | undefined> {
  const params: unknown[] = [id, workspaceId];
  let where = 'd.id = $1 AND d.workspace_id = $2';
  if (owner !== undefined) {
    const { column, id: ownerId } = ownerColumn(owner);
    params.push(ownerId);
    where += ` AND d.${column} = $3`;
  }
  const result = await db.query<DeviceRow>(
    `SELECT ${columns} ${from} WHERE ${where}${lock ? ' FOR UPDATE OF d' : ''}`,
    params,
  );
  return result.rows[0];
}

/** Unregisters a device (its SIP credentials go with it); the device as it was, or undefined when not found. */
export async function unregisterDevice(
  db: Queryable,
  workspaceId: string,
  owner: DeviceOwner | undefined,
  id: string,
): Promise<DeviceRow | undefined> {
  const device = await deviceById(db, workspaceId, owner, id, true);
  if (device === undefined) return undefined;
  await db.query('DELETE FROM devices WHERE id = $1', [id]);
  return { ...device, presence_live: false };
}

/** Renews a browser or mobile device's presence lease for `presenceLeaseSeconds` from now; the device after. */
export async function renewPresence(db: Queryable, id: string): Promise<DeviceRow> {
  await db.query(`UPDATE devices SET presence_expires_at = ${lease} WHERE id = $1`, [id]);
  return readDevice(db, id);
}

type People = { memberIds: readonly string[]; userIds: readonly string[] };

/**
 * What a `ring` round rings of some people (docs/phones.md, "The ring step"), read in one statement: those of their
 * devices that are not on a call and can ring now.
 */
export interface RingableDevices {
  /** `browser` and `mobile` devices with a live presence lease, offered the call; oldest first. */
  offered: DeviceRow[];
  /**
   * `sip` devices with credentials and at least one binding live at the engine's time, rung by INVITE at each
   * (engine/calls/ring-sip.ts); oldest first, each device's bindings freshest first.
   */
  sip: { device: DeviceRow; bindings: SipBinding[] }[];
}

/**
 * The ringable devices of the given members and users of the workspace (see `RingableDevices`), each binding's
 * expiry judged at `now`, the engine's time. `makeOffers` checks lease and busy again as it offers.
 */
export async function ringableDevicesOf(
  db: Queryable,
  workspaceId: string,
  people: People,
  now: Date,
): Promise<RingableDevices> {
  const result = await db.query<DeviceRow & { bindings: BindingJson[] | null }>(
    `SELECT ${columns}, CASE WHEN d.kind = 'sip' THEN ${liveBindingsJson('d.id', '$4')} END AS bindings ${from}
      WHERE d.workspace_id = $1 AND (d.member_id = ANY ($2::uuid[]) OR d.app_user_id = ANY ($3::uuid[]))
        AND d.busy_call_id IS NULL AND (d.app_user_id IS NULL OR u.removed_at IS NULL)
        AND ((d.kind IN ('browser', 'mobile') AND d.presence_expires_at > clock_timestamp())
             OR (d.kind = 'sip' AND s.username IS NOT NULL))
      ORDER BY d.created_at, d.id`,
    [workspaceId, [...people.memberIds], [...people.userIds], now],
  );
  const ringable: RingableDevices = { offered: [], sip: [] };
  for (const { bindings, ...device } of result.rows) {
    if (device.kind !== 'sip') ringable.offered.push(device);
    else if (bindings !== null && bindings.length > 0)
      ringable.sip.push({ device, bindings: bindingsFromJson(bindings) });
  }
  return ringable;
}

/**
 * An SQL condition, true when the member whose id is the SQL expression `memberId` has a device that can ring now:
 * a `browser` or `mobile` device with a live presence lease, or a `sip` device with a live registration; with
 * `free`, one that is not on a call either, or (`{ orOnCall }`, an SQL expression of a call id) not on another call.
 * For queries of other tables that must ask it (agents, docs/contact-center.md); the devices table stays this module's.
 */
export function memberHasLiveDevice(memberId: string, free: boolean | { orOnCall: string }): string {
  const busy =
    free === false
      ? ''
      : free === true
        ? ' AND ld.busy_call_id IS NULL'
        : ` AND (ld.busy_call_id IS NULL OR ld.busy_call_id = ${free.orOnCall})`;
  return `EXISTS (SELECT 1 FROM devices ld WHERE ld.member_id = ${memberId}${busy} AND (
      (ld.kind IN ('browser', 'mobile') AND ld.presence_expires_at > clock_timestamp())
      OR (ld.kind = 'sip' AND EXISTS (SELECT 1 FROM sip_bindings lb
                                       WHERE lb.device_id = ld.id AND lb.expires_at > clock_timestamp()))))`;
}

/**
 * Marks a device on a call (or free with null). An accepted offer sets it (core/devices/offers.ts); the `ring` step
 * frees it when the answered call's browser leg ends (engine/calls/call.ts).
 */
export async function setDeviceBusy(db: Queryable, id: string, callId: string | null): Promise<void> {
  await db.query('UPDATE devices SET busy_call_id = $2, updated_at = clock_timestamp() WHERE id = $1', [id, callId]);
}

/** Frees devices whose calls ended, in one statement (a queue's agents freed together, core/queues/entries.ts). */
export async function freeDevices(db: Queryable, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await db.query({
    name: 'switchboard-free-devices',
    // Locked in id order: two such statements sharing devices never wait on each other in a circle.
    text: `UPDATE devices d SET busy_call_id = NULL, updated_at = clock_timestamp()
      FROM (SELECT id FROM devices WHERE id = ANY ($1::uuid[]) ORDER BY id FOR UPDATE) locked
     WHERE d.id = locked.id`,
    values: [[...ids]],
  });
}

/**
 * Deletes every device of an application user, with their SIP credentials: called by the user's removal, in its
 * transaction. The number deleted.
 */
export async function removeUserDevices(db: Queryable, userId: string): Promise<number> {
  const result = await db.query('DELETE FROM devices WHERE app_user_id = $1', [userId]);
  return result.rowCount ?? 0;
}
