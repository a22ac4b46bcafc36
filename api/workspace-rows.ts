/**
 * One row of a workspace-owned table by id, or 404 `not_found` naming what was looked for. With `lock`, the row is
 * locked for the rest of the transaction (FOR UPDATE), so a change or a delete acts on what it read.
 */
import type { Queryable } from '../core/database.ts';
import { notFound } from '../core/errors.ts';

export async function workspaceRow<Row extends object>(
  db: Queryable,
  what: { table: string; columns: string; name: string },
  id: string,
  workspaceId: string,
  lock = false,
): Promise<Row> {
  const result = await db.query<Row>(
    `SELECT ${what.columns} FROM ${what.table} WHERE id = $1 AND workspace_id = $2${lock ? ' FOR UPDATE' : ''}`,
    [id, workspaceId],
  );
  const row = result.rows[0];
  if (row === undefined) throw notFound(what.name);
  return row;
}
