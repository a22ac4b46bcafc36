/**
 * Requests that wait for a change with no database connection held: one listener per API process on a channel
 * wakes the waiters of the key a notice names (a call, a device). A waiter is an entry in a map keyed by that key and
 * one timer; woken, its request reads again, so a notice is only a hint. While the listener is down (notices may be
 * missed) waiters look again every second instead, and all of them look again when it is back. Thousands of waiters
 * cost thousands of map entries, not connections.
 */
import { ChangeListener } from '../core/change-notices.ts';

/** How often a waiter looks again while notices cannot be heard. */
const unheardPollMs = 1_000;

export interface NoticeWatch {
  /**
   * Resolves once what is watched may have changed since the last call (a notice, a reconnection), after `ms`, when
   * `signal` aborts (the client went away) or when the process stops waiting (`stopWaiting`).
   */
  next(ms: number, signal?: AbortSignal): Promise<void>;
  /** True once the process stopped waiting: answer with what there is. */
  readonly ended: boolean;
  stop(): void;
}

class Waiter implements NoticeWatch {
  private woken = false;
  private wake: (() => void) | undefined;

  constructor(
    private readonly waiters: NoticeWaiters,
    private readonly stopWatching: (waiter: Waiter) => void,
  ) {}

  get ended(): boolean {
    return this.waiters.stopped;
  }

  signal(): void {
    this.woken = true;
    this.wake?.();
  }

  async next(ms: number, signal?: AbortSignal): Promise<void> {
    if (!this.woken && !this.ended && signal?.aborted !== true) {
      const bound = this.waiters.listening ? ms : Math.min(ms, unheardPollMs);
      let timer: NodeJS.Timeout | undefined;
      let onAbort: (() => void) | undefined;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        timer = setTimeout(resolve, bound);
        onAbort = resolve;
        signal?.addEventListener('abort', onAbort, { once: true });
      });
      clearTimeout(timer);
      if (onAbort !== undefined) signal?.removeEventListener('abort', onAbort);
      this.wake = undefined;
    }
    this.woken = false;
  }

  stop(): void {
    this.stopWatching(this);
  }
}

export class NoticeWaiters {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly listener: ChangeListener;
  private stoppedWaiting = false;

  /** `keyOf` names the key (or keys) a notice's payload wakes, or undefined for a payload to ignore. */
  constructor(
    databaseUrl: string,
    channel: string,
    keyOf: (payload: string) => string | readonly string[] | undefined,
    log: (message: string) => void,
  ) {
    this.listener = new ChangeListener(
      databaseUrl,
      channel,
      (payload) => {
        const keys = keyOf(payload);
        for (const key of typeof keys === 'string' ? [keys] : (keys ?? [])) {
          for (const waiter of this.waiters.get(key) ?? []) waiter.signal();
        }
      },
      () => this.wakeAll(),
      log,
    );
  }

  /** True once `stopWaiting` was called. */
  get stopped(): boolean {
    return this.stoppedWaiting;
  }

  get listening(): boolean {
    return this.listener.listening;
  }

  /** How many requests wait (a gauge for tests and metrics). */
  get size(): number {
    let count = 0;
    for (const set of this.waiters.values()) count += set.size;
    return count;
  }

  start(): Promise<void> {
    return this.listener.start();
  }

  /** The process is closing: every waiter answers now with what it has, and none waits again. */
  stopWaiting(): void {
    this.stoppedWaiting = true;
    this.wakeAll();
  }

  /** Stops listening; waiters then look again every second until their own time is up (see `stopWaiting`). */
  close(): Promise<void> {
    return this.listener.close();
  }

  /** True while a request watches `key`. */
  watching(key: string): boolean {
    return this.waiters.has(key);
  }

  /** Starts watching `key`: read after this, so that a change between the read and the wait is not missed. */
  watch(key: string): NoticeWatch {
    const set = this.waiters.get(key) ?? new Set();
    this.waiters.set(key, set);
    const waiter = new Waiter(this, (gone) => {
      set.delete(gone);
      if (set.size === 0 && this.waiters.get(key) === set) this.waiters.delete(key);
    });
    set.add(waiter);
    return waiter;
  }

  private wakeAll(): void {
    for (const set of this.waiters.values()) for (const waiter of set) waiter.signal();
  }
}
