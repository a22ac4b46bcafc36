/**
 * Leadership through a PostgreSQL session-level advisory lock held on a connection of its own: the process holding
 * the lock leads; the others try again every `retryMs`. The lock lives as long as that connection, so a process that
 * dies, or whose connection is cut, lets it go, and `lost` tells the leader so that it steps down. With `checkMs`, the
 * leader also checks its connection that often (one that silently went is found). The operator's leadership without
 * a cluster (operator/operator.ts) and each carrier's SMPP leadership (engine/messaging/leadership.ts) are this one.
 */
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import { tryAdvisoryLock } from './database.ts';

export interface AdvisoryLeadershipOptions {
  databaseUrl: string;
  /** The lock's key (`pg_try_advisory_lock`'s bigint, as a number or decimal text). */
  key: number | string;
  /** The lock connection's `application_name` (who leads shows in pg_stat_activity). */
  applicationName: string;
  retryMs: number;
  checkMs?: number;
}

export class AdvisoryLeadership {
  private client: pg.Client | undefined;
  /** Resolves when the lead taken by the last `acquire` ends without `release`. */
  lost: Promise<void> = new Promise(() => {});

  constructor(private readonly options: AdvisoryLeadershipOptions) {}

  /** Resolves true once this process leads; false when `signal` aborts first. */
  async acquire(signal: AbortSignal): Promise<boolean> {
    const { databaseUrl, key, applicationName, retryMs, checkMs } = this.options;
    while (!signal.aborted) {
      const client = new pg.Client({
        connectionString: databaseUrl,
        application_name: applicationName,
        ...(checkMs === undefined ? {} : { keepAlive: true, query_timeout: Math.max(checkMs, 5_000) }),
      });
      let dropped = () => {};
      const lost = new Promise<void>((resolve) => {
        dropped = resolve;
      });
      // The lock goes with the connection: its end is the end of the lead.
      client.on('error', () => dropped());
      client.on('end', () => dropped());
      try {
        await client.connect();
        if ((await tryAdvisoryLock(client, key)) && !signal.aborted) {
          this.client = client;
          const check =
            checkMs === undefined
              ? undefined
              : setInterval(() => {
                  client.query('SELECT 1').catch(() => {
                    dropped();
                    void client.end().catch(() => {});
                  });
                }, checkMs);
          check?.unref();
          this.lost = lost.then(() => {
            clearInterval(check);
            if (this.client === client) this.client = undefined;
          });
          return true;
        }
      } catch {
        // The database is away for a moment: try again.
      }
      await client.end().catch(() => {});
      await delay(retryMs, undefined, { signal, ref: false }).catch(() => {});
    }
    return false;
  }

  /** Lets go of the lead (ends the lock's connection). */
  async release(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}
