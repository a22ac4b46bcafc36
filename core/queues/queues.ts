/**
 * The `queues` table: call queues of a workspace, written by the REST API (operations 34-38) and by the `Queue`
 * reconciler, read by routing plans' checks (facts.ts).
 */
import type { Queryable } from '../database.ts';
import { type PageWindow, workspacePage, workspaceRow } from '../rows.ts';
import type { AudioPrompt } from '../routing/definition.ts';

export interface QueueRow {
  id: string;
  workspace_id: string;
  name: string;
  strategy: string;
  wrap_up_secs: number;
  member_ids: string[];
  /** Played looped to waiting callers instead of the default hold music; null: the default music. */
  hold_prompt: AudioPrompt | null;
  announce_position: boolean;
  announce_expected_wait: boolean;
  announce_interval_secs: number;
  created_at: Date;
  updated_at: Date;
  cursor_ts: string;
}

const columns = `id, workspace_id, name, strategy, wrap_up_secs, member_ids, hold_prompt, announce_position,
  announce_expected_wait, announce_interval_secs, created_at, updated_at, created_at::text AS cursor_ts`;

const queueTable = { table: 'queues', columns, name: 'queue' };

export interface QueueFields {
  name: string;
  strategy: string;
  wrapUpSecs: number;
  /** Lowercased member ids. */
  memberIds: string[];
  /** Default null (the default hold music). */
  holdPrompt?: AudioPrompt | null;
  /** Default false. */
  announcePosition?: boolean;
  /** Default false. */
  announceExpectedWait?: boolean;
  /** 15 to 600; default 60. */
  announceIntervalSecs?: number;
}

/** The announcement settings' defaults (a queue written without them). */
export const queueDefaults = {
  holdPrompt: null,
  announcePosition: false,
  announceExpectedWait: false,
  announceIntervalSecs: 60,
} as const;

function settings(fields: QueueFields) {
  return [
    fields.holdPrompt === undefined || fields.holdPrompt === null ? null : JSON.stringify(fields.holdPrompt),
    fields.announcePosition ?? queueDefaults.announcePosition,
    fields.announceExpectedWait ?? queueDefaults.announceExpectedWait,
    fields.announceIntervalSecs ?? queueDefaults.announceIntervalSecs,
  ];
}

export async function createQueue(db: Queryable, workspaceId: string, fields: QueueFields): Promise<QueueRow> {
  const result = await db.query<QueueRow>(
    `INSERT INTO queues (workspace_id, name, strategy, wrap_up_secs, member_ids, hold_prompt, announce_position,
                         announce_expected_wait, announce_interval_secs)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING ${columns}`,
    [workspaceId, fields.name, fields.strategy, fields.wrapUpSecs, fields.memberIds, ...settings(fields)],
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

/**
 * Changes the fields given (null or undefined: kept; `holdPrompt` null clears it, undefined keeps it); undefined when
 * the workspace has no such queue.
 */
export async function updateQueue(
  db: Queryable,
  workspaceId: string,
  id: string,
  changes: { [K in keyof QueueFields]?: QueueFields[K] | null },
): Promise<QueueRow | undefined> {
  const prompt = changes.holdPrompt;
  const result = await db.query<QueueRow>(
    `UPDATE queues SET name = coalesce($3, name), strategy = coalesce($4, strategy),
                wrap_up_secs = coalesce($5, wrap_up_secs), member_ids = coalesce($6, member_ids),
                hold_prompt = CASE WHEN $7 THEN $8::jsonb ELSE hold_prompt END,
                announce_position = coalesce($9, announce_position),
                announce_expected_wait = coalesce($10, announce_expected_wait),
                announce_interval_secs = coalesce($11, announce_interval_secs),
                updated_at = clock_timestamp()
          WHERE id = $1 AND workspace_id = $2 RETURNING ${columns}`,
    [
      id,
      workspaceId,
      changes.name ?? null,
      changes.strategy ?? null,
      changes.wrapUpSecs ?? null,
      changes.memberIds ?? null,
      prompt !== undefined,
      prompt === undefined || prompt === null ? null : JSON.stringify(prompt),
      changes.announcePosition ?? null,
      changes.announceExpectedWait ?? null,
      changes.announceIntervalSecs ?? null,
    ],
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
    `INSERT INTO queues (id, workspace_id, name, strategy, wrap_up_secs, member_ids, hold_prompt, announce_position,
                         announce_expected_wait, announce_interval_secs)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
       ON CONFLICT (id) DO UPDATE SET name = excluded.name, strategy = excluded.strategy,
              wrap_up_secs = excluded.wrap_up_secs, member_ids = excluded.member_ids,
              hold_prompt = excluded.hold_prompt, announce_position = excluded.announce_position,
              announce_expected_wait = excluded.announce_expected_wait,
              announce_interval_secs = excluded.announce_interval_secs, updated_at = clock_timestamp()
        WHERE (queues.name, queues.strategy, queues.wrap_up_secs, queues.member_ids, queues.hold_prompt,
               queues.announce_position, queues.announce_expected_wait, queues.announce_interval_secs)
              IS DISTINCT FROM (excluded.name, excluded.strategy, excluded.wrap_up_secs, excluded.member_ids,
               excluded.hold_prompt, excluded.announce_position, excluded.announce_expected_wait,
               excluded.announce_interval_secs)`,
    [id, workspaceId, fields.name, fields.strategy, fields.wrapUpSecs, fields.memberIds, ...settings(fields)],
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

/** What distribution needs of a queue (core/queues/distribution.ts). */
export type LockedQueue = Pick<QueueRow, 'id' | 'workspace_id' | 'member_ids' | 'strategy'>;

/**
 * The queue locked until commit (the reconciler's removal; distribution takes turns per queue,
 * core/queues/distribution.ts); undefined if there is none. Only the columns distribution reads.
 */
export async function lockQueue(db: Queryable, id: string): Promise<LockedQueue | undefined> {
  // NO KEY UPDATE: two distributions take turns, but a caller entering the queue (its entry's foreign key takes KEY
  // SHARE on this row) neither waits for a distribution nor holds one up.
  const result = await db.query<LockedQueue>(
    'SELECT id, workspace_id, member_ids, strategy FROM queues WHERE id = $1 FOR NO KEY UPDATE',
    [id],
  );
  return result.rows[0];
}

/** The queues that name any of the members (each in its workspace), in id order, each once. */
export async function queuesOfMembers(
  db: Queryable,
  members: readonly { workspace_id: string; member_id: string }[],
): Promise<string[]> {
  if (members.length === 0) return [];
  const result = await db.query<{ id: string }>({
    name: 'switchboard-queues-of-members',
    text: `SELECT DISTINCT q.id FROM unnest($1::uuid[], $2::uuid[]) AS m (workspace_id, member_id)
             JOIN queues q ON q.workspace_id = m.workspace_id AND m.member_id = ANY (q.member_ids)
            ORDER BY q.id`,
    values: [members.map((member) => member.workspace_id), members.map((member) => member.member_id)],
  });
  return result.rows.map((row) => row.id);
}
