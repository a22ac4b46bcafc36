/**
 * No waiting on the network while a database connection is held (docs/foundation.md, "Database"): a transaction, or
 * a connection taken from a pool, is held only for the statements that need it, so that a slow or silent peer (a
 * media URL that never answers, a webhook receiver, a carrier, an SMSC, the Kubernetes API) slows only the work that
 * waits for it, never every tenant's requests queued for the pool.
 *
 * Each place that holds a pooled connection runs its work in `holdingConnection` (core/database.ts `inTransaction`
 * and `afterCommit`, api/idempotency.ts `runIdempotent`); each place that waits on the network calls
 * `assertNotHoldingConnection` before it does (test/architecture.test.ts lists them, and fails for a file that
 * starts a network wait without it). The check follows the async context (Node's AsyncLocalStorage): work started
 * inside the transaction, and still inside it, is caught; work it merely scheduled and that runs after the
 * connection went back is not. A wait caught is a bug, thrown as `HeldConnectionError` rather than left to stall.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

interface Holding {
  /** What holds the connection, in the error: `a transaction`, `an idempotent request's transaction`. */
  what: string;
  /** Cleared when the connection is given back: work scheduled from inside and run later may wait. */
  held: boolean;
}

const holding = new AsyncLocalStorage<Holding>();

export class HeldConnectionError extends Error {
  constructor(wait: string, what: string) {
    super(`${wait} while ${what} holds a database connection: wait on the network before or after it`);
    this.name = 'HeldConnectionError';
  }
}

/** Runs `work` as holding a database connection (`what` names the holder) until it settles. */
export async function holdingConnection<T>(what: string, work: () => Promise<T>): Promise<T> {
  const held: Holding = { what, held: true };
  try {
    return await holding.run(held, work);
  } finally {
    held.held = false;
  }
}

/** Throws `HeldConnectionError` when the caller holds a database connection; `wait` names what would wait. */
export function assertNotHoldingConnection(wait: string): void {
  const held = holding.getStore();
  if (held?.held === true) throw new HeldConnectionError(wait, held.what);
}
