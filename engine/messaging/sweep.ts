/**
 * Every engine runs the message records' sweep (core/messages/sweep.ts, docs/messaging.md "Receiving") once at start
 * and then every minute: incomplete concatenated texts delivered after an hour, stale receipts and parts dropped.
 * Engines sweeping at once share the work (the sweep skips what another holds), so no leader is needed, and the
 * sweep runs whether or not any carrier has messaging settings (parts received before they were removed still
 * become messages). A sweep that fails is logged and tried again at the next period.
 */
import { EventEmitter } from 'node:events';
import type pg from 'pg';
import type { Log } from '../../core/log.ts';
import { type SweepOutcome, sweepMessages } from '../../core/messages/sweep.ts';

export interface MessagingSweepOptions {
  pool: pg.Pool;
  log: Pick<Log, 'info' | 'warn'>;
  /** How often it sweeps (default a minute). */
  everyMs?: number;
}

export class MessagingSweep extends EventEmitter<{ swept: [SweepOutcome] }> {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private closed = false;

  constructor(private readonly options: MessagingSweepOptions) {
    super();
  }

  start(): void {
    this.schedule(0);
  }

  private schedule(delayMs: number): void {
    if (this.closed) return;
    this.timer = setTimeout(() => {
      this.running = this.sweep().finally(() => {
        this.running = undefined;
        this.schedule(this.options.everyMs ?? 60_000);
      });
    }, delayMs);
    this.timer.unref();
  }

  private async sweep(): Promise<void> {
    try {
      const outcome = await sweepMessages(this.options.pool);
      if (outcome.incomplete + outcome.dropped + outcome.receipts > 0) {
        this.options.log.info({ ...outcome }, 'messages swept');
      }
      this.emit('swept', outcome);
    } catch (error) {
      if (!this.closed) this.options.log.warn({ err: error }, 'the message sweep failed; it runs again later');
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    await this.running;
  }
}
