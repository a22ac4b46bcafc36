/**
 * Message records and their status history (docs/messaging.md, "Records"): `messages` and `message_events`. Every
 * status change is one `message_events` row and one `message.status` event in the number's stream, written in the
 * transaction of the change; an inbound message is `message.received`. An outbound message's status follows from
 * its parts (core/messages/parts.ts): `queued`, `sending` once one is taken, `sent` once the carrier acknowledged
 * every one, `delivered` once every one has a delivered receipt, `failed` at the first refusal or failed receipt.
 */
import { createHash, randomInt } from 'node:crypto';
import { announce, messageSettledChannel, messagesChannel } from '../change-notices.ts';
import type { Queryable } from '../database.ts';
import { appendEvent } from '../events/outbox.ts';
import type { MessageObject } from '../events/types.ts';
import type { NumberRow, NumberWorkspace } from '../numbers/numbers.ts';
import { keysetPage, type PageWindow, workspaceRow } from '../rows.ts';
import { encodeText } from './encoding.ts';
import type { CarrierError } from './link-store.ts';
import { insertMmsPart, insertOutboundParts, partsSummary } from './parts.ts';

export type MessageStatus = 'queued' | 'sending' | 'sent' | 'delivered' | 'failed' | 'received';

export interface Media {
  url: string;
  contentType: string;
  size: number;
}

export interface MessageRow {
  id: string;
  application_id: string;
  workspace_id: string;
  phone_number_id: string;
  direction: 'inbound' | 'outbound';
  from_number: string;
  to_number: string;
  peer: string;
  text: string;
  media: Media[];
  status: MessageStatus;
  error: CarrierError | null;
  segments: number;
  /** An inbound text made of the parts that came when the others did not within an hour. */
  incomplete: boolean;
  actor: string | null;
  created_at: Date;
  updated_at: Date;
}

const messageColumns = `id, application_id, workspace_id, phone_number_id, direction, from_number, to_number, peer, text,
  media, status, error, segments, incomplete, actor, created_at, updated_at`;

/** The message as events carry it (core/events/types.ts `MessageObject`). */
export function messageObject(row: MessageRow): MessageObject {
  return {
    id: row.id,
    phoneNumberId: row.phone_number_id,
    direction: row.direction,
    from: row.from_number.slice(0, 64),
    to: row.to_number.slice(0, 64),
    text: row.text,
    media: row.media,
    status: row.status,
    error:
      row.error === null ? null : { code: row.error.code.slice(0, 100), message: row.error.message.slice(0, 1000) },
    segments: row.segments,
    ...(row.incomplete ? { incomplete: true as const } : {}),
    createdAt: row.created_at.toISOString(),
  };
}

/** The message as the API shows it (operations 67-69). */
export function messageJson(row: MessageRow) {
  return { ...messageObject(row), updatedAt: row.updated_at.toISOString() };
}

/** The window within which the same message sent again is `message_conflict` (docs/messaging.md, "Sending"). */
export const duplicateWindowMs = 60_000;

/** What identifies the same message sent twice: SHA-256 of from, to, text and the media URLs. */
export function dedupeHash(message: { from: string; to: string; text: string; mediaUrls?: readonly string[] }) {
  const fields = [message.from, message.to, message.text, ...(message.mediaUrls ?? [])];
  return createHash('sha256').update(JSON.stringify(fields)).digest('hex');
}

/**
 * Holds the dedupe hash until commit (a transaction-scoped advisory lock), so that two sends of the same message at
 * once cannot both find no duplicate.
 */
export async function lockDedupeHash(db: Queryable, hash: string): Promise<void> {
  await db.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`sms-dedupe:${hash}`]);
}

/**
 * The newest message with this dedupe hash written at or after `since`, if there is one. A failed one does not count:
 * it never reached the peer, so sending it again is no duplicate.
 */
export async function findRecentDuplicate(
  db: Queryable,
  hash: string,
  since: Date,
): Promise<{ id: string; createdAt: Date } | undefined> {
  const found = await db.query<{ id: string; created_at: Date }>(
    `SELECT id, created_at FROM messages WHERE dedupe_hash = $1 AND created_at >= $2 AND status <> 'failed'
      ORDER BY created_at DESC LIMIT 1`,
    [hash, since],
  );
  const row = found.rows[0];
  return row === undefined ? undefined : { id: row.id, createdAt: row.created_at };
}

async function statusEvent(db: Queryable, row: MessageRow, externalWorkspaceId: string): Promise<void> {
  await db.query('INSERT INTO message_events (message_id, status, error) VALUES ($1, $2, $3)', [
    row.id,
    row.status,
    row.error === null ? null : JSON.stringify(row.error),
  ]);
  await appendEvent(db, {
    type: row.direction === 'inbound' ? 'message.received' : 'message.status',
    streamId: row.phone_number_id,
    applicationId: row.application_id,
    workspaceId: row.workspace_id,
    externalWorkspaceId,
    fields: { message: messageObject(row) },
  });
}

export interface NewOutboundMessage {
  workspace: NumberWorkspace;
  /** The number it is sent from (core/numbers/numbers.ts `senderOf`): its carrier carries it. */
  number: Pick<NumberRow, 'id' | 'e164' | 'carrier'>;
  to: string;
  text: string;
  /**
   * What the record, its history and its events show instead of `text`, when the text carries a secret (a one-time
   * code's SMS, docs/messaging.md "One-time codes"): only the parts, which the carrier must get, hold `text`.
   */
  shownText?: string;
  media?: Media[];
  actor: string | null;
  dedupeHash?: string | null;
}

/**
 * Writes an outbound message `queued` with its parts, its first status and `message.status`, and wakes the engine
 * that sends for the number's carrier (at commit). Checks none of operation 67's refusals: the caller did (and the
 * replies to keywords skip them on purpose).
 */
export async function createOutboundMessage(db: Queryable, input: NewOutboundMessage): Promise<MessageRow> {
  // An MMS is one part, for the carrier's media interface (docs/messaging.md, "MMS"); an SMS has one reference per
  // message, so a handset joins its parts and no other's (8 bits, as the header carries).
  const mms = (input.media ?? []).length > 0;
  const parts = mms || input.text === '' ? [] : encodeText(input.text, randomInt(256));
  if (parts.length === 0 && !mms) throw new Error('an outbound message needs text or media');
  const inserted = await db.query<MessageRow>(
    `INSERT INTO messages (application_id, workspace_id, phone_number_id, direction, from_number, to_number, text,
                           media, status, segments, actor, dedupe_hash)
     VALUES ($1, $2, $3, 'outbound', $4, $5, $6, $7, 'queued', $8, $9, $10) RETURNING ${messageColumns}`,
    [
      input.workspace.applicationId,
      input.workspace.id,
      input.number.id,
      input.number.e164,
      input.to,
      input.shownText ?? input.text,
      JSON.stringify(input.media ?? []),
      mms ? 1 : parts.length,
      input.actor,
      input.dedupeHash ?? null,
    ],
  );
  const row = inserted.rows[0] as MessageRow;
  const owner = { messageId: row.id, carrier: input.number.carrier, numberId: input.number.id };
  if (mms) await insertMmsPart(db, owner);
  else await insertOutboundParts(db, owner, parts);
  await statusEvent(db, row, input.workspace.externalWorkspaceId);
  await announce(db, messagesChannel, input.number.carrier);
  return row;
}

/**
 * An inbound message of the number from `from` with this text and media received within the last `windowMs` (by the
 * database's clock): a carrier that posts an MMS again (its answer lost) makes no second message.
 */
export async function recentInboundMessageId(
  db: Queryable,
  input: { numberId: string; from: string; text: string; media: readonly Media[]; windowMs: number },
): Promise<string | undefined> {
  const found = await db.query<{ id: string }>(
    `SELECT id FROM messages
      WHERE phone_number_id = $1 AND direction = 'inbound' AND from_number = $2 AND text = $3 AND media = $4::jsonb
        AND created_at > clock_timestamp() - make_interval(secs => $5::double precision / 1000)
      ORDER BY created_at DESC LIMIT 1`,
    [input.numberId, input.from, input.text, JSON.stringify(input.media), input.windowMs],
  );
  return found.rows[0]?.id;
}

/**
 * Writes an inbound message `received` (an MMS with its media) with `message.received` in the number's stream
 * (`incomplete`: some of its parts never came).
 */
export async function recordInboundMessage(
  db: Queryable,
  input: {
    workspace: NumberWorkspace;
    numberId: string;
    from: string;
    to: string;
    text: string;
    segments: number;
    incomplete?: boolean;
    media?: Media[];
  },
): Promise<MessageRow> {
  const inserted = await db.query<MessageRow>(
    `INSERT INTO messages (application_id, workspace_id, phone_number_id, direction, from_number, to_number, text,
                           status, segments, incomplete, media)
     VALUES ($1, $2, $3, 'inbound', $4, $5, $6, 'received', $7, $8, $9) RETURNING ${messageColumns}`,
    [
      input.workspace.applicationId,
      input.workspace.id,
      input.numberId,
      input.from,
      input.to,
      input.text,
      input.segments,
      input.incomplete === true,
      JSON.stringify(input.media ?? []),
    ],
  );
  const row = inserted.rows[0] as MessageRow;
  await statusEvent(db, row, input.workspace.externalWorkspaceId);
  return row;
}

/** The outbound statuses in the order a message goes through them (`failed` can come after any but `delivered`). */
const progress = ['queued', 'sending', 'sent', 'delivered'] as const;

/**
 * Brings the outbound messages' statuses in line with their parts (after a take, an answer or a receipt), each
 * status passed on the way one history row and one `message.status` (a message whose last acknowledgement comes
 * after its receipts goes `sent` then `delivered`). Messages are locked in id order and their events written number
 * by number, so that two transactions settling messages never wait on each other in a circle. A message never goes back, nor out of
 * `delivered` or `failed`.
 */
export async function settleMessages(db: Queryable, messageIds: readonly string[]): Promise<void> {
  if (messageIds.length === 0) return;
  const locked = await db.query<MessageRow & { external_workspace_id: string }>(
    `SELECT ${messageColumns.replace(/(\w+)/g, 'm.$1')}, w.external_workspace_id
       FROM messages m JOIN workspaces w ON w.id = m.workspace_id
      WHERE m.id = ANY ($1::uuid[]) AND m.direction = 'outbound' AND m.status NOT IN ('delivered', 'failed')
      ORDER BY m.id FOR UPDATE OF m`,
    [[...new Set(messageIds)]],
  );
  if (locked.rows.length === 0) return;
  const summaries = await partsSummary(
    db,
    locked.rows.map((row) => row.id),
  );
  // Each status is an event in its number's stream, whose row stays locked until commit: the numbers are taken in one
  // order, so two transactions settling messages of several numbers (a take, a group of answers) never wait on each
  // other in a circle.
  const byNumber = [...locked.rows].sort(
    (a, b) => a.phone_number_id.localeCompare(b.phone_number_id) || a.id.localeCompare(b.id),
  );
  for (const { external_workspace_id: externalWorkspaceId, ...row } of byNumber) {
    const parts = summaries.get(row.id);
    if (parts === undefined) continue;
    const steps: Array<{ status: MessageStatus; error: CarrierError | null }> = [];
    if (parts.error !== null) {
      steps.push({ status: 'failed', error: parts.error });
    } else {
      const target =
        parts.acknowledged === parts.total
          ? parts.delivered === parts.total
            ? 'delivered'
            : 'sent'
          : parts.taken > 0
            ? 'sending'
            : 'queued';
      const from = progress.indexOf(row.status as (typeof progress)[number]);
      for (let at = from + 1; at <= progress.indexOf(target); at += 1) {
        steps.push({ status: progress[at] as MessageStatus, error: null });
      }
    }
    if (steps.length === 0) continue;
    const last = steps[steps.length - 1] as { status: MessageStatus; error: CarrierError | null };
    const updated = await db.query<MessageRow>(
      `UPDATE messages SET status = $2, error = $3, updated_at = clock_timestamp() WHERE id = $1
       RETURNING ${messageColumns}`,
      [row.id, last.status, last.error === null ? null : JSON.stringify(last.error)],
    );
    const after = updated.rows[0] as MessageRow;
    for (const step of steps) await statusEvent(db, { ...after, ...step }, externalWorkspaceId);
    if (after.status !== 'queued' && after.status !== 'sending') await announce(db, messageSettledChannel, row.id);
  }
}

const messageTable = { table: 'messages', columns: messageColumns, name: 'message' };

export interface StatusChange {
  status: MessageStatus;
  error: CarrierError | null;
  at: Date;
}

/** The workspace's message with its status history, oldest change first; 404 `not_found` when it has none. */
export async function getMessage(
  db: Queryable,
  workspaceId: string,
  id: string,
): Promise<MessageRow & { statusHistory: StatusChange[] }> {
  const row = await workspaceRow<MessageRow>(db, messageTable, id, workspaceId);
  const history = await db.query<StatusChange>(
    'SELECT status, error, at FROM message_events WHERE message_id = $1 ORDER BY id',
    [id],
  );
  return { ...row, statusHistory: history.rows };
}

/** The status history as the API shows it. */
export function statusHistoryJson(history: readonly StatusChange[]) {
  return history.map((change) => ({ status: change.status, error: change.error, at: change.at.toISOString() }));
}

/** What the messages of a workspace are listed by (all given filters apply). */
export interface MessageFilters {
  phoneNumberId?: string;
  /** The workspace's end (the number it was sent from or to), E.164. */
  number?: string;
  /** The other end, E.164. */
  peer?: string;
  direction?: 'inbound' | 'outbound';
}

/** A page of the workspace's messages, newest first, narrowed by `filters` (keyset pages: core/rows.ts). */
export function listMessages(
  db: Queryable,
  workspaceId: string,
  filters: MessageFilters,
  window: PageWindow,
): Promise<Array<MessageRow & { cursor_ts: string }>> {
  const params: unknown[] = [workspaceId];
  const where = ['workspace_id = $1'];
  const add = (condition: (n: number) => string, value: unknown) => {
    params.push(value);
    where.push(condition(params.length));
  };
  if (filters.phoneNumberId !== undefined) add((n) => `phone_number_id = $${n}::uuid`, filters.phoneNumberId);
  if (filters.number !== undefined) {
    add((n) => `(CASE direction WHEN 'outbound' THEN from_number ELSE to_number END) = $${n}`, filters.number);
  }
  if (filters.peer !== undefined) add((n) => `peer = $${n}`, filters.peer);
  if (filters.direction !== undefined) add((n) => `direction = $${n}`, filters.direction);
  return keysetPage<MessageRow & { cursor_ts: string }>(
    db,
    {
      select: `SELECT ${messageColumns}, created_at::text AS cursor_ts FROM messages`,
      where: where.join(' AND '),
      params,
    },
    window,
  );
}
