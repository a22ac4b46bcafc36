/**
 * The message records a carrier's SMPP link works on (core/messages/link-store.ts `MessageLinkStore`), over
 * PostgreSQL: each method one transaction over `message_parts` (parts.ts), `message_receipts` (receipts.ts) and the
 * messages they settle (messages.ts), inbound parts through inbound.ts. The link is woken when parts wait: a send
 * notifies `switchboard_messages` with its carrier at commit (heard on the process's LISTEN connection,
 * core/change-notices.ts), a throttled part's time coming due fires a timer, and a lost or regained LISTEN
 * connection wakes every carrier (notices may have been missed).
 */
import type pg from 'pg';
import { ChangeListener, messagesChannel } from '../change-notices.ts';
import { type Clock, systemClock } from '../clock.ts';
import { inTransaction } from '../database.ts';
import { receiveInbound } from './inbound.ts';
import type { CarrierError, DeliveryReceipt, InboundPart, MessageLinkStore } from './link-store.ts';
import { markSending, settleMessages } from './messages.ts';
import {
  acknowledgeParts,
  failPart,
  nextRetryAt,
  type PartAnswer,
  requeueSubmittedParts,
  retryPart,
  takeWaitingParts,
} from './parts.ts';
import { isRecordableReceipt, matchWaitingReceipts, recordReceipt } from './receipts.ts';

export interface LinkStoreOptions {
  /** The pool's database, for the LISTEN connection (default: the pool's connection string). */
  databaseUrl?: string;
  /** What `notBefore` is compared with (tests set it). */
  clock?: Clock;
  log?: (message: string) => void;
}

/** The longest a timer waits in one go (setTimeout's limit is about 24.8 days). */
const longestTimerMs = 2 ** 31 - 1;
/** The most answers recorded in one transaction. */
const mostAnswersAtOnce = 200;

/**
 * Records answers in one transaction: the parts, the ids' locks, the messages settled together, then the receipts
 * that overtook them.
 */
async function recordAnswers(db: pg.PoolClient, answers: readonly PartAnswer[]): Promise<void> {
  // The parts and the ids' locks in one statement.
  const parts = await acknowledgeParts(db, answers);
  if (parts.length === 0) return;
  await settleMessages(
    db,
    parts.map((part) => part.messageId),
  );
  const byCarrier = new Map<string, string[]>();
  for (const { carrier, carrierMessageId } of parts) {
    byCarrier.set(carrier, [...(byCarrier.get(carrier) ?? []), carrierMessageId]);
  }
  for (const [carrier, ids] of byCarrier) await matchWaitingReceipts(db, carrier, ids);
}

export function openLinkStore(
  pool: pg.Pool,
  options: LinkStoreOptions = {},
): MessageLinkStore & { close(): Promise<void> } {
  const clock = options.clock ?? systemClock;
  const log = options.log ?? (() => {});
  const databaseUrl = options.databaseUrl ?? pool.options.connectionString;
  const wakers = new Map<string, Set<() => void>>();
  const timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  let listener: ChangeListener | undefined;
  // Answers waiting for the transaction that records them, and whether one is running: the answers that come while
  // one runs are recorded together in the next (a commit per answer held up the window: docs/messaging.md).
  const answers: Array<PartAnswer & { done: (error?: unknown) => void }> = [];
  let recording = false;
  const recordWaitingAnswers = async () => {
    if (recording) return;
    recording = true;
    try {
      while (answers.length > 0) {
        const batch = answers.splice(0, mostAnswersAtOnce);
        try {
          await inTransaction(pool, (db) => recordAnswers(db, batch));
          for (const answer of batch) answer.done();
        } catch (error) {
          for (const answer of batch) answer.done(error ?? new Error('the answers were not recorded'));
        }
      }
    } finally {
      recording = false;
    }
  };

  const wake = (carrier: string) => {
    for (const waker of wakers.get(carrier) ?? []) {
      try {
        waker();
      } catch (error) {
        log(`a waiting link of carrier ${carrier} failed on its wake-up: ${String(error)}`);
      }
    }
  };
  const wakeAll = () => {
    for (const carrier of wakers.keys()) wake(carrier);
  };

  /** Wakes the carrier's link at `at` (the earliest of the times asked stands). */
  const wakeAt = (carrier: string, at: Date) => {
    if (!wakers.has(carrier)) return;
    const current = timers.get(carrier);
    if (current !== undefined && current.at <= at.getTime()) return;
    clearTimeout(current?.timer);
    const delay = Math.min(Math.max(at.getTime() - clock.now().getTime(), 0), longestTimerMs);
    const timer = setTimeout(() => {
      timers.delete(carrier);
      wake(carrier);
      // The next throttled part, if another waits later.
      nextRetryAt(pool, carrier, clock.now())
        .then((next) => next !== undefined && wakeAt(carrier, next))
        .catch((error: unknown) => log(`the next retry of carrier ${carrier} is unknown: ${String(error)}`));
    }, delay);
    timer.unref();
    timers.set(carrier, { at: at.getTime(), timer });
  };

  const stopListening = async () => {
    const closing = listener;
    listener = undefined;
    await closing?.close();
  };

  return {
    takeParts(carrier, limit) {
      // One statement takes the parts and marks their messages `sending`.
      return takeWaitingParts(pool, carrier, limit, clock.now(), markSending);
    },

    acknowledged(partId, carrierMessageId) {
      return new Promise<void>((resolve, reject) => {
        answers.push({
          partId,
          carrierMessageId,
          done: (error) => (error === undefined ? resolve() : reject(error as Error)),
        });
        void recordWaitingAnswers();
      });
    },

    async refused(partId, error: CarrierError) {
      await inTransaction(pool, async (db) => {
        const messageId = await failPart(db, partId, error);
        if (messageId !== undefined) await settleMessages(db, [messageId]);
      });
    },

    async retryLater(partId, notBefore) {
      const carrier = await retryPart(pool, partId, notBefore);
      if (carrier !== undefined) wakeAt(carrier, notBefore);
    },

    requeueSubmitted(carrier) {
      return requeueSubmittedParts(pool, carrier);
    },

    async receipt(carrier, receipt: DeliveryReceipt) {
      if (!isRecordableReceipt(receipt)) {
        log(`a receipt of carrier ${carrier} that cannot be recorded was dropped`);
        return;
      }
      await inTransaction(pool, (db) => recordReceipt(db, carrier, receipt));
    },

    inbound(carrier, part: InboundPart) {
      return receiveInbound(pool, carrier, part);
    },

    onWaiting(carrier, waker) {
      const set = wakers.get(carrier) ?? new Set();
      set.add(waker);
      wakers.set(carrier, set);
      if (listener === undefined && databaseUrl !== undefined) {
        const started = new ChangeListener(databaseUrl, messagesChannel, wake, wakeAll, log);
        listener = started;
        started.start().catch((error: unknown) => log(`message notices: ${String(error)}`));
      }
      // Parts may wait already, and throttled ones come due later (set by a link before this one).
      setImmediate(() => wake(carrier));
      nextRetryAt(pool, carrier, clock.now())
        .then((next) => next !== undefined && wakeAt(carrier, next))
        .catch((error: unknown) => log(`the next retry of carrier ${carrier} is unknown: ${String(error)}`));
      return () => {
        set.delete(waker);
        if (set.size > 0) return;
        wakers.delete(carrier);
        clearTimeout(timers.get(carrier)?.timer);
        timers.delete(carrier);
        if (wakers.size === 0) stopListening().catch(() => {});
      };
    },

    async close() {
      for (const { timer } of timers.values()) clearTimeout(timer);
      timers.clear();
      wakers.clear();
      await stopListening();
    },
  };
}
