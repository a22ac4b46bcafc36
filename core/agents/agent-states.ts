/**
 * The `agent_states` table (docs/contact-center.md, "Agents"): each member's agent state. A member without a row is
 * `offline`. Every change is written with its `agent.state_changed` event (stream `agent:<memberId>`) in the same
 * transaction; a change to the same state and reason writes nothing.
 *
 * People set `available`, `away` and `offline` (operation 58, `setStateByPerson`); distribution and the queue step
 * move agents through `offered`, `on_call` and `wrap_up` (`changeAgentState`, `offerAgents` and `endQueueCalls`
 * inside their own transactions, core/queues/entries.ts and distribution.ts), and each engine ends wrap-ups that are
 * over (`endWrapUps`).
 *
 * Longer than 400 lines because the table keeps one home: the people's changes, distribution's, the calls' ends and
 * the live figures' reads share its rows and the rules of its one `UPDATE` (`updateAgents`); splitting them would
 * give it two.
 */
import type pg from 'pg';
import { inTransaction, type Queryable } from '../database.ts';
import { memberHasLiveDevice } from '../devices/devices.ts';
import { appendEvent, appendEvents } from '../events/outbox.ts';
import { keysetPage, type PageWindow } from '../rows.ts';

export const agentStates = ['offline', 'available', 'offered', 'on_call', 'wrap_up', 'away'] as const;
export type AgentState = (typeof agentStates)[number];
/** The states a person sets (operation 58). */
export const personStates = ['available', 'away', 'offline'] as const;
export type PersonState = (typeof personStates)[number];

/** Offers missed in a row that send an agent `away` (reason `missed_offers`). */
export const missedOffersLimit = 3;

export interface AgentRow {
  member_id: string;
  workspace_id: string;
  application_id: string;
  external_workspace_id: string;
  email: string;
  name: string | null;
  state: AgentState;
  reason: string | null;
  actor: string | null;
  changed_at: Date | null;
  idle_since: Date | null;
  missed_offers: number;
  last_offered_at: Date | null;
  calls_answered: string;
  entry_id: string | null;
  wrap_up_until: Date | null;
  /** Whether the member has a device that can ring now (free or not). */
  reachable: boolean;
  cursor_ts: string;
}

const columns = `m.id AS member_id, m.workspace_id, w.application_id, w.external_workspace_id, m.email, m.name,
  coalesce(a.state, 'offline') AS state, a.reason, a.actor, a.changed_at, a.idle_since,
  coalesce(a.missed_offers, 0) AS missed_offers, a.last_offered_at, coalesce(a.calls_answered, 0) AS calls_answered,
  a.entry_id, a.wrap_up_until, ${memberHasLiveDevice('m.id', false)} AS reachable,
  m.created_at::text AS cursor_ts`;
const from = `FROM members m JOIN workspaces w ON w.id = m.workspace_id
  LEFT JOIN agent_states a ON a.member_id = m.id`;

/** The workspace's member as an agent, undefined when the workspace has no such member. */
export async function agentOf(db: Queryable, workspaceId: string, memberId: string): Promise<AgentRow | undefined> {
  const result = await db.query<AgentRow>(`SELECT ${columns} ${from} WHERE m.id = $1 AND m.workspace_id = $2`, [
    memberId,
    workspaceId,
  ]);
  return result.rows[0];
}

/** The workspace's members as agents, a page in the members' order (newest first). */
export function listAgents(
  db: Queryable,
  workspaceId: string,
  window: PageWindow,
): Promise<(AgentRow & { id: string })[]> {
  const select = `SELECT * FROM (SELECT ${columns}, m.id, m.created_at ${from}) AS listed`;
  return keysetPage<AgentRow & { id: string }>(
    db,
    { select, where: 'workspace_id = $1', params: [workspaceId] },
    window,
  );
}

/** What a change sets besides the state; absent fields are kept. */
export interface StateChange {
  state: AgentState;
  reason?: string | null;
  /** `member:<id>`, `application` or `system`. */
  actor: string;
  /** The entry the agent is offered or on a call for (required for `offered` and `on_call`). */
  entryId?: string | null;
  /** Seconds of wrap-up (for `wrap_up`). */
  wrapUpSecs?: number;
  /** An offer was missed (+1) or answered (reset to 0). */
  missedOffers?: 'missed' | 'reset';
  /** The agent was offered a call now (round robin's order). */
  offeredNow?: boolean;
  /** The agent answered a queue call (fewest calls' count). */
  answered?: boolean;
}

export interface ChangedAgent {
  previous: AgentState;
  /** The entry the agent was offered or on a call for before the change, read under the row's lock. */
  previousEntryId: string | null;
  agent: AgentRow;
  /** Whether anything changed (and an event was written). */
  changed: boolean;
}

/** The `agent.state_changed` event of a change to `agent` from `previous`, written in the change's transaction. */
function stateChanged(agent: AgentRow, previous: AgentState) {
  return {
    type: 'agent.state_changed' as const,
    streamId: agent.member_id,
    applicationId: agent.application_id,
    workspaceId: agent.workspace_id,
    externalWorkspaceId: agent.external_workspace_id,
    fields: {
      // The specification requires it; a member's id in the application's world is its email.
      externalUserId: agent.email.slice(0, 200),
      agent: {
        memberId: agent.member_id,
        state: agent.state,
        previousState: previous,
        reason: agent.reason,
        actor: agent.actor,
        changedAt: (agent.changed_at as Date).toISOString(),
      },
    },
  };
}

/**
 * Changes a member's agent state inside the caller's transaction `db`: the row made if missing and locked, the
 * change written with its `agent.state_changed` event. Undefined when the workspace has no such member. A change to
 * the same state with the same reason writes nothing.
 */
export async function changeAgentState(
  db: pg.PoolClient,
  workspaceId: string,
  memberId: string,
  change: StateChange,
): Promise<ChangedAgent | undefined> {
  await db.query(
    `INSERT INTO agent_states (member_id, workspace_id, state)
     SELECT id, workspace_id, 'offline' FROM members WHERE id = $1 AND workspace_id = $2
     ON CONFLICT (member_id) DO NOTHING`,
    [memberId, workspaceId],
  );
  const locked = await db.query<{ state: AgentState; reason: string | null; entry_id: string | null }>(
    'SELECT state, reason, entry_id FROM agent_states WHERE member_id = $1 AND workspace_id = $2 FOR UPDATE',
    [memberId, workspaceId],
  );
  const current = locked.rows[0];
  if (current === undefined) return undefined;
  const reason = change.reason === undefined ? null : change.reason;
  const sameState = current.state === change.state && current.reason === reason;
  if (sameState && change.missedOffers === undefined && !change.answered) {
    const agent = (await agentOf(db, workspaceId, memberId)) as AgentRow;
    return { previous: current.state, previousEntryId: current.entry_id, agent, changed: false };
  }
  const [agent] = (await updateAgents(db, [{ workspaceId, memberId, change, sameState }])) as [AgentRow];
  if (!sameState) await appendEvent(db, stateChanged(agent, current.state));
  return { previous: current.state, previousEntryId: current.entry_id, agent, changed: !sameState };
}

/** One agent's change for `updateAgents`. */
interface AgentUpdate {
  workspaceId: string;
  memberId: string;
  change: StateChange;
  /** State and reason stay, so `changed_at` does. */
  sameState: boolean;
  /** Only if the agent is `on_call` for that entry. */
  onCallFor?: string;
}

/**
 * Writes each change to its member's row, in one statement: the agent rules (idle since, wrap-up, counts) live
 * here only. The agents as `agentOf` shows them, from the update itself, in no particular order; those that did not
 * change (no row, or not on a call for `onCallFor`) are not in it.
 */
async function updateAgents(db: pg.PoolClient, updates: readonly AgentUpdate[]): Promise<AgentRow[]> {
  if (updates.length === 0) return [];
  // In member order, as the rows are then locked: two batches that share agents never wait on each other in a circle.
  const ordered = [...updates].sort((a, b) => (a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0));
  const column = <T>(value: (update: AgentUpdate) => T) => ordered.map(value);
  const updated = await db.query<AgentRow>({
    name: 'switchboard-update-agents',
    text: `UPDATE agent_states a SET
       state = u.state, reason = u.reason, actor = u.actor, entry_id = u.entry_id,
       changed_at = CASE WHEN u.same_state THEN a.changed_at ELSE clock_timestamp() END,
       idle_since = CASE WHEN u.state = 'available' AND (a.state <> 'available' OR a.idle_since IS NULL)
                         THEN clock_timestamp() ELSE a.idle_since END,
       wrap_up_until = CASE WHEN u.state = 'wrap_up' THEN clock_timestamp() + make_interval(secs => u.wrap_up_secs) END,
       missed_offers = CASE u.missed_offers WHEN 'missed' THEN a.missed_offers + 1 WHEN 'reset' THEN 0
                       ELSE a.missed_offers END,
       last_offered_at = CASE WHEN u.offered_now THEN clock_timestamp() ELSE a.last_offered_at END,
       calls_answered = a.calls_answered + CASE WHEN u.answered THEN 1 ELSE 0 END
     FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::uuid[], $7::float8[], $8::text[],
                 $9::boolean[], $10::boolean[], $11::boolean[], $12::uuid[])
            AS u (member_id, workspace_id, state, reason, actor, entry_id, wrap_up_secs, missed_offers, offered_now,
                  answered, same_state, on_call_for),
          members m JOIN workspaces w ON w.id = m.workspace_id
     WHERE a.member_id = u.member_id AND a.workspace_id = u.workspace_id AND m.id = a.member_id
       AND (u.on_call_for IS NULL OR (a.state = 'on_call' AND a.entry_id = u.on_call_for))
     RETURNING ${columns}`,
    values: [
      column((update) => update.memberId),
      column((update) => update.workspaceId),
      column((update) => update.change.state),
      column((update) => update.change.reason ?? null),
      column((update) => update.change.actor),
      column(({ change }) =>
        change.state === 'offered' || change.state === 'on_call' ? (change.entryId ?? null) : null,
      ),
      column((update) => update.change.wrapUpSecs ?? 0),
      column((update) => update.change.missedOffers ?? null),
      column((update) => update.change.offeredNow === true),
      column((update) => update.change.answered === true),
      column((update) => update.sameState),
      column((update) => update.onCallFor ?? null),
    ],
  });
  return updated.rows;
}

/**
 * The queue's members that may be offered a call now, locked (`FOR UPDATE SKIP LOCKED`: one another transaction
 * holds is passed over, never waited for): `available`, with a free live device, in the strategy's order, at most
 * `limit`. Inside the distribution's transaction (core/queues/entries.ts).
 */
export async function offerableAgents(
  db: pg.PoolClient,
  queue: { workspaceId: string; memberIds: readonly string[]; strategy: string },
  limit: number,
): Promise<string[]> {
  const order =
    queue.strategy === 'round_robin'
      ? 'a.last_offered_at ASC NULLS FIRST, a.idle_since, a.member_id'
      : queue.strategy === 'fewest_calls'
        ? 'a.calls_answered, a.idle_since, a.member_id'
        : 'a.idle_since, a.member_id';
  const result = await db.query<{ member_id: string }>(
    `SELECT a.member_id FROM agent_states a
      WHERE a.member_id = ANY ($1::uuid[]) AND a.workspace_id = $2 AND a.state = 'available'
        AND ${memberHasLiveDevice('a.member_id', true)}
      ORDER BY ${order}
      LIMIT $3
      FOR UPDATE OF a SKIP LOCKED`,
    [[...queue.memberIds], queue.workspaceId, limit],
  );
  return result.rows.map((row) => row.member_id);
}

/**
 * Distribution's offers (core/queues/distribution.ts) in one statement: each agent `offered` the entry paired with
 * it, as `changeAgentState` would make it, with its `agent.state_changed` event. Only for agents `offerableAgents`
 * locked in the same transaction (so known `available`); one that is not is left out of the answer, and its entry
 * must not be offered. Returns the agents offered, in no particular order.
 */
export async function offerAgents(
  db: pg.PoolClient,
  workspaceId: string,
  offers: readonly { memberId: string; entryId: string }[],
): Promise<AgentRow[]> {
  if (offers.length === 0) return [];
  const updated = await db.query<AgentRow>(
    `UPDATE agent_states a SET state = 'offered', reason = NULL, actor = 'system', entry_id = o.entry_id,
            changed_at = clock_timestamp(), wrap_up_until = NULL, last_offered_at = clock_timestamp()
       FROM unnest($2::uuid[], $3::uuid[]) AS o(member_id, entry_id), members m JOIN workspaces w ON w.id = m.workspace_id
      WHERE a.member_id = o.member_id AND a.workspace_id = $1 AND a.state = 'available' AND m.id = a.member_id
      RETURNING ${columns}`,
    [workspaceId, offers.map((offer) => offer.memberId), offers.map((offer) => offer.entryId)],
  );
  // The events in one statement: a burst of freed agents is offered in one commit, not one round trip per agent.
  await appendEvents(
    db,
    updated.rows.map((agent) => stateChanged(agent, 'available')),
  );
  return updated.rows;
}

/** An agent's queue call that is over: the agent, the entry they were on a call for, the queue's wrap-up. */
export interface QueueCallEnd {
  workspaceId: string;
  memberId: string;
  entryId: string;
  wrapUpSecs: number;
}

/**
 * Agents' queue calls are over, in the caller's transaction: each agent from `on_call` for its `entryId` to
 * `wrap_up` for its `wrapUpSecs` (at 0, `available`), in one statement, with their events in another. The agents
 * changed; one not on a call for that entry (they set another state meanwhile, or never answered it) is not in it.
 */
export async function endQueueCalls(db: pg.PoolClient, ends: readonly QueueCallEnd[]): Promise<AgentRow[]> {
  const agents = await updateAgents(
    db,
    ends.map(({ workspaceId, memberId, entryId, wrapUpSecs }) => {
      const state = wrapUpSecs > 0 ? 'wrap_up' : 'available';
      return {
        workspaceId,
        memberId,
        change: { state, actor: 'system', wrapUpSecs },
        sameState: false,
        onCallFor: entryId,
      };
    }),
  );
  await appendEvents(
    db,
    agents.map((agent) => stateChanged(agent, 'on_call')),
  );
  return agents;
}

/** The agents offered or on a call for an entry, locked. */
export async function agentsOfEntry(
  db: pg.PoolClient,
  entryId: string,
): Promise<{ member_id: string; state: AgentState }[]> {
  const result = await db.query<{ member_id: string; state: AgentState }>(
    'SELECT member_id, state FROM agent_states WHERE entry_id = $1 ORDER BY member_id FOR UPDATE',
    [entryId],
  );
  return result.rows;
}

/** The members offered an entry now (the engine holding it rings them), in id order. */
export async function agentsOffered(db: Queryable, entryId: string): Promise<string[]> {
  const result = await db.query<{ member_id: string }>(
    "SELECT member_id FROM agent_states WHERE entry_id = $1 AND state = 'offered' ORDER BY member_id",
    [entryId],
  );
  return result.rows.map((row) => row.member_id);
}

/**
 * Ends the wrap-ups that are over: those agents are `available` again (actor `system`), in one transaction; rows
 * another transaction holds (another engine ending them, a person setting a state) are passed over. Returns how many.
 */
export function endWrapUps(pool: pg.Pool): Promise<number> {
  return inTransaction(pool, async (db) => {
    const due = await db.query<{ member_id: string; workspace_id: string }>(
      `SELECT member_id, workspace_id FROM agent_states WHERE state = 'wrap_up' AND wrap_up_until <= clock_timestamp()
        ORDER BY wrap_up_until LIMIT 500 FOR UPDATE SKIP LOCKED`,
    );
    for (const { member_id, workspace_id } of due.rows) {
      await changeAgentState(db, workspace_id, member_id, { state: 'available', reason: null, actor: 'system' });
    }
    return due.rows.length;
  });
}

/** One queue's agents in one state (the live figures, operation 81; docs/contact-center.md, "Live figures"). */
export interface QueueAgentCount {
  queue_id: string;
  name: string;
  /** Null for the one row of a queue without members. */
  state: AgentState | null;
  agents: number;
}

/**
 * The agents of queues by state: the workspace's queues (ordered by name), or the queues named. A member without a
 * state is `offline`; a queue without members gives one row of state null. One statement, from the queues' rows
 * (by workspace or id) to each member's row and state by key (primary keys).
 */
export async function agentCountsByQueue(
  db: Queryable,
  queues: { workspaceId: string } | { queueIds: readonly string[] },
): Promise<QueueAgentCount[]> {
  const byWorkspace = 'workspaceId' in queues;
  // A named (prepared) statement: planned once per connection, as wallboards ask every few seconds. The workspace
  // is compared with IS NOT DISTINCT FROM (both are never null) so that members are looked up by primary key and
  // checked after, instead of every member of the workspace being read for each queue.
  const result = await db.query<QueueAgentCount>({
    name: byWorkspace ? 'agent-counts-of-workspace' : 'agent-counts-of-queues',
    text: `SELECT q.id AS queue_id, q.name, m.state, count(m.id)::int AS agents
       FROM queues q
       LEFT JOIN LATERAL (SELECT mm.id, coalesce(a.state, 'offline') AS state
                            FROM members mm LEFT JOIN agent_states a ON a.member_id = mm.id
                           WHERE mm.id = ANY (q.member_ids)
                             AND mm.workspace_id IS NOT DISTINCT FROM q.workspace_id) AS m ON true
      WHERE ${byWorkspace ? 'q.workspace_id = $1' : 'q.id = ANY ($1::uuid[])'}
      GROUP BY q.id, q.name, m.state
      ORDER BY q.name, q.id`,
    values: [byWorkspace ? queues.workspaceId : [...queues.queueIds]],
  });
  return result.rows;
}

/**
 * The queues, of every workspace, naming at least one agent who is not `offline`, those with the most such agents
 * first, at most `limit` (the Prometheus gauges' choice of queues, api/queue-gauges.ts). From the agents' rows that
 * are not offline (index `agent_states_signed_in`) to their workspaces' queues (`queues_page`), whose members' rows
 * are read by key: workspaces where everyone is offline are never read.
 */
export async function queuesWithAgentsOn(db: Queryable, limit: number): Promise<string[]> {
  const result = await db.query<{ queue_id: string }>(
    `SELECT q.id AS queue_id
       FROM (SELECT DISTINCT workspace_id FROM agent_states WHERE state <> 'offline') AS w
       JOIN queues q ON q.workspace_id = w.workspace_id
       CROSS JOIN LATERAL (SELECT count(*) AS agents FROM agent_states a
                            WHERE a.member_id = ANY (q.member_ids) AND a.state <> 'offline') AS signed_in
      WHERE signed_in.agents > 0
      ORDER BY signed_in.agents DESC, q.id
      LIMIT $1`,
    [limit],
  );
  return result.rows.map((row) => row.queue_id);
}
