/**
 * Delivery receipts (docs/messaging.md, "Records"): a receipt names the id the carrier gave a part in its
 * `submit_sm_resp`, and can overtake that answer. A receipt whose part is not acknowledged yet waits in
 * `message_receipts` and is matched when the answer is recorded. The two meet under a transaction-level advisory
 * lock on (carrier, carrier's id), so that a receipt and its answer recorded at the same moment never miss each
 * other (each sees what the other committed). A receipt counted twice changes nothing the second time.
 */
import type pg from 'pg';
import type { Queryable } from '../database.ts';
import type { CarrierError, DeliveryReceipt } from './link-store.ts';
import { settleMessages } from './messages.ts';
import { carrierIdLockKey, partByCarrierId, setPartReceipt } from './parts.ts';

/** How long a receipt waits for its part's answer before it is dropped. */
export const receiptKeptMs = 7 * 24 * 3600_000;

/** SMPP 3.4's message_id is a C-Octet String of at most 65 octets (64 characters). */
const carrierIdPattern = /^[\x20-\x7e]{1,64}$/;

/** Whether a receipt from the carrier is well formed enough to record (outside input: the link parsed it). */
export function isRecordableReceipt(receipt: DeliveryReceipt): boolean {
  const error = receipt.error;
  return (
    typeof receipt.carrierMessageId === 'string' &&
    carrierIdPattern.test(receipt.carrierMessageId) &&
    typeof receipt.delivered === 'boolean' &&
    typeof receipt.state === 'string' &&
    receipt.state.length <= 100 &&
    (error === null ||
      (typeof error === 'object' &&
        typeof error.code === 'string' &&
        error.code.length >= 1 &&
        error.code.length <= 100 &&
        typeof error.message === 'string' &&
        error.message.length <= 1000))
  );
}

/**
 * Holds the (carrier, carrier's id) meeting point until commit (an answer takes its own with its acknowledgement:
 * parts.ts `acknowledgeParts`).
 */
async function lockCarrierId(db: Queryable, carrier: string, carrierMessageId: string): Promise<void> {
  await db.query({
    name: 'sb-lock-carrier-id',
    text: 'SELECT pg_advisory_xact_lock(hashtextextended($1, 0))',
    values: [carrierIdLockKey(carrier, carrierMessageId)],
  });
}

/** The error a failed receipt records: the carrier's, or one naming the receipt's state. */
function receiptError(receipt: DeliveryReceipt): CarrierError | null {
  if (receipt.delivered) return null;
  return receipt.error ?? { code: receipt.state.slice(0, 100) || 'UNDELIV', message: 'the carrier did not deliver it' };
}

/** Applies a receipt to the acknowledged part with its id, if there is one; whether there was. */
async function applyReceipt(
  db: Queryable,
  carrier: string,
  receipt: Pick<DeliveryReceipt, 'carrierMessageId' | 'delivered' | 'state' | 'error'>,
): Promise<boolean> {
  const part = await partByCarrierId(db, carrier, receipt.carrierMessageId);
  if (part === undefined) return false;
  // A repeated receipt: the first one stands.
  if (part.receipt !== null) return true;
  await setPartReceipt(db, part.id, receipt.delivered, receiptError(receipt));
  await settleMessages(db, [part.messageId]);
  return true;
}

/** Records a receipt in the transaction `db`: on its part and message, or kept for the answer it overtook. */
export async function recordReceipt(db: pg.PoolClient, carrier: string, receipt: DeliveryReceipt): Promise<void> {
  await lockCarrierId(db, carrier, receipt.carrierMessageId);
  if (await applyReceipt(db, carrier, receipt)) return;
  await db.query(
    `INSERT INTO message_receipts (carrier, carrier_message_id, delivered, state, error) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (carrier, carrier_message_id) DO NOTHING`,
    [
      carrier,
      receipt.carrierMessageId,
      receipt.delivered,
      receipt.state,
      receipt.error === null ? null : JSON.stringify(receipt.error),
    ],
  );
  await dropStaleReceipts(db, 100);
}

/**
 * Drops up to `most` receipts that waited over 7 days for their part's answer (by the database's clock, which wrote
 * them): that answer is not coming. How many were dropped. Run as receipts are recorded and by the engines' sweep
 * (core/messages/sweep.ts), so they go even when no receipt comes after them.
 */
export async function dropStaleReceipts(db: Queryable, most: number): Promise<number> {
  const dropped = await db.query(
    `DELETE FROM message_receipts WHERE ctid IN (
       SELECT ctid FROM message_receipts
        WHERE received_at < clock_timestamp() - make_interval(secs => $1::float8 / 1000) LIMIT $2
          FOR UPDATE SKIP LOCKED)`,
    [receiptKeptMs, most],
  );
  return dropped.rowCount ?? 0;
}

/**
 * After parts' answers are recorded (under their ids' locks): the receipts that overtook them, if any did, applied
 * and removed.
 */
export async function matchWaitingReceipts(
  db: Queryable,
  carrier: string,
  carrierMessageIds: readonly string[],
): Promise<void> {
  if (carrierMessageIds.length === 0) return;
  const taken = await db.query<{
    carrier_message_id: string;
    delivered: boolean;
    state: string;
    error: CarrierError | null;
  }>({
    name: 'sb-match-receipts',
    text: `DELETE FROM message_receipts WHERE carrier = $1 AND carrier_message_id = ANY ($2::text[])
     RETURNING carrier_message_id, delivered, state, error`,
    values: [carrier, [...new Set(carrierMessageIds)]],
  });
  for (const { carrier_message_id: carrierMessageId, ...waiting } of taken.rows) {
    await applyReceipt(db, carrier, { carrierMessageId, ...waiting });
  }
}
