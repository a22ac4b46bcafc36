/**
 * The `queues` table: call queues of a workspace, written by the REST API (operations 34-38) and by the `Queue`
 * reconciler, read by routing plans' checks (facts.ts).
 */
import type { Queryable } from '../database.ts';
import { type PageWindow, workspacePage, workspaceRow } from '../rows.ts';

export interface QueueRow {
  id: string;
  workspace_id: string;
  name: string;
  strategy: string;
  wrap_up_secs: number;
  member_ids: string[];
  created_at: Date;
  updated_at: Date;
  cursor_ts: string;
}

const columns =
  'id, workspace_id, name, strategy, wrap_up_secs, member_ids, created_at, updated_at, created_at::text AS cursor_ts';

const queueTable = { table: 'queues', columns, name: 'queue' };

export interface QueueFields {
  name: string;
  strategy: string;
  wrapUpSecs: number;
  /** Lowercased member ids. */
  memberIds: string[];
}

export async function createQueue(db: Queryable, workspaceId: string, fields: QueueFields): Promise<QueueRow> {
  const result = await db.query<QueueRow>(
    `INSERT INTO queues (workspace_id, name, strategy, wrap_up_secs, member_ids) VALUES ($1, $2, $3, $4, $5)
         RETURNING ${columns}`,
    [workspaceId, fields.name, fields.strategy, fields.wrapUpSecs, fields.memberIds],
  );
  return result.rows[0] as QueueRow;
}

export function listQueues(db: Queryable, workspaceId: string, window: PageWindow): Promise<QueueRow[]> {
  return workspacePage<QueueRow>(db, queueTable, workspaceId, window);
}

/** The workspace's queue, or 404; with `lock`, locked until commit (FOR UPDATE). */
export function queueById(db: Queryable, workspaceId: string, id: string, lock = false): Promise<QueueRow> {
  return workspaceRow<QueueRow>(db, queueTable, id, workspaceId, lock);
}

/** Changes the fields given (null: kept); undefined when the workspace has no such queue. */
export async function updateQueue(
  db: Queryable,
  workspaceId: string,
  id: string,
  changes: { [K in keyof QueueFields]: QueueFields[K] | null },
): Promise<QueueRow | undefined> {
  const result = await db.query<QueueRow>(
    `UPDATE queues SET name = coalesce($3, name), strategy = coalesce($4, strategy),
                wrap_up_secs = coalesce($5, wrap_up_secs), member_ids = coalesce($6, member_ids),
                updated_at = clock_timestamp()
          WHERE id = $1 AND workspace_id = $2 RETURNING ${columns}`,
    [id, workspaceId, changes.name, changes.strategy, changes.wrapUpSecs, changes.memberIds],
  );
  return result.rows[0];
}

export async function deleteQueue(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM queues WHERE id = $1', [id]);
}

/** Locks the queue's row, if any, until commit and says whose it is (the reconciler's converge). */
export async function lockQueueOwner(db: Queryable, id: string): Promise<string | undefined> {
  const existing = await db.query<{ workspace_id: string }>(
    'SELECT workspace_id FROM queues WHERE id = $1 FOR UPDATE',
    [id],
  );
  return existing.rows[0]?.workspace_id;
}

/** Records the queue as the resource has it; true when the record was made or changed. */
export async function recordQueue(
  db: Queryable,
  id: string,
  workspaceId: string,
  fields: QueueFields,
): Promise<boolean> {
  const written = await db.query(
    `INSERT INTO queues (id, workspace_id, name, strategy, wrap_up_secs, member_ids) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (id) DO UPDATE SET name = excluded.name, strategy = excluded.strategy,
              wrap_up_secs = excluded.wrap_up_secs, member_ids = excluded.member_ids, updated_at = clock_timestamp()
        WHERE (queues.name, queues.strategy, queues.wrap_up_secs, queues.member_ids)
              IS DISTINCT FROM (excluded.name, excluded.strategy, excluded.wrap_up_secs, excluded.member_ids)`,
    [id, workspaceId, fields.name, fields.strategy, fields.wrapUpSecs, fields.memberIds],
  );
  return written.rowCount !== 0;
}

/** Of `ids` (UUIDs), the workspace's queues; with `lock`, share-locked until commit (facts.ts). */
export async function queueIdsIn(
  db: Queryable,
  workspaceId: string,
  ids: readonly string[],
  lock: boolean,
): Promise<{ id: string }[]> {
  const share = lock ? 'FOR SHARE' : '';
  const result = await db.query<{ id: string }>(
    `SELECT id FROM queues WHERE workspace_id = $1 AND id = ANY ($2::uuid[]) ${share}`,
    [workspaceId, ids],
  );
  return result.rows;
}

/**
 * The queue locked until commit (the reconciler's removal; distribution takes turns per queue,
 * core/queues/entries.ts); undefined if there is none.
 */
export async function lockQueue(db: Queryable, id: string): Promise<QueueRow | undefined> {
  const result = await db.query<QueueRow>(`SELECT ${columns} FROM queues WHERE id = $1 FOR UPDATE`, [id]);
  return result.rows[0];
}

/** The ids of the workspace's queues that name the member. */
export async function queuesOfMember(db: Queryable, workspaceId: string, memberId: string): Promise<string[]> {
  const result = await db.query<{ id: string }>(
    'SELECT id FROM queues WHERE workspace_id = $1 AND $2::uuid = ANY (member_ids) ORDER BY id',
    [workspaceId, memberId],
  );
  return result.rows.map((row) => row.id);
}
