/**
 * Transfers of a call (operation 53, docs/contact-center.md "Transfer"): the target shapes, the engine's side of the
 * recorded request (taking it up once, the consultation of a warm transfer) and `call.transferred`. The API records
 * the request with the other call commands (commands.ts).
 */
import type pg from 'pg';
import { type Static, Type } from 'typebox';
import { inTransaction } from '../database.ts';
import { e164Pattern } from '../ids.ts';
import { appendEvent } from '../events/outbox.ts';
import { callEnvelope, callObject, readCall } from './calls.ts';

const Uuid = Type.String({ format: 'uuid' });

/** Where a transfer sends the caller (spec section 6, `transfer.target`): exactly one of the three. */
export const TransferTarget = Type.Union([
  Type.Object(
    { e164: Type.String({ pattern: e164Pattern, description: 'A phone number, dialled out' }) },
    { additionalProperties: false },
  ),
  Type.Object({ queueId: Uuid }, { additionalProperties: false }),
  Type.Object({ memberId: Uuid }, { additionalProperties: false }),
]);
export type TransferTarget = Static<typeof TransferTarget>;

/** `call.transferred`'s `transfer`: the target, warm or blind, and who asked. */
export interface Transfer {
  target: TransferTarget;
  warm: boolean;
  actor: string | null;
}

/**
 * The engine takes up the recorded request `requestId` of the call: true once (it is cleared), false when it is gone
 * (taken already, replaced by a newer one, or cleared by a new connection).
 */
export async function takeTransferRequest(pool: pg.Pool, callId: string, requestId: string): Promise<boolean> {
  const result = await pool.query(
    `UPDATE calls SET transfer_request = NULL WHERE id = $1 AND transfer_request->>'id' = $2 AND ended_at IS NULL`,
    [callId, requestId],
  );
  return result.rowCount === 1;
}

/** A warm transfer's consultation starts (`transfer`) or ends (null). */
export async function setConsulting(pool: pg.Pool, callId: string, transfer: Transfer | null): Promise<void> {
  await pool.query('UPDATE calls SET transfer_consulting = $2 WHERE id = $1', [
    callId,
    transfer === null ? null : JSON.stringify(transfer),
  ]);
}

/**
 * Writes `call.transferred` (a blind transfer as the caller is moved, a warm one at completion) and clears the
 * consultation; false when the call has ended.
 */
export async function recordTransferred(pool: pg.Pool, callId: string, transfer: Transfer): Promise<boolean> {
  return inTransaction(pool, async (db) => {
    const current = await readCall(db, callId, true);
    if (current === undefined || current.ended_at !== null) return false;
    await db.query('UPDATE calls SET transfer_consulting = NULL WHERE id = $1', [callId]);
    await appendEvent(db, {
      type: 'call.transferred',
      ...callEnvelope(current),
      fields: { callId, call: callObject(current), transfer },
    });
    return true;
  });
}
