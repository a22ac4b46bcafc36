/**
 * Waiting for calls to end with no database connection held (a hangup waits for the engine, docs/calls.md): one
 * listener per API process on `callEndedChannel`, where the engine announces the end of a call whose hangup was asked
 * (core/calls/calls.ts), wakes the waiters of that call. A waiter re-reads the call when woken, so a notice is only a
 * hint; while the listener is down (notices may be missed) waiters look again every second instead, and all of them
 * look again when it is back.
 */
import { callEndedChannel, ChangeListener } from '../core/change-notices.ts';

/** How often a waiter looks again while notices cannot be heard. */
const unheardPollMs = 1_000;

export interface CallEndWatch {
  /** Resolves once the call may have ended since the last call (a notice, a reconnection), or after `ms`. */
  next(ms: number): Promise<void>;
  stop(): void;
}

class Waiter implements CallEndWatch {
  private woken = false;
  private wake: (() => void) | undefined;

  constructor(
    private readonly endings: CallEndings,
    private readonly callId: string,
  ) {}

  signal(): void {
    this.woken = true;
    this.wake?.();
  }

  async next(ms: number): Promise<void> {
    if (!this.woken) {
      const bound = this.endings.listening ? ms : Math.min(ms, unheardPollMs);
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        timer = setTimeout(resolve, bound);
      });
      clearTimeout(timer);
      this.wake = undefined;
    }
    this.woken = false;
  }

  stop(): void {
    this.endings.forget(this.callId, this);
  }
}

export class CallEndings {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly listener: ChangeListener;

  constructor(databaseUrl: string, log: (message: string) => void) {
    this.listener = new ChangeListener(
      databaseUrl,
      callEndedChannel,
      (callId) => {
        for (const waiter of this.waiters.get(callId) ?? []) waiter.signal();
      },
      () => {
        for (const set of this.waiters.values()) for (const waiter of set) waiter.signal();
      },
      log,
    );
  }

  get listening(): boolean {
    return this.listener.listening;
  }

  start(): Promise<void> {
    return this.listener.start();
  }

  close(): Promise<void> {
    return this.listener.close();
  }

  /** Starts watching a call: read it after this, so that an end between the read and the wait is not missed. */
  watch(callId: string): CallEndWatch {
    const waiter = new Waiter(this, callId);
    const set = this.waiters.get(callId) ?? new Set();
    set.add(waiter);
    this.waiters.set(callId, set);
    return waiter;
  }

  forget(callId: string, waiter: Waiter): void {
    const set = this.waiters.get(callId);
    set?.delete(waiter);
    if (set?.size === 0) this.waiters.delete(callId);
  }
}
