/**
 * Where the engine's database sessions spend their time (bench/queue-agents.ts): pg_stat_activity sampled every
 * 50 ms for the service's sessions (application_name `switchboard`: the engine's pool, and the API's in the bench's
 * process, which has nothing to do once the agents signed in) on the bench's database that are not idle, counted by what they wait for: `idle in transaction` waiting for the client's next statement (round
 * trips: the engine's turn), the WAL flush of a commit, a lock (with the statement waiting), or running.
 */
import type pg from 'pg';

export interface DatabaseWaits {
  samples: number;
  /** Busy sessions seen, by what they were doing: "idle in transaction: Client/ClientRead", "active: IO/WALSync"... */
  byWait: Map<string, number>;
  /** Statements seen waiting for a lock, by their first 60 characters. */
  lockWaits: Map<string, number>;
}

/** Starts sampling; `stop` ends it and returns the counts. */
export function sampleDatabaseWaits(pool: pg.Pool, database: string): { stop(): Promise<DatabaseWaits> } {
  const waits: DatabaseWaits = { samples: 0, byWait: new Map(), lockWaits: new Map() };
  const add = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
  let running = true;
  const sampling = (async () => {
    while (running) {
      const rows = await pool
        .query<{ state: string; wait_type: string | null; wait: string | null; query: string }>(
          `SELECT state, wait_event_type AS wait_type, wait_event AS wait, left(query, 60) AS query
             FROM pg_stat_activity
            WHERE datname = $1 AND application_name = 'switchboard' AND state <> 'idle' AND pid <> pg_backend_pid()`,
          [database],
        )
        .then((result) => result.rows)
        .catch(() => []);
      waits.samples += 1;
      for (const row of rows) {
        add(waits.byWait, `${row.state}: ${row.wait_type ?? 'running'}${row.wait === null ? '' : `/${row.wait}`}`);
        if (row.wait_type === 'Lock') add(waits.lockWaits, row.query.replace(/\s+/g, ' '));
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  return {
    async stop() {
      running = false;
      await sampling;
      return waits;
    },
  };
}

/** The counts as lines: each kind of wait with its share of the busy sessions seen. */
export function describeWaits(waits: DatabaseWaits): string {
  const total = [...waits.byWait.values()].reduce((sum, count) => sum + count, 0);
  const share = (count: number) => `${((count / Math.max(total, 1)) * 100).toFixed(0)}%`;
  const sorted = (map: Map<string, number>) => [...map.entries()].sort((a, b) => b[1] - a[1]);
  return [
    `  ${waits.samples} samples, ${total} busy service sessions seen (${(total / Math.max(waits.samples, 1)).toFixed(1)} a sample):`,
    ...sorted(waits.byWait).map(([wait, count]) => `    ${share(count).padStart(4)} ${wait}`),
    ...sorted(waits.lockWaits)
      .slice(0, 5)
      .map(([query, count]) => `    waiting for a lock (${count}): ${query}`),
  ].join('\n');
}
