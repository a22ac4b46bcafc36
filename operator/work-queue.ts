/**
 * The operator's rate-limited work queue (as client-go's): keys (resource names) wait here until a worker takes
 * them; a key is never worked on twice at once, a key added while it is being worked on runs again afterwards, a
 * key added many times before a worker takes it runs once, and a key whose work failed (rejected) comes back after a
 * backoff that doubles per failure (5 ms up to 5 minutes) until it succeeds.
 */
export interface WorkQueueOptions {
  /** Keys worked on at once. */
  concurrency: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Hears the number of keys waiting (ready or delayed) whenever it changes. */
  onDepth?: (depth: number) => void;
}

export class WorkQueue {
  private readonly ready: string[] = [];
  private readonly queued = new Set<string>();
  private readonly active = new Set<string>();
  /** Added again while active: runs once more when the current run ends. */
  private readonly dirty = new Set<string>();
  private readonly delayed = new Map<string, NodeJS.Timeout>();
  private readonly failures = new Map<string, number>();
  private closed = false;
  private readonly idle: Array<() => void> = [];

  constructor(
    private readonly work: (key: string) => Promise<void>,
    private readonly options: WorkQueueOptions,
  ) {}

  /** Queues `key` now, or after `delayMs` (an earlier add wins). */
  add(key: string, delayMs = 0): void {
    if (this.closed) return;
    if (delayMs > 0) {
      if (this.delayed.has(key) || this.queued.has(key)) return;
      const timer = setTimeout(() => {
        this.delayed.delete(key);
        this.add(key);
      }, delayMs);
      timer.unref();
      this.delayed.set(key, timer);
      this.reportDepth();
      return;
    }
    const timer = this.delayed.get(key);
    if (timer !== undefined) {
      clearTimeout(timer);
      this.delayed.delete(key);
    }
    if (this.active.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.ready.push(key);
    this.reportDepth();
    this.pump();
  }

  /** The work on `key` failed: it comes back after its backoff. */
  retry(key: string): void {
    const failures = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, failures);
    const base = this.options.baseDelayMs ?? 5;
    const max = this.options.maxDelayMs ?? 300_000;
    this.add(key, Math.min(max, base * 2 ** (failures - 1)));
  }

  /** The work on `key` succeeded: its backoff starts over. */
  forget(key: string): void {
    this.failures.delete(key);
  }

  get depth(): number {
    return this.ready.length + this.delayed.size;
  }

  /** Resolves when nothing is ready or being worked on (delayed keys may remain). */
  settled(): Promise<void> {
    if (this.ready.length === 0 && this.active.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  /** Stops taking keys and waits for the work under way. */
  async close(): Promise<void> {
    this.closed = true;
    for (const timer of this.delayed.values()) clearTimeout(timer);
    this.delayed.clear();
    this.ready.length = 0;
    this.queued.clear();
    await this.settled();
  }

  private reportDepth(): void {
    this.options.onDepth?.(this.depth);
  }

  private pump(): void {
    while (!this.closed && this.active.size < this.options.concurrency && this.ready.length > 0) {
      const key = this.ready.shift() as string;
      this.queued.delete(key);
      this.active.add(key);
      this.reportDepth();
      void this.work(key)
        .then(
          () => this.forget(key),
          () => this.retry(key),
        )
        .finally(() => {
          this.active.delete(key);
          if (this.dirty.delete(key)) this.add(key);
          if (this.ready.length === 0 && this.active.size === 0) {
            for (const resolve of this.idle.splice(0)) resolve();
          }
          this.pump();
        });
    }
  }
}
