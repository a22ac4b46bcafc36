/**
 * What this API process stored per idempotency scope and has not yet added to `idempotency_counts` (docs/foundation.md,
 * "Idempotency"): answers are counted after their commit, here, and added to the table about once a second in one
 * statement for every scope, so that no mutation writes a counter row (a hot row for a busy scope) in its own
 * transaction. A scope's check reads the table and adds what is still here. Counts not yet added when a process dies
 * are lost: its scopes may store up to a second's answers more.
 */
import type pg from 'pg';
import { addCounts, type ScopeCount, type ScopeUsage } from '../core/idempotency/records.ts';

const flushEveryMs = 1_000;

export class AnswerTally {
  private waiting = new Map<string, ScopeUsage>();
  /** What a flush is adding now: still counted here until its statement has committed. */
  private adding = new Map<string, ScopeUsage>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly onError: (error: unknown) => void,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.flush(), flushEveryMs).unref();
  }

  /** One answer of `bytes` (as stored) committed in `scope`. */
  add(scope: string, bytes: number): void {
    const usage = this.waiting.get(scope) ?? { answers: 0, bytes: 0 };
    usage.answers += 1;
    usage.bytes += bytes;
    this.waiting.set(scope, usage);
  }

  /** What the scope stored here and the table does not have yet. */
  pending(scope: string): ScopeUsage {
    const waiting = this.waiting.get(scope);
    const adding = this.adding.get(scope);
    return {
      answers: (waiting?.answers ?? 0) + (adding?.answers ?? 0),
      bytes: (waiting?.bytes ?? 0) + (adding?.bytes ?? 0),
    };
  }

  /** Adds what waits to the table; on failure it waits for the next time. */
  flush(): Promise<void> {
    this.flushing ??= (async () => {
      if (this.waiting.size === 0) return;
      this.adding = this.waiting;
      this.waiting = new Map();
      const counts: ScopeCount[] = [...this.adding].map(([scope, usage]) => ({ scope, ...usage }));
      try {
        await addCounts(this.pool, counts);
      } catch (error) {
        for (const count of counts) {
          const usage = this.waiting.get(count.scope) ?? { answers: 0, bytes: 0 };
          this.waiting.set(count.scope, { answers: usage.answers + count.answers, bytes: usage.bytes + count.bytes });
        }
        this.onError(error);
      }
    })().finally(() => {
      this.adding = new Map();
      this.flushing = undefined;
    });
    return this.flushing;
  }

  /** Stops the timer and adds what waits. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flushing;
    await this.flush();
  }
}
