/**
 * Peers opted out of a number's messages (docs/messaging.md, "Receiving"): an inbound STOP keyword writes one, START
 * removes it, and operation 67 sends nothing to an opted-out peer (409 `recipient_opted_out`). Kept by number, not
 * by workspace: the peer said no to that number.
 */
import type { Queryable } from '../database.ts';

/**
 * Whether the peer opted out of the number, as an expression of another statement (operation 67's duplicate check
 * reads it with its claim, core/messages/dedupe.ts): the number's id and the peer are its parameters `numberAt` and
 * `peerAt`.
 */
export function optedOutExpression(numberAt: number, peerAt: number): string {
  return `EXISTS (SELECT 1 FROM opt_outs WHERE phone_number_id = $${numberAt}::uuid AND peer = $${peerAt}::text)`;
}

/** Whether `peer` opted out of the number's messages. */
export async function isOptedOut(db: Queryable, phoneNumberId: string, peer: string): Promise<boolean> {
  const found = await db.query({
    name: 'sb-opted-out',
    text: 'SELECT 1 FROM opt_outs WHERE phone_number_id = $1 AND peer = $2',
    values: [phoneNumberId, peer],
  });
  return found.rowCount !== 0;
}

/** Opts `peer` out of the number's messages by `keyword` (again: the latest keyword and time are kept). */
export async function optOut(
  db: Queryable,
  input: { workspaceId: string; phoneNumberId: string; peer: string; keyword: string },
): Promise<void> {
  await db.query(
    `INSERT INTO opt_outs (phone_number_id, peer, workspace_id, keyword) VALUES ($1, $2, $3, $4)
     ON CONFLICT (phone_number_id, peer)
     DO UPDATE SET workspace_id = excluded.workspace_id, keyword = excluded.keyword, at = clock_timestamp()`,
    [input.phoneNumberId, input.peer, input.workspaceId, input.keyword],
  );
}

/** Opts `peer` back in; whether it was opted out. */
export async function optIn(db: Queryable, phoneNumberId: string, peer: string): Promise<boolean> {
  const removed = await db.query('DELETE FROM opt_outs WHERE phone_number_id = $1 AND peer = $2', [
    phoneNumberId,
    peer,
  ]);
  return removed.rowCount !== 0;
}

/** When and by which keyword `peer` opted out of the number, if it did. */
export async function optOutOf(
  db: Queryable,
  phoneNumberId: string,
  peer: string,
): Promise<{ keyword: string; at: Date } | undefined> {
  const found = await db.query<{ keyword: string; at: Date }>(
    'SELECT keyword, at FROM opt_outs WHERE phone_number_id = $1 AND peer = $2',
    [phoneNumberId, peer],
  );
  return found.rows[0];
}
