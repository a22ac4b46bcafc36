/**
 * Distribution (docs/contact-center.md, "Queue entries and distribution"): the queue's first entries in line offered
 * to its next agents in one transaction under locks (the queue row `FOR NO KEY UPDATE`, so distributions of one queue
 * take turns while callers still enter it; the entry and the agents `FOR UPDATE SKIP LOCKED`), so no entry is
 * offered twice at once and no agent gets two calls, whichever engines distribute. The rest of the entries' SQL is
 * entries.ts.
 */
import type pg from 'pg';
import { changeAgentState, offerAgents, offerableAgents } from '../agents/agent-states.ts';
import { inTransaction } from '../database.ts';
import { type LockedQueue, lockQueue } from './queues.ts';
import { type EndedQueueCall, endQueueCallsIn, entryColumns, type EntryRow, markOffered } from './entries.ts';

export interface Distributed {
  entry: EntryRow;
  /** The agents offered the entry (one, or every available one for `ring_all`). */
  memberIds: string[];
}

/**
 * Offers the first entry in line of the queue to its next agent (or, `ring_all`, to every available agent): the
 * entry `offered`, the agents `offered` (their events), announced. Undefined when no entry waits or no agent can be
 * offered one now.
 */
export async function distribute(pool: pg.Pool, queueId: string): Promise<Distributed | undefined> {
  return (await distributeMany(pool, queueId, 1))[0];
}

/**
 * Offers up to `most` entries of the queue, in line order, each to its next agent, as `distribute` does, in one
 * transaction: when several agents become free at once (a shift starts, calls end together) they are offered their
 * callers in one commit instead of one commit each. Stops at the first entry no agent can take now.
 *
 * Set-based but for `ring_all` (each entry offered to every available agent, one entry at a time): the first waiting
 * entries and the first offerable agents (each locked, `SKIP LOCKED`) are read once and paired in order, then one
 * statement offers the agents, one writes their events, and one offers the entries and announces them. The pairs are
 * those one-at-a-time offers would make: each takes the first agent the strategy's order leaves.
 */
export async function distributeMany(pool: pg.Pool, queueId: string, most: number): Promise<Distributed[]> {
  return inTransaction(pool, (db) => offerInLine(db, queueId, most));
}

/**
 * Queue calls ended (`endQueueCallsIn`: devices and agents freed) and, in the same transaction, the queues of the
 * agents freed without wrap-up distributed as `distributeMany` does (up to `most` offers each, the queues locked in
 * id order): an agent whose call ends while callers wait is offered the next one in the commit that frees them,
 * without a notice and another transaction in between. Those queues are not announced: they were distributed.
 */
export async function endCallsAndOffer(
  pool: pg.Pool,
  ends: readonly EndedQueueCall[],
  most: number,
): Promise<Distributed[]> {
  if (ends.length === 0) return [];
  return inTransaction(pool, async (db) => {
    const offers: Distributed[] = [];
    for (const queueId of await endQueueCallsIn(db, ends)) offers.push(...(await offerInLine(db, queueId, most)));
    return offers;
  });
}

/** `distributeMany` in the caller's transaction. */
async function offerInLine(db: pg.PoolClient, queueId: string, most: number): Promise<Distributed[]> {
  const queue = await lockQueue(db, queueId);
  if (queue === undefined) return [];
  if (queue.strategy === 'ring_all') {
    const offers: Distributed[] = [];
    while (offers.length < most) {
      const offer = await offerNext(db, queue);
      if (offer === undefined) break;
      offers.push(offer);
    }
    return offers;
  }
  const waiting = await firstInLine(db, queue.id, most);
  if (waiting.length === 0) return [];
  const agents = await offerableAgents(
    db,
    { workspaceId: queue.workspace_id, memberIds: queue.member_ids, strategy: queue.strategy },
    waiting.length,
  );
  const pairs = agents.map((memberId, index) => ({ memberId, entryId: (waiting[index] as EntryRow).id }));
  const offered = await offerAgents(db, queue.workspace_id, pairs);
  const agentOf = new Map(offered.map((agent) => [agent.entry_id as string, agent.member_id]));
  const byId = new Map((await markOffered(db, queue.id, [...agentOf.keys()])).map((entry) => [entry.id, entry]));
  // In line order, as they were read.
  return waiting.flatMap((entry) => {
    const row = byId.get(entry.id);
    const memberId = agentOf.get(entry.id);
    return row === undefined || memberId === undefined ? [] : [{ entry: row, memberIds: [memberId] }];
  });
}

/** The queue's first `limit` entries in line that no other transaction holds, locked. */
async function firstInLine(db: pg.PoolClient, queueId: string, limit: number): Promise<EntryRow[]> {
  const waiting = await db.query<EntryRow>(
    `SELECT ${entryColumns} FROM queue_entries
      WHERE queue_id = $1 AND state IN ('waiting', 'callback') AND left_at IS NULL
      ORDER BY priority DESC, enqueued_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`,
    [queueId, limit],
  );
  return waiting.rows;
}

/** The queue's first entry in line offered to its next agent (or agents), in the caller's transaction. */
async function offerNext(db: pg.PoolClient, queue: LockedQueue): Promise<Distributed | undefined> {
  const first = (await firstInLine(db, queue.id, 1))[0];
  if (first === undefined) return undefined;
  const memberIds = await offerableAgents(
    db,
    { workspaceId: queue.workspace_id, memberIds: queue.member_ids, strategy: queue.strategy },
    queue.strategy === 'ring_all' ? 50 : 1,
  );
  if (memberIds.length === 0) return undefined;
  const [updated] = await markOffered(db, queue.id, [first.id]);
  for (const memberId of memberIds) {
    await changeAgentState(db, queue.workspace_id, memberId, {
      state: 'offered',
      actor: 'system',
      entryId: first.id,
      offeredNow: true,
    });
  }
  return { entry: updated as EntryRow, memberIds };
}
