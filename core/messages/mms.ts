/**
 * MMS' records over PostgreSQL (docs/messaging.md, "MMS"): the outbound queue the engines' MMS senders work on
 * (engine/messaging/mms.ts), and inbound MMS and status callbacks the carrier posts to the API. An outbound MMS is
 * one `message_parts` row of channel `mms` (parts.ts), so its message's status follows from it as an SMS' does
 * (messages.ts `settleMessages`) and a receipt finds it by the carrier's id (receipts.ts), by SMPP or by callback.
 */
import type pg from 'pg';
import { inTransaction } from '../database.ts';
import { inboundNumberOf } from '../numbers/numbers.ts';
import type { CarrierError, DeliveryReceipt } from './link-store.ts';
import { answerKeyword, lockPeer } from './inbound.ts';
import { type Media, recentInboundMessageId, recordInboundMessage, settleMessages } from './messages.ts';
import { acknowledgeParts, failPart, type MmsPart, retryPart, takeMmsParts } from './parts.ts';
import { isRecordableReceipt, matchWaitingReceipts, recordReceipt } from './receipts.ts';

export type { MmsPart } from './parts.ts';

/** What the MMS sender needs of the records; one transaction each. */
export interface MmsQueue {
  /** Takes up to `limit` MMS due now (waiting, or submitted longer ago than the lease), marked submitted. */
  take(limit: number): Promise<MmsPart[]>;
  /** The carrier took it (a 2xx answer), with its id when it gave one: the message is `sent`. */
  sent(partId: string, carrierMessageId: string | null): Promise<void>;
  /** The carrier refused it for good (a 4xx answer, or retries spent): the message is `failed` with `error`. */
  refused(partId: string, error: CarrierError): Promise<void>;
  /** The carrier could not take it now (5xx, timeout, no connection): waiting again, not taken before `notBefore`. */
  retryLater(partId: string, notBefore: Date): Promise<void>;
}

/**
 * How long an MMS taken by a sender stays its own: past it (the sender's engine stopped before it heard the carrier's
 * answer) any sender takes it again. Well over the POST's own time limit, so a live sender is never overtaken.
 */
export const mmsLeaseMs = 120_000;

export function openMmsQueue(pool: pg.Pool, now: () => Date = () => new Date()): MmsQueue {
  return {
    take(limit) {
      return inTransaction(pool, async (db) => {
        const parts = await takeMmsParts(db, limit, now(), mmsLeaseMs);
        await settleMessages(
          db,
          parts.map((part) => part.messageId),
        );
        return parts;
      });
    },
    async sent(partId, carrierMessageId) {
      await inTransaction(pool, async (db) => {
        // The part and its id's lock (where a status callback that came first meets it) in one statement.
        const [part] = await acknowledgeParts(db, [{ partId, carrierMessageId }]);
        if (part === undefined) return;
        await settleMessages(db, [part.messageId]);
        // A status callback may have come before the answer (as an SMPP receipt can overtake its submit_sm_resp).
        if (carrierMessageId !== null) await matchWaitingReceipts(db, part.carrier, [carrierMessageId]);
      });
    },
    async refused(partId, error) {
      await inTransaction(pool, async (db) => {
        const messageId = await failPart(db, partId, error);
        if (messageId !== undefined) await settleMessages(db, [messageId]);
      });
    },
    async retryLater(partId, notBefore) {
      await retryPart(pool, partId, notBefore);
    },
  };
}

/** An inbound MMS as the carrier posts it (validated by the API's schema). */
/** A carrier posting the same MMS again within this long (its answer lost) makes no second message. */
export const mmsRepeatWindowMs = 120_000;

export interface InboundMms {
  from: string;
  to: string;
  text: string;
  media: Array<{ url: string; contentType: string }>;
}

/**
 * Records an inbound MMS to one of the carrier's claimed numbers as a message `received` with `message.received`;
 * `unknown_number` when `to` is no claimed number of that carrier. The same MMS from the same peer again within
 * `mmsRepeatWindowMs` is the first one (its id answered again); its text's keywords are answered as an SMS's. The media are kept as links (the carrier's
 * URLs), their size unknown (0): the service does not fetch what arrives.
 */
export async function receiveMms(
  pool: pg.Pool,
  carrier: string,
  mms: InboundMms,
): Promise<{ outcome: 'accepted'; messageId: string } | { outcome: 'unknown_number' }> {
  return inTransaction(pool, async (db) => {
    const number = await inboundNumberOf(db, carrier, mms.to);
    if (number === undefined) return { outcome: 'unknown_number' };
    const media: Media[] = mms.media.map((medium) => ({ url: medium.url, contentType: medium.contentType, size: 0 }));
    // One at a time per peer and number (the lock the SMS parts take), so a repeat racing its original is seen.
    await lockPeer(db, number.number.id, mms.from);
    const repeated = await recentInboundMessageId(db, {
      numberId: number.number.id,
      from: mms.from,
      text: mms.text,
      media,
      windowMs: mmsRepeatWindowMs,
    });
    if (repeated !== undefined) return { outcome: 'accepted', messageId: repeated };
    const row = await recordInboundMessage(db, {
      workspace: number.workspace,
      numberId: number.number.id,
      from: mms.from,
      to: mms.to,
      text: mms.text,
      segments: 1,
      media,
    });
    // STOP, START and HELP work in an MMS's text as in an SMS.
    await answerKeyword(db, number, mms.from, mms.text);
    return { outcome: 'accepted', messageId: row.id };
  });
}

/**
 * A status callback of the carrier's media interface: recorded as a delivery receipt is (it finds the MMS by the id
 * the carrier answered with, or waits for that answer); false when it cannot be recorded.
 */
export async function recordMmsStatus(pool: pg.Pool, carrier: string, receipt: DeliveryReceipt): Promise<boolean> {
  if (!isRecordableReceipt(receipt)) return false;
  await inTransaction(pool, (db) => recordReceipt(db, carrier, receipt));
  return true;
}
