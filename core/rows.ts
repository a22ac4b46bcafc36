/**
 * Reads that every table module shares: one row of a workspace-owned table by id (404 `not_found` naming what was
 * looked for), one keyset page of a list, and that page over a workspace-owned table. The table modules
 * (core/<domain>/) call them with their own columns; nothing outside core/ writes SQL.
 */
import type { Queryable } from './database.ts';
import { notFound } from './errors.ts';

/** A workspace-owned table as its reads select it: the table, its columns, and what a 404 calls one of its rows. */
export interface WorkspaceTable {
  table: string;
  /** Including `id` and, for pages, `created_at::text AS cursor_ts`. */
  columns: string;
  name: string;
}

/**
 * One row of a workspace-owned table by id, or 404 `not_found` naming what was looked for. With `lock`, the row is
 * locked for the rest of the transaction (FOR UPDATE), so a change or a delete acts on what it read.
 */
export async function workspaceRow<Row extends object>(
  db: Queryable,
  what: WorkspaceTable,
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

/** Where a page starts (after the last row of the page before, newest first) and how many rows it holds. */
export interface PageWindow {
  after?: { ts: string; id: string };
  limit: number;
}

/** What a list reads. */
export interface PageSource {
  /** `SELECT <columns> FROM <table>`; the columns must include `id` and `created_at::text AS cursor_ts`. */
  select: string;
  /** Conditions over `$1..$n`. */
  where: string;
  params: unknown[];
  /** The timestamp column the list is ordered by, newest first (default `created_at`; `cursor_ts` is its text). */
  orderBy?: string;
}

/**
 * A keyset page over `(orderBy, id)`, newest first: up to `limit + 1` rows, the one past the page telling the caller
 * that another page follows.
 */
export async function keysetPage<Row>(db: Queryable, source: PageSource, window: PageWindow): Promise<Row[]> {
  const params = [...source.params];
  let where = source.where;
  const order = source.orderBy ?? 'created_at';
  if (window.after !== undefined) {
    params.push(window.after.ts, window.after.id);
    where += ` AND (${order}, id) < ($${params.length - 1}::timestamptz, $${params.length}::uuid)`;
  }
  params.push(window.limit + 1);
  const result = await db.query<Row & object>(
    `${source.select} WHERE ${where} ORDER BY ${order} DESC, id DESC LIMIT $${params.length}`,
    params,
  );
  return result.rows;
}

/** One keyset page of a workspace's rows of a workspace-owned table, newest first. */
export function workspacePage<Row>(
  db: Queryable,
  what: WorkspaceTable,
  workspaceId: string,
  window: PageWindow,
): Promise<Row[]> {
  const select = `SELECT ${what.columns} FROM ${what.table}`;
  return keysetPage<Row>(db, { select, where: 'workspace_id = $1', params: [workspaceId] }, window);
}
