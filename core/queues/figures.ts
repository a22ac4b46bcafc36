/**
 * The figures' reads of `queue_entries`: the live figures (operation 81 and the Prometheus gauges; docs/contact-
 * center.md, "Live figures") and what a waiting caller is told (`entryPlace`: position and expected wait). Its
 * writes, and every other read, are in core/queues/entries.ts; no other module holds SQL for the table.
 *
 * Each read is one statement on the table's partial indexes: `queue_entries_line` (the entries still in a queue,
 * `left_at IS NULL`) and `queue_entries_left` (those that left, by queue and time), so its cost follows the live
 * rows and the last interval's, never the table's history.
 */
import type { Queryable } from '../database.ts';

/** One queue's entries: still in it, and those that left in the last interval. */
export interface EntryFigures {
  queue_id: string;
  /** Entries still in the queue: waiting in line, offered to an agent, or kept in line as a callback. */
  waiting: number;
  /** Seconds since the oldest of them entered (0 when none). */
  longest_wait_secs: number;
  /** Left in the interval: connected to an agent. */
  answered: number;
  /** Left in the interval: the caller hung up. */
  abandoned: number;
  /** Of `answered`, those connected within the service level's seconds of entering. */
  answered_in_time: number;
}

/**
 * The figures of the queues named, one row per queue that has any (a queue absent from the answer has none). The
 * interval ends at the statement's start (`now()`: stable, so the index `queue_entries_left` bounds it; the volatile
 * `clock_timestamp()` could not).
 */
export async function entryFigures(
  db: Queryable,
  queueIds: readonly string[],
  intervalSecs: number,
  serviceLevelSecs: number,
): Promise<EntryFigures[]> {
  if (queueIds.length === 0) return [];
  // Named (prepared): planned once per connection, as wallboards ask every few seconds.
  const result = await db.query<EntryFigures>({
    name: 'entry-figures',
    text: `WITH live AS (
       SELECT queue_id, count(*)::int AS waiting, min(enqueued_at) AS oldest
         FROM queue_entries WHERE queue_id = ANY ($1::uuid[]) AND left_at IS NULL
        GROUP BY queue_id
     ), gone AS (
       SELECT queue_id,
              count(*) FILTER (WHERE state = 'connected')::int AS answered,
              count(*) FILTER (WHERE state = 'abandoned')::int AS abandoned,
              count(*) FILTER (WHERE state = 'connected'
                                 AND connected_at - enqueued_at <= make_interval(secs => $3))::int AS answered_in_time
         FROM queue_entries
        WHERE queue_id = ANY ($1::uuid[]) AND left_at IS NOT NULL
          AND left_at > now() - make_interval(secs => $2)
        GROUP BY queue_id
     )
     SELECT queue_id, coalesce(live.waiting, 0) AS waiting,
            coalesce(floor(extract(epoch FROM clock_timestamp() - live.oldest)), 0)::int AS longest_wait_secs,
            coalesce(gone.answered, 0) AS answered, coalesce(gone.abandoned, 0) AS abandoned,
            coalesce(gone.answered_in_time, 0) AS answered_in_time
       FROM live FULL JOIN gone USING (queue_id)`,
    values: [[...queueIds], intervalSecs, serviceLevelSecs],
  });
  return result.rows;
}

/** A queue with entries still in it (the gauges). */
export interface LiveQueue {
  queue_id: string;
  waiting: number;
  longest_wait_secs: number;
}

/**
 * The queues, of every workspace, with entries still in them, the most entries first, at most `limit` (the
 * Prometheus gauges' choice of queues, api/queue-gauges.ts).
 */
export async function queuesWithEntries(db: Queryable, limit: number): Promise<LiveQueue[]> {
  const result = await db.query<LiveQueue>(
    `SELECT queue_id, count(*)::int AS waiting,
            floor(extract(epoch FROM clock_timestamp() - min(enqueued_at)))::int AS longest_wait_secs
       FROM queue_entries WHERE left_at IS NULL
      GROUP BY queue_id
      ORDER BY waiting DESC, longest_wait_secs DESC, queue_id
      LIMIT $1`,
    [limit],
  );
  return result.rows;
}

/** How far back `entryPlace` counts the queue's answered entries. */
export const answerRateWindowSecs = 900;

/** Where an entry stands in its queue (a waiting caller's announcement). */
export interface EntryPlace {
  state: string;
  /** 1 for the first in line: the entries still in the queue ahead of this one, plus one. */
  position: number;
  /** Entries of the queue connected to an agent in the last `answerRateWindowSecs`. */
  answered_recently: number;
}

/**
 * The entry's place in line: ahead of it are the queue's entries still in it (waiting, offered, or kept as callbacks)
 * with a higher priority, or the same priority and an earlier `enqueued_at` (the order `distribute` takes them in).
 * Undefined when there is no such entry. On the partial indexes `queue_entries_line` and `queue_entries_left`.
 */
export async function entryPlace(db: Queryable, entryId: string): Promise<EntryPlace | undefined> {
  const result = await db.query<EntryPlace>(
    `SELECT me.state,
            (SELECT count(*)::int + 1 FROM queue_entries e
              WHERE e.queue_id = me.queue_id AND e.left_at IS NULL AND e.id <> me.id
                AND (e.priority > me.priority
                     OR (e.priority = me.priority AND (e.enqueued_at, e.id) < (me.enqueued_at, me.id)))) AS position,
            (SELECT count(*)::int FROM queue_entries e
              WHERE e.queue_id = me.queue_id AND e.left_at IS NOT NULL
                AND e.left_at > now() - make_interval(secs => $2) AND e.state = 'connected') AS answered_recently
       FROM queue_entries me WHERE me.id = $1`,
    [entryId, answerRateWindowSecs],
  );
  return result.rows[0];
}

/**
 * The expected wait of the entry at `position`, in seconds, from the queue's recent answer rate: the queue answered
 * `answeredRecently` callers in the last `answerRateWindowSecs`, so `position` callers take about
 * `position × window ÷ answered` (the entries ahead are answered at that rate, then this one). Undefined when none
 * was answered in the window: no estimate is better than a made-up one. The rate is what the agents managed, not
 * what they could manage: after a quiet spell (few callers, so few answers) it overstates the wait.
 */
export function expectedWaitSecs(position: number, answeredRecently: number): number | undefined {
  if (answeredRecently <= 0 || position <= 0) return undefined;
  return Math.ceil((position * answerRateWindowSecs) / answeredRecently);
}
