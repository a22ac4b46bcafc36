/**
 * The `queue_entries` table (docs/contact-center.md, "Queue entries and distribution"). A call waiting in a queue is
 * an entry; distribution, which offers entries to agents under locks, is core/queues/distribution.ts. Every change
 * that matters to another process is announced on `switchboard_queue` (`QueueNotice`).
 */
import type pg from 'pg';
import { type Static, Type } from 'typebox';
import { Compile } from 'typebox/compile';
import {
  agentOf,
  agentsOfEntry,
  changeAgentState,
  endQueueCalls,
  type PersonState,
  type QueueCallEnd,
} from '../agents/agent-states.ts';
import { callEnvelope, readCall } from '../calls/calls.ts';
import { announce, parseNotice, queueChannel } from '../change-notices.ts';
import { afterCommit, inTransaction, type Queryable } from '../database.ts';
import { appendEvent } from '../events/outbox.ts';
import { freeDevices } from '../devices/devices.ts';
import { queuesOfMembers } from './queues.ts';

export type EntryState = 'waiting' | 'offered' | 'connected' | 'abandoned' | 'overflowed' | 'callback';

export interface EntryRow {
  id: string;
  queue_id: string;
  call_id: string;
  workspace_id: string;
  priority: number;
  state: EntryState;
  engine_owner: string;
  callback_number: string | null;
  enqueued_at: Date;
  offered_at: Date | null;
  connected_at: Date | null;
  left_at: Date | null;
}

export const entryColumns = `id, queue_id, call_id, workspace_id, priority, state, engine_owner, callback_number, enqueued_at,
  offered_at, connected_at, left_at`;

const QueueNotice = Type.Object({
  queueId: Type.String(),
  entryId: Type.Optional(Type.String()),
  kind: Type.Enum(['entered', 'offered', 'released', 'left', 'agent']),
});
export type QueueNotice = Static<typeof QueueNotice>;
const queueNotice = Compile(QueueNotice);

/** A notice of `queueChannel`, or undefined when it is not one. */
export function parseQueueNotice(payload: string): QueueNotice | undefined {
  return parseNotice(payload, queueNotice);
}

/**
 * A notice that the queue may be distributed (an entry came, went back in line or left; an agent may be free), sent
 * once the transaction of `db` commits (`afterCommit`: the many transactions that free agents at once are not made to
 * commit one at a time); one lost to a crash in between is made up by every engine's one-second sweep.
 */
export async function notify(db: Queryable, notice: QueueNotice): Promise<void> {
  await afterCommit(db, (client) => announce(client, queueChannel, JSON.stringify(notice)));
}

/**
 * Distribution's entries made `offered` now and each announced (`offered`) in the transaction of `db`, in one
 * statement: the notices are delivered at its commit and never lost apart from it (the engine holding an entry that
 * another engine offered waits for its notice to ring the agent). The entries as they are after it; only for entries
 * the transaction holds locked.
 */
export async function markOffered(db: Queryable, queueId: string, entryIds: readonly string[]): Promise<EntryRow[]> {
  if (entryIds.length === 0) return [];
  const notices = entryIds.map((entryId) =>
    JSON.stringify({ queueId, entryId, kind: 'offered' } satisfies QueueNotice),
  );
  const updated = await db.query<EntryRow & { notices: string }>(
    `WITH offered AS (
       UPDATE queue_entries SET state = 'offered', offered_at = clock_timestamp()
        WHERE id = ANY ($1::uuid[]) RETURNING ${entryColumns}),
       notified AS (
       SELECT pg_notify($3, n.payload) FROM offered JOIN unnest($1::uuid[], $2::text[]) AS n (id, payload) USING (id))
     SELECT offered.*, (SELECT count(*) FROM notified) AS notices FROM offered`,
    [[...entryIds], notices, queueChannel],
  );
  return updated.rows.map(({ notices: _notices, ...entry }) => entry);
}

/** The `queue` object of `queue.entered` and `queue.left` (spec section 2). */
function entryObject(row: EntryRow) {
  return {
    queueId: row.queue_id,
    entryId: row.id,
    state: row.state,
    priority: row.priority,
    enqueuedAt: row.enqueued_at.toISOString(),
  };
}

async function writeQueueEvent(db: Queryable, type: 'queue.entered' | 'queue.left', entry: EntryRow): Promise<void> {
  const call = await readCall(db, entry.call_id);
  if (call === undefined) return;
  await appendEvent(db, {
    type,
    ...callEnvelope(call),
    fields: { callId: call.id, queue: entryObject(entry) },
  });
}

async function lockedEntry(db: Queryable, id: string): Promise<EntryRow | undefined> {
  const result = await db.query<EntryRow>(`SELECT ${entryColumns} FROM queue_entries WHERE id = $1 FOR UPDATE`, [id]);
  return result.rows[0];
}

/** An entry as it is now. */
export async function entryById(db: Queryable, id: string): Promise<EntryRow | undefined> {
  const result = await db.query<EntryRow>(`SELECT ${entryColumns} FROM queue_entries WHERE id = $1`, [id]);
  return result.rows[0];
}

/**
 * The call enters the queue: its entry `waiting`, `queue.entered`, announced. Undefined when the call ended
 * meanwhile (nothing is written).
 */
export async function enterQueue(
  pool: pg.Pool,
  input: { callId: string; queueId: string; engineOwner: string; priority?: number },
): Promise<EntryRow | undefined> {
  return inTransaction(pool, async (db) => {
    const call = await readCall(db, input.callId, true);
    if (call === undefined || call.ended_at !== null) return undefined;
    const result = await db.query<EntryRow>(
      `INSERT INTO queue_entries (queue_id, call_id, workspace_id, priority, engine_owner)
       VALUES ($1, $2, $3, $4, $5) RETURNING ${entryColumns}`,
      [input.queueId, input.callId, call.workspace_id, input.priority ?? 0, input.engineOwner],
    );
    const entry = result.rows[0] as EntryRow;
    await writeQueueEvent(db, 'queue.entered', entry);
    await notify(db, { queueId: entry.queue_id, entryId: entry.id, kind: 'entered' });
    return entry;
  });
}

/**
 * The agent answered the entry: the entry `connected` (`queue.left`), the agent `on_call`, any other agent offered
 * it (`ring_all`) `available` again. False when the entry was no longer offered, or not to this agent (an accept
 * that raced the agent going away, or the entry offered again to someone else meanwhile): nothing changed.
 */
export async function answerEntry(pool: pg.Pool, entryId: string, memberId: string): Promise<boolean> {
  return inTransaction(pool, async (db) => {
    const entry = await lockedEntry(db, entryId);
    if (entry === undefined || entry.state !== 'offered') return false;
    const agents = await agentsOfEntry(db, entryId);
    if (!agents.some((agent) => agent.member_id === memberId && agent.state === 'offered')) return false;
    const connected = await db.query<EntryRow>(
      `UPDATE queue_entries SET state = 'connected', connected_at = clock_timestamp(), left_at = clock_timestamp()
        WHERE id = $1 RETURNING ${entryColumns}`,
      [entryId],
    );
    await writeQueueEvent(db, 'queue.left', connected.rows[0] as EntryRow);
    for (const agent of agents) {
      await changeAgentState(
        db,
        entry.workspace_id,
        agent.member_id,
        agent.member_id === memberId
          ? { state: 'on_call', actor: 'system', entryId, answered: true, missedOffers: 'reset' }
          : { state: 'available', actor: 'system' },
      );
    }
    await notify(db, { queueId: entry.queue_id, entryId, kind: 'left' });
    return true;
  });
}

/**
 * The offer of the entry ended unanswered: the entry goes back in line in its place (`waiting`, or `callback`),
 * the agents offered it `available` again. With `missed`, each had an offer missed: the third in a row sends them
 * `away` (`missed_offers`). Announced, so that distribution goes on. With `offeredAt` (the entry's `offered_at` when
 * its offer was rung), nothing happens unless the entry is still in that offer: one made since (the entry went back
 * in line and was offered again) is not released by the end of the old one.
 */
export async function releaseEntry(
  pool: pg.Pool,
  entryId: string,
  missed: boolean,
  limit: number,
  offeredAt?: Date,
): Promise<void> {
  await inTransaction(pool, async (db) => {
    const entry = await lockedEntry(db, entryId);
    if (entry === undefined) return;
    if (offeredAt !== undefined && entry.offered_at?.getTime() !== offeredAt.getTime()) return;
    await releaseAgents(db, entry, missed, limit);
    await requeue(db, entry);
  });
}

/** An `offered` entry goes back in line in its place (`waiting`, or `callback`), announced. */
async function requeue(db: Queryable, entry: EntryRow): Promise<void> {
  if (entry.state !== 'offered') return;
  await db.query(
    `UPDATE queue_entries SET state = CASE WHEN callback_number IS NULL THEN 'waiting' ELSE 'callback' END,
            offered_at = NULL WHERE id = $1`,
    [entry.id],
  );
  await notify(db, { queueId: entry.queue_id, entryId: entry.id, kind: 'released' });
}

async function releaseAgents(db: pg.PoolClient, entry: EntryRow, missed: boolean, limit: number): Promise<void> {
  for (const agent of await agentsOfEntry(db, entry.id)) {
    if (agent.state !== 'offered') continue;
    const changed = await changeAgentState(db, entry.workspace_id, agent.member_id, {
      state: 'available',
      actor: 'system',
      ...(missed ? { missedOffers: 'missed' as const } : {}),
    });
    if (missed && changed !== undefined && changed.agent.missed_offers >= limit) {
      await changeAgentState(db, entry.workspace_id, agent.member_id, {
        state: 'away',
        reason: 'missed_offers',
        actor: 'system',
        missedOffers: 'reset',
      });
    }
  }
}

/**
 * The entry leaves the queue unanswered: `abandoned` (the caller hung up), `overflowed` (`maxWaitSecs`) or
 * `callback_refused` (the dial-out policy refused its callback's number), with `queue.left`; agents still offered it
 * are `available` again. Nothing when it had left already.
 */
export async function leaveQueue(
  pool: pg.Pool,
  entryId: string,
  state: 'abandoned' | 'overflowed' | 'callback_refused',
  limit: number,
): Promise<void> {
  await inTransaction(pool, async (db) => {
    const entry = await lockedEntry(db, entryId);
    if (entry === undefined || entry.left_at !== null) return;
    await releaseAgents(db, entry, false, limit);
    const left = await db.query<EntryRow>(
      `UPDATE queue_entries SET state = $2, left_at = clock_timestamp() WHERE id = $1 RETURNING ${entryColumns}`,
      [entryId, state],
    );
    await writeQueueEvent(db, 'queue.left', left.rows[0] as EntryRow);
    await notify(db, { queueId: entry.queue_id, entryId, kind: 'left' });
  });
}

/** An agent's queue call that ended, with the device it was on (freed with the agent), if it was on one. */
export interface EndedQueueCall extends QueueCallEnd {
  deviceId?: string;
}

/**
 * Queue calls ended, in one transaction however many (a burst of calls ending together frees their agents in one
 * commit), and the queues of the agents freed without wrap-up announced, once each. See `endQueueCallsIn`.
 */
export async function queueCallsEnded(pool: pg.Pool, ends: readonly EndedQueueCall[]): Promise<void> {
  if (ends.length === 0) return;
  await inTransaction(pool, async (db) => announceQueues(db, await endQueueCallsIn(db, ends)));
}

/**
 * Queue calls ended, in the caller's transaction: their devices are free and each agent goes to `wrap_up` for its
 * queue's `wrapUpSecs` (straight to `available` when 0; an agent who set another state during the call keeps it).
 * Returns the queues of the agents of the ends without wrap-up, in id order, each once: they may be offered a call
 * now (also when the agent was freed by an earlier end of the same call that left the device busy: the device freed
 * now makes the agent offerable).
 */
export async function endQueueCallsIn(db: pg.PoolClient, ends: readonly EndedQueueCall[]): Promise<string[]> {
  await freeDevices(
    db,
    ends.flatMap((end) => (end.deviceId === undefined ? [] : [end.deviceId])),
  );
  await endQueueCalls(db, ends);
  return queuesOfMembers(
    db,
    ends
      .filter((end) => end.wrapUpSecs === 0)
      .map((end) => ({ workspace_id: end.workspaceId, member_id: end.memberId })),
  );
}

/** Tells each queue that an agent of it may be offered a call now. */
async function announceQueues(db: Queryable, queueIds: readonly string[]): Promise<void> {
  for (const queueId of queueIds) await notify(db, { queueId, kind: 'agent' });
}

export type PersonSetOutcome =
  { outcome: 'changed'; previous: string } | { outcome: 'not_found' } | { outcome: 'unreachable' };

export interface PersonSetInput {
  workspaceId: string;
  memberId: string;
  state: PersonState;
  reason: string | null;
  actor: string;
}

/** `setStateByPerson` inside the caller's transaction (operation 58 runs it in its idempotent one). */
export async function changeStateByPerson(db: pg.PoolClient, input: PersonSetInput): Promise<PersonSetOutcome> {
  const found = await agentOf(db, input.workspaceId, input.memberId);
  if (found === undefined) return { outcome: 'not_found' };
  if (input.state === 'available' && !found.reachable) return { outcome: 'unreachable' };
  // The entry the agent is offered, locked before the agent (the order answerEntry takes them in).
  const early = found.entry_id === null ? undefined : await lockedEntry(db, found.entry_id);
  const before = await changeAgentState(db, input.workspaceId, input.memberId, {
    state: input.state,
    reason: input.reason,
    actor: input.actor,
  });
  if (before === undefined) return { outcome: 'not_found' };
  // Offered a caller: the entry goes back in line, in its place, unless another agent is offered it too. A
  // distribution that committed between the first read and the agent's lock offered another entry: that one is
  // locked now (the other order; PostgreSQL resolves the rare deadlock by failing one of the two transactions).
  const entry =
    before.previousEntryId === null
      ? undefined
      : before.previousEntryId === early?.id
        ? early
        : await lockedEntry(db, before.previousEntryId);
  if (before.previous === 'offered' && entry !== undefined && (await agentsOfEntry(db, entry.id)).length === 0) {
    await requeue(db, entry);
  }
  if (input.state === 'available') {
    await announceQueues(
      db,
      await queuesOfMembers(db, [{ workspace_id: input.workspaceId, member_id: input.memberId }]),
    );
  }
  return { outcome: 'changed', previous: before.previous };
}

/**
 * A person sets an agent's state (operation 58): `available` needs a live device (else `unreachable`); leaving
 * `offered` gives the entry back to the line first (it stays first: it keeps its place); `available` is announced
 * to the member's queues. From `wrap_up`, any state ends the wrap-up.
 */
export function setStateByPerson(pool: pg.Pool, input: PersonSetInput): Promise<PersonSetOutcome> {
  return inTransaction(pool, (db) => changeStateByPerson(db, input));
}

/**
 * The caller asked to be called back (the queue step's `offerCallback`): the entry keeps its place in line as
 * `callback` with the number to call. False when it is not waiting (offered, or gone): nothing changed.
 */
export async function requestCallback(pool: pg.Pool, entryId: string, number: string): Promise<boolean> {
  const result = await pool.query(
    `UPDATE queue_entries SET state = 'callback', callback_number = $2
      WHERE id = $1 AND state = 'waiting' AND left_at IS NULL`,
    [entryId, number],
  );
  return result.rowCount === 1;
}

/** The ids of the queues where entries this engine holds wait (its distributor's safety-net round). */
export async function queuesWithWaitingEntries(db: Queryable, engineOwner: string): Promise<string[]> {
  const result = await db.query<{ queue_id: string }>(
    `SELECT DISTINCT queue_id FROM queue_entries
      WHERE engine_owner = $1 AND state IN ('waiting', 'callback') AND left_at IS NULL`,
    [engineOwner],
  );
  return result.rows.map((row) => row.queue_id);
}

/**
 * Entries of calls this engine held before it restarted: they leave as `abandoned`; agents left `on_call` for an
 * entry it held (its call is gone with the engine) are `available` again, without wrap-up. Returns the entries.
 */
export async function abandonOwnedEntries(pool: pg.Pool, engineOwner: string, limit: number): Promise<number> {
  const owned = await pool.query<{ id: string }>(
    'SELECT id FROM queue_entries WHERE engine_owner = $1 AND left_at IS NULL',
    [engineOwner],
  );
  for (const { id } of owned.rows) await leaveQueue(pool, id, 'abandoned', limit);
  const onCall = await pool.query<{ id: string; workspace_id: string; member_id: string }>(
    `SELECT e.id, e.workspace_id, a.member_id FROM queue_entries e JOIN agent_states a ON a.entry_id = e.id
      WHERE e.engine_owner = $1 AND e.state = 'connected' AND a.state = 'on_call'`,
    [engineOwner],
  );
  await queueCallsEnded(
    pool,
    onCall.rows.map((row) => ({
      workspaceId: row.workspace_id,
      memberId: row.member_id,
      entryId: row.id,
      wrapUpSecs: 0,
    })),
  );
  return owned.rows.length;
}
