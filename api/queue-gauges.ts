/**
 * The queue gauges on the process registry (`/metrics`; docs/contact-center.md, "Live figures"): the figures of
 * operation 81 for the queues of every workspace, read from PostgreSQL when scraped (at most once a second; scrapes
 * meanwhile share the last read), so every API process reports the same values: aggregate with `max`, not `sum`.
 *
 * Cardinality is bounded: one label, `queue` (its id; names change and may repeat), and at most `queueLimit` queues,
 * those that are active: entries still in them (most first), then agents not offline (most first). A quiet queue
 * (nobody waiting, every agent offline) has no series; its series go when it becomes quiet.
 * `switchboard_queue_gauges_capped` is 1 when more queues were active than the limit.
 */
import type pg from 'pg';
import { Gauge, type Registry } from 'prom-client';
import { type AgentState, agentCountsByQueue, agentStates, queuesWithAgentsOn } from '../core/agents/agent-states.ts';
import { queuesWithEntries } from '../core/queues/figures.ts';

/** The most queues the gauges report: 8 series each (waiting, longest wait, six agent states). */
export const queueLimit = 200;
const readEveryMs = 1_000;

interface QueueSnapshot {
  waiting: number;
  longestWaitSecs: number;
  agents: Map<AgentState, number>;
}

interface Snapshot {
  queues: Map<string, QueueSnapshot>;
  capped: boolean;
}

async function readSnapshot(pool: pg.Pool): Promise<Snapshot> {
  // One more than the limit from each: more than `queueLimit` ids in all means some were left out.
  const [withEntries, withAgents] = await Promise.all([
    queuesWithEntries(pool, queueLimit + 1),
    queuesWithAgentsOn(pool, queueLimit + 1),
  ]);
  const ids = [...new Set([...withEntries.map((queue) => queue.queue_id), ...withAgents])];
  const chosen = ids.slice(0, queueLimit);
  const queues = new Map<string, QueueSnapshot>(
    chosen.map((id) => [id, { waiting: 0, longestWaitSecs: 0, agents: new Map() }]),
  );
  for (const entry of withEntries) {
    const queue = queues.get(entry.queue_id);
    if (queue === undefined) continue;
    queue.waiting = entry.waiting;
    queue.longestWaitSecs = entry.longest_wait_secs;
  }
  for (const row of await agentCountsByQueue(pool, { queueIds: chosen })) {
    if (row.state !== null) queues.get(row.queue_id)?.agents.set(row.state, row.agents);
  }
  return { queues, capped: ids.length > queueLimit };
}

export function registerQueueGauges(registry: Registry, pool: pg.Pool, warn: (error: unknown) => void): void {
  let reading: Promise<Snapshot> | undefined;
  let readAt = 0;
  let last: Snapshot = { queues: new Map(), capped: false };
  const read = (): Promise<Snapshot> => {
    if (reading === undefined || Date.now() - readAt > readEveryMs) {
      readAt = Date.now();
      reading = readSnapshot(pool).then(
        (snapshot) => (last = snapshot),
        (error: unknown) => {
          warn(error);
          return last;
        },
      );
    }
    return reading;
  };
  const registers = [registry];
  new Gauge({
    name: 'switchboard_queue_waiting',
    help: 'Entries still in the queue (waiting, offered to an agent, or kept as a callback), by queue id',
    labelNames: ['queue'],
    registers,
    async collect() {
      const snapshot = await read();
      this.reset();
      for (const [queue, figures] of snapshot.queues) this.set({ queue }, figures.waiting);
    },
  });
  new Gauge({
    name: 'switchboard_queue_longest_wait_seconds',
    help: 'Seconds since the oldest entry still in the queue entered it (0 when none), by queue id',
    labelNames: ['queue'],
    registers,
    async collect() {
      const snapshot = await read();
      this.reset();
      for (const [queue, figures] of snapshot.queues) this.set({ queue }, figures.longestWaitSecs);
    },
  });
  new Gauge({
    name: 'switchboard_queue_agents',
    help: "The queue's members by agent state (offline, available, offered, on_call, wrap_up, away), by queue id",
    labelNames: ['queue', 'state'],
    registers,
    async collect() {
      const snapshot = await read();
      this.reset();
      for (const [queue, figures] of snapshot.queues) {
        for (const state of agentStates) {
          this.set({ queue, state }, figures.agents.get(state) ?? 0);
        }
      }
    },
  });
  new Gauge({
    name: 'switchboard_queue_gauges_capped',
    help: `1 when more than ${queueLimit} queues were active and the queue gauges left some out`,
    registers,
    async collect() {
      this.set((await read()).capped ? 1 : 0);
    },
  });
}
