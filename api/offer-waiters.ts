/**
 * Long-polls of devices' offers (operation 63, docs/phones.md "Offers") waiting with no database connection held:
 * one listener per API process on `offerChannel`, where every change of an offer is announced with its device
 * (core/devices/offers.ts), wakes the waiters of that device. A waiter is an entry in a map keyed by device and one
 * timer; woken, its request reads again with one short query, so a notice is only a hint. While the listener is down
 * (notices may be missed) waiters look again every second instead, and all of them look again when it is back.
 * Thousands of waiters cost thousands of map entries, not connections.
 */
import { ChangeListener, offerChannel } from '../core/change-notices.ts';
import { parseOfferNotice } from '../core/devices/offers.ts';

/** How often a waiter looks again while notices cannot be heard. */
const unheardPollMs = 1_000;

export interface OfferWatch {
  /**
   * Resolves once the device's offers may have changed since the last call (a notice, a reconnection), after `ms`,
   * when `signal` aborts (the client went away) or when the process stops waiting (it is closing).
   */
  next(ms: number, signal?: AbortSignal): Promise<void>;
  /** True once the process stopped waiting: answer with what there is. */
  readonly ended: boolean;
  stop(): void;
}

class Waiter implements OfferWatch {
  private woken = false;
  private wake: (() => void) | undefined;

  constructor(
    private readonly waiters: OfferWaiters,
    private readonly deviceId: string,
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
    this.waiters.forget(this.deviceId, this);
  }
}

export class OfferWaiters {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly listener: ChangeListener;
  stopped = false;

  constructor(databaseUrl: string, log: (message: string) => void) {
    this.listener = new ChangeListener(
      databaseUrl,
      offerChannel,
      (payload) => {
        const notice = parseOfferNotice(payload);
        if (notice === undefined) return;
        for (const waiter of this.waiters.get(notice.deviceId) ?? []) waiter.signal();
      },
      () => this.wakeAll(),
      log,
    );
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
    this.stopped = true;
    this.wakeAll();
  }

  close(): Promise<void> {
    this.stopWaiting();
    return this.listener.close();
  }

  /** Starts watching a device's offers: read them after this, so that an offer between the read and the wait is not missed. */
  watch(deviceId: string): OfferWatch {
    const waiter = new Waiter(this, deviceId);
    const set = this.waiters.get(deviceId) ?? new Set();
    set.add(waiter);
    this.waiters.set(deviceId, set);
    return waiter;
  }

  forget(deviceId: string, waiter: Waiter): void {
    const set = this.waiters.get(deviceId);
    set?.delete(waiter);
    if (set?.size === 0) this.waiters.delete(deviceId);
  }

  private wakeAll(): void {
    for (const set of this.waiters.values()) for (const waiter of set) waiter.signal();
  }
}
