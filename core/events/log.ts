/**
 * Reads of the event log (the `events` table, written by outbox.ts): a page in commit-safe order (operation 80,
 * docs/events.md), where an event id resumes the log, and events by id (a webhook replay).
 */
import type { Queryable } from '../database.ts';

/** Where the log resumes after the application's event `id`: the oldest transaction running when it was written. */
export async function resumeTxOf(db: Queryable, id: string, applicationId: string): Promise<string | undefined> {
  const found = await db.query<{ resume_tx: string }>(
    'SELECT resume_tx::text FROM events WHERE id = $1 AND application_id = $2',
    [id, applicationId],
  );
  return found.rows[0]?.resume_tx;
}

export interface LogRead {
  applicationId: string;
  /** The position after which the page starts. */
  from: { tx: string; index: string };
  workspaceId: string | null;
  types: string[] | null;
  /** At most this many events (the caller asks one more than it serves, to know whether more follow). */
  limit: number;
}

/**
 * The events after `from` of transactions older than every transaction still running (the horizon), in log order,
 * with that horizon: one row with null `tx` when there are none.
 */
export async function readLog(
  db: Queryable,
  read: LogRead,
): Promise<{ horizon: string; tx: string | null; log_index: string | null; payload: string }[]> {
  const result = await db.query<{ horizon: string; tx: string | null; log_index: string | null; payload: string }>(
    `WITH horizon AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin)
         SELECT horizon.xmin::text AS horizon, page.tx, page.log_index, page.payload
           FROM horizon LEFT JOIN LATERAL (
             SELECT tx_id::text AS tx, log_index, payload FROM events
              WHERE application_id = $1
                AND (tx_id, log_index) > ($2::xid8, $3::bigint)
                AND tx_id < horizon.xmin
                AND ($4::uuid IS NULL OR workspace_id = $4)
                AND ($5::text[] IS NULL OR type = ANY ($5))
              ORDER BY tx_id, log_index
              LIMIT $6) page ON true`,
    [read.applicationId, read.from.tx, read.from.index, read.workspaceId, read.types, read.limit],
  );
  return result.rows;
}

/** Of `ids`, the application's events, with their types and streams. */
export async function eventsByIds(
  db: Queryable,
  applicationId: string,
  ids: readonly string[],
): Promise<{ id: string; type: string; stream_key: string }[]> {
  const found = await db.query<{ id: string; type: string; stream_key: string }>(
    'SELECT id, type, stream_key FROM events WHERE application_id = $1 AND id = ANY ($2::uuid[])',
    [applicationId, ids],
  );
  return found.rows;
}
