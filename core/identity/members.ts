/**
 * The `members` table: the service's own users in a workspace, created by an admin command, listed by operations
 * 15-16, and found by their login's email for a member session.
 */
import type { Queryable } from '../database.ts';
import { keysetPage, type PageWindow } from '../rows.ts';
import type { Scope } from '../scopes.ts';
import { workspaceExists } from './workspaces.ts';

export interface MemberRow {
  id: string;
  workspace_id: string;
  email: string;
  name: string | null;
  scopes: string[];
  created_at: Date;
}

export const memberColumns = 'id, workspace_id, email, name, scopes, created_at, created_at::text AS cursor_ts';

export function memberJson(row: MemberRow) {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    email: row.email,
    name: row.name,
    scopes: row.scopes,
    createdAt: row.created_at.toISOString(),
  };
}

export class MemberInputError extends Error {}

const emailRegex = /^[^\s@]{1,64}@[^\s@]{1,255}$/;

export async function createMember(
  db: Queryable,
  input: { workspaceId: string; email: string; name?: string; scopes: readonly Scope[] },
): Promise<MemberRow> {
  if (!emailRegex.test(input.email)) throw new MemberInputError(`"${input.email}" is not an email address`);
  if (!(await workspaceExists(db, input.workspaceId))) throw new MemberInputError(`no workspace ${input.workspaceId}`);
  try {
    const result = await db.query<MemberRow>(
      `INSERT INTO members (workspace_id, email, name, scopes) VALUES ($1, $2, $3, $4) RETURNING ${memberColumns}`,
      [input.workspaceId, input.email, input.name ?? null, input.scopes],
    );
    return result.rows[0] as MemberRow;
  } catch (error) {
    if ((error as { code?: string }).code === '23505') {
      throw new MemberInputError(`${input.email} is already a member of workspace ${input.workspaceId}`);
    }
    throw error;
  }
}

/** Of `ids` (lowercase UUIDs), those that are not members of the workspace. */
export async function unknownMembers(db: Queryable, workspaceId: string, ids: readonly string[]): Promise<string[]> {
  const found = await db.query<{ id: string }>(
    'SELECT id FROM members WHERE workspace_id = $1 AND id = ANY ($2::uuid[])',
    [workspaceId, ids],
  );
  const known = new Set(found.rows.map((row) => row.id));
  return ids.filter((id) => !known.has(id));
}

export function listMembers(
  db: Queryable,
  workspaceId: string,
  window: PageWindow,
): Promise<(MemberRow & { cursor_ts: string })[]> {
  return keysetPage<MemberRow & { cursor_ts: string }>(
    db,
    { select: `SELECT ${memberColumns} FROM members`, where: 'workspace_id = $1', params: [workspaceId] },
    window,
  );
}

export async function memberById(db: Queryable, workspaceId: string, id: unknown): Promise<MemberRow | undefined> {
  const result = await db.query<MemberRow>(`SELECT ${memberColumns} FROM members WHERE id = $1 AND workspace_id = $2`, [
    id,
    workspaceId,
  ]);
  return result.rows[0];
}

/** Locks the workspace's member for the rest of the transaction (registrations of their devices take turns). */
export async function lockMember(db: Queryable, workspaceId: string, id: string): Promise<boolean> {
  const result = await db.query('SELECT 1 FROM members WHERE id = $1 AND workspace_id = $2 FOR NO KEY UPDATE', [
    id,
    workspaceId,
  ]);
  return result.rowCount === 1;
}

/** The workspace's member with this email (in any case), for a member session. */
export async function memberByEmail(
  db: Queryable,
  workspaceId: string,
  email: string,
): Promise<{ id: string; scopes: string[] } | undefined> {
  const found = await db.query<{ id: string; scopes: string[] }>(
    'SELECT id, scopes FROM members WHERE workspace_id = $1 AND lower(email) = lower($2)',
    [workspaceId, email],
  );
  return found.rows[0];
}

/** Of `ids` (UUIDs), the workspace's members (routing plans' checks). */
export async function memberIdsIn(
  db: Queryable,
  workspaceId: string,
  ids: readonly string[],
): Promise<{ id: string }[]> {
  const members = await db.query<{ id: string }>(
    'SELECT id FROM members WHERE workspace_id = $1 AND id = ANY ($2::uuid[])',
    [workspaceId, ids],
  );
  return members.rows;
}
