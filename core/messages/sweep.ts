/**
 * The message records' periodic clean-up (docs/messaging.md, "Receiving", "Records"), run by every engine
 * (engine/messaging/sweep.ts): concatenated texts whose siblings did not all come within an hour are delivered with
 * the parts that came, marked incomplete; receipts that waited 7 days for their part's answer are dropped, as are
 * inbound parts kept past the repeat window and sends' dedupe hashes past the duplicate window. Engines sweeping at once share the work: each text is taken under its
 * peer's lock, skipped when another holds it, and the rows dropped are taken `FOR UPDATE SKIP LOCKED`. Ages go by
 * the database's clock, which wrote the rows.
 */
import type pg from 'pg';
import { dropStaleDedupe } from './dedupe.ts';
import { deliverIncomplete, incompleteAfterMs, repeatWindowMs } from './inbound.ts';
import { dropJoinedParts, staleWaitingTexts } from './parts.ts';
import { dropStaleReceipts } from './receipts.ts';

export interface SweepOutcome {
  /** Texts delivered with parts missing. */
  incomplete: number;
  /** Texts dropped because their number is no longer the carrier's claimed number. */
  dropped: number;
  /** Unmatched receipts dropped after 7 days. */
  receipts: number;
  /** Inbound parts dropped once past the repeat window. */
  joinedParts: number;
  /** Sends' dedupe hashes dropped once past the duplicate window. */
  dedupe: number;
}

/** At most this many of each per sweep; what is left waits for the next one. */
const batch = { texts: 100, rows: 1000 };

export async function sweepMessages(pool: pg.Pool): Promise<SweepOutcome> {
  const outcome: SweepOutcome = { incomplete: 0, dropped: 0, receipts: 0, joinedParts: 0, dedupe: 0 };
  for (const text of await staleWaitingTexts(pool, incompleteAfterMs, batch.texts)) {
    const result = await deliverIncomplete(pool, text);
    if (result === 'delivered') outcome.incomplete += 1;
    else if (result === 'dropped') outcome.dropped += 1;
  }
  outcome.receipts = await dropStaleReceipts(pool, batch.rows);
  outcome.joinedParts = await dropJoinedParts(pool, null, repeatWindowMs, batch.rows);
  outcome.dedupe = await dropStaleDedupe(pool, batch.rows);
  return outcome;
}
