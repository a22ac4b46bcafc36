/**
 * The duplicate check of operation 67 (docs/messaging.md, "Sending"): `message_dedupe`, per dedupe hash the last
 * message sent with it and when. A send claims its hash in one statement, an upsert that locks the hash's row until
 * commit, so two sends of the same message at once are decided one after the other; a hash seen before answers the
 * earlier message, and the caller decides (a failed one is no duplicate) and takes the row over when it is none. Rows
 * past the window are dropped by the messages sweep.
 */
import { createHash } from 'node:crypto';
import type { Queryable } from '../database.ts';
import { optedOutExpression } from './opt-outs.ts';

/** The window within which the same message sent again is `message_conflict` (docs/messaging.md, "Sending"). */
export const duplicateWindowMs = 60_000;

/** What identifies the same message sent twice: SHA-256 of from, to, text and the media URLs. */
export function dedupeHash(message: { from: string; to: string; text: string; mediaUrls?: readonly string[] }) {
  const fields = [message.from, message.to, message.text, ...(message.mediaUrls ?? [])];
  return createHash('sha256').update(JSON.stringify(fields)).digest('hex');
}

/** The message last sent with a hash: its id, when, and whether that is within the window (by the database's clock). */
export interface EarlierSend {
  messageId: string;
  at: Date;
  recent: boolean;
}

/**
 * Claims `hash` for the message `messageId` is about to be (written in this transaction), holding the hash's row
 * until commit, and reads in the same statement whether the recipient opted out of the number (core/messages/
 * opt-outs.ts). `earlier` is undefined when the hash is new; else the earlier send, whose row this transaction now
 * holds: the caller answers `message_conflict` or takes the row over (`takeOverDedupeHash`).
 */
export async function claimDedupeHash(
  db: Queryable,
  hash: string,
  send: { messageId: string; numberId: string; to: string },
): Promise<{ earlier: EarlierSend | undefined; optedOut: boolean }> {
  const result = await db.query<{ message_id: string; at: Date; recent: boolean; opted_out: boolean }>({
    name: 'sb-dedupe-claim',
    text: `WITH claim AS (
             INSERT INTO message_dedupe AS d (hash, message_id) VALUES ($1, $2)
             ON CONFLICT (hash) DO UPDATE SET hash = excluded.hash
             RETURNING message_id, at, at >= clock_timestamp() - make_interval(secs => $3) AS recent)
           SELECT claim.*, ${optedOutExpression(4, 5)} AS opted_out FROM claim`,
    values: [hash, send.messageId, duplicateWindowMs / 1000, send.numberId, send.to],
  });
  const row = result.rows[0] as { message_id: string; at: Date; recent: boolean; opted_out: boolean };
  const earlier =
    row.message_id === send.messageId ? undefined : { messageId: row.message_id, at: row.at, recent: row.recent };
  return { earlier, optedOut: row.opted_out };
}

/** The hash's row (claimed in this transaction) now names `messageId`, sent now: the earlier send was no duplicate. */
export async function takeOverDedupeHash(db: Queryable, hash: string, messageId: string): Promise<void> {
  await db.query('UPDATE message_dedupe SET message_id = $2, at = clock_timestamp() WHERE hash = $1', [
    hash,
    messageId,
  ]);
}

/** Drops up to `most` rows past the window (by the database's clock) that no send holds; how many went. */
export async function dropStaleDedupe(db: Queryable, most: number): Promise<number> {
  const result = await db.query(
    `DELETE FROM message_dedupe WHERE hash IN (
       SELECT hash FROM message_dedupe WHERE at < clock_timestamp() - make_interval(secs => $1)
        LIMIT $2 FOR UPDATE SKIP LOCKED)`,
    [duplicateWindowMs / 1000, most],
  );
  return result.rowCount ?? 0;
}
