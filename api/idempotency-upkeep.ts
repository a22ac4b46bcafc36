/**
 * The upkeep of the idempotency records (docs/foundation.md, "Idempotency"), by each API process at start and every
 * 10 minutes: answers still in clear text sealed, records past their retention purged with their hours' counts.
 */
import type { Queryable } from '../core/database.ts';
import { clearRecords, purgeExpiredCounts, purgeExpiredRecords, sealRecords } from '../core/idempotency/records.ts';
import { type AnswerStore, sealAnswer } from './idempotency.ts';

const batchSize = 5_000;
const upkeepEveryMs = 10 * 60_000;

/**
 * Seals the answers still stored in clear text (written before answers were sealed, or by a process of that version
 * during a rolling upgrade), a batch per statement, until none is left. Each is sealed only if unchanged since read.
 */
export async function sealClearAnswers(store: AnswerStore, signal?: AbortSignal): Promise<number> {
  let sealed = 0;
  while (signal?.aborted !== true) {
    const batch = await clearRecords(store.pool, batchSize);
    if (batch.length === 0) break;
    const updated = await sealRecords(
      store.pool,
      batch,
      batch.map((row) => sealAnswer(store, row.scope, row.key, row.status_code, row.response_body)),
    );
    sealed += updated;
    // A short batch was the last; a batch that sealed nothing changed under us (the next run sees it).
    if (batch.length < batchSize || updated === 0) break;
  }
  return sealed;
}

/** Deletes the records past their retention, a batch per statement, until none is left; then their hours' counts. */
export async function purgeIdempotencyRecords(db: Queryable, signal?: AbortSignal): Promise<number> {
  let purged = 0;
  while (signal?.aborted !== true) {
    const count = await purgeExpiredRecords(db, batchSize);
    purged += count;
    if (count < batchSize) break;
  }
  if (signal?.aborted !== true) await purgeExpiredCounts(db);
  return purged;
}

/**
 * The API process's upkeep of the records, at start and every 10 minutes: seal what is still in clear text, then
 * purge what has expired. Closing stops it between two statements.
 */
export class IdempotencyUpkeep {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private readonly stopping = new AbortController();

  constructor(
    private readonly store: AnswerStore,
    private readonly onError: (error: unknown) => void,
  ) {}

  start(): void {
    void this.run();
    this.timer = setInterval(() => void this.run(), upkeepEveryMs).unref();
  }

  run(): Promise<void> {
    const { signal } = this.stopping;
    this.running ??= (async () => {
      await sealClearAnswers(this.store, signal);
      await purgeIdempotencyRecords(this.store.pool, signal);
    })()
      .catch((error: unknown) => this.onError(error))
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    this.stopping.abort();
    await this.running;
  }
}
