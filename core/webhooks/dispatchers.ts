/**
 * The `webhook_dispatchers` table: the delivery dispatchers that promise to claim due lanes at least every 25 ms, so
 * that appends committing meanwhile skip their NOTIFY (core/events/outbox.ts reads it).
 */
import type { Queryable } from '../database.ts';

/**
 * Promises, until `ms` from now by the database's clock, that the dispatcher `owner` claims due lanes at least every
 * 25 ms: appends committing meanwhile skip their NOTIFY (core/events/outbox.ts).
 */
export async function stayAwake(db: Queryable, owner: string, ms: number): Promise<void> {
  await db.query({
    name: 'switchboard-dispatcher-awake',
    text: `INSERT INTO webhook_dispatchers (owner, awake_until) VALUES ($1, now() + $2 * interval '1 millisecond')
           ON CONFLICT (owner) DO UPDATE SET awake_until = excluded.awake_until`,
    values: [owner, ms],
  });
}

/** The dispatcher `owner` sleeps (it is closing): appends notify again, unless another is awake. */
export async function fallAsleep(db: Queryable, owner: string): Promise<void> {
  await db.query('DELETE FROM webhook_dispatchers WHERE owner = $1', [owner]);
}

/** Forgets dispatchers whose promise ended before `before` (processes that died without saying so). */
export async function forgetSleepingDispatchers(db: Queryable, before: Date): Promise<void> {
  await db.query('DELETE FROM webhook_dispatchers WHERE awake_until < $1', [before]);
}
