/** Members: the service's own users in a workspace, created by an admin command and listed by operations 15-16. */
import type { Queryable } from '../database.ts';
import type { Scope } from '../scopes.ts';

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
  const workspace = await db.query('SELECT 1 FROM workspaces WHERE id = $1', [input.workspaceId]);
  if (workspace.rowCount === 0) throw new MemberInputError(`no workspace ${input.workspaceId}`);
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
