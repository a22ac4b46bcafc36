/**
 * The `app_users` table: an application's users in a workspace, known by the application's own id (operations
 * 11-14). A removed user stays, marked `removed_at`, and is no longer found.
 */
import type { Queryable } from '../database.ts';
import { removeUserDevices } from '../devices/devices.ts';
import { keysetPage, type PageWindow } from '../rows.ts';

export interface UserRow {
  id: string;
  workspace_id: string;
  external_user_id: string;
  display_name: string;
  cell: string | null;
  created_at: Date;
  removed_at: Date | null;
  cursor_ts: string;
}

const columns =
  'id, workspace_id, external_user_id, display_name, cell, created_at, removed_at, created_at::text AS cursor_ts';

/** A new user; undefined when the workspace has a user with this external id already. */
export async function createUser(
  db: Queryable,
  workspaceId: string,
  fields: { externalUserId: string; displayName: string; cell: string | null },
): Promise<UserRow | undefined> {
  const result = await db.query<UserRow>(
    `INSERT INTO app_users (workspace_id, external_user_id, display_name, cell) VALUES ($1, $2, $3, $4)
         ON CONFLICT (workspace_id, external_user_id) WHERE removed_at IS NULL DO NOTHING RETURNING ${columns}`,
    [workspaceId, fields.externalUserId, fields.displayName, fields.cell],
  );
  return result.rows[0];
}

export function listUsers(db: Queryable, workspaceId: string, window: PageWindow): Promise<UserRow[]> {
  return keysetPage<UserRow>(
    db,
    {
      select: `SELECT ${columns} FROM app_users`,
      where: 'workspace_id = $1 AND removed_at IS NULL',
      params: [workspaceId],
    },
    window,
  );
}

export async function userById(db: Queryable, workspaceId: string, id: unknown): Promise<UserRow | undefined> {
  const result = await db.query<UserRow>(
    `SELECT ${columns} FROM app_users WHERE id = $1 AND workspace_id = $2 AND removed_at IS NULL`,
    [id, workspaceId],
  );
  return result.rows[0];
}

/**
 * Marks the user removed and deletes their devices with their SIP credentials (core/devices/devices.ts); `db` is
 * the transaction both happen in. Undefined when the workspace has no such user (or it was removed already).
 */
export async function removeUser(db: Queryable, workspaceId: string, id: unknown): Promise<UserRow | undefined> {
  const result = await db.query<UserRow>(
    `UPDATE app_users SET removed_at = clock_timestamp()
          WHERE id = $1 AND workspace_id = $2 AND removed_at IS NULL RETURNING ${columns}`,
    [id, workspaceId],
  );
  const row = result.rows[0];
  if (row !== undefined) await removeUserDevices(db, row.id);
  return row;
}

/**
 * Locks the workspace's user for the rest of the transaction, unless removed: registrations of one user's devices
 * take turns, and a removal waits for a registration under way (and the other way round). False when not found.
 */
export async function lockLiveUser(db: Queryable, workspaceId: string, id: string): Promise<boolean> {
  const result = await db.query(
    'SELECT 1 FROM app_users WHERE id = $1 AND workspace_id = $2 AND removed_at IS NULL FOR NO KEY UPDATE',
    [id, workspaceId],
  );
  return result.rowCount === 1;
}

/** Of `ids` (UUIDs), the workspace's users that are not removed (routing plans' checks). */
export async function userIdsIn(db: Queryable, workspaceId: string, ids: readonly string[]): Promise<{ id: string }[]> {
  const users = await db.query<{ id: string }>(
    'SELECT id FROM app_users WHERE workspace_id = $1 AND id = ANY ($2::uuid[]) AND removed_at IS NULL',
    [workspaceId, ids],
  );
  return users.rows;
}
