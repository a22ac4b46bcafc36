/**
 * Message records and their status history (docs/messaging.md, "Records"): `messages` and `message_events`. Every
 * status change is one `message_events` row, written in the transaction of the change; the reported ones
 * (core/messages/statuses.ts: sent, delivered, failed) are also one `message.status` event in the number's stream,
 * and an inbound message is `message.received`. An outbound message's status follows from its parts
 * (core/messages/parts.ts): `queued`, `sending` once one is taken, `sent` once the carrier acknowledged every one,
 * `delivered` once every one has a delivered receipt, `failed` at the first refusal or failed receipt. A message's
 * statements are few and mostly prepared: every one counts at hundreds of messages a second (docs/benchmarks.md,
 * "messages").
 */
import { randomInt } from 'node:crypto';
import { announce, messageSettledChannel, messagesChannel, mmsChannel } from '../change-notices.ts';
import type { Queryable } from '../database.ts';
import { appendEvent, appendEvents, type NewEvent } from '../events/outbox.ts';
import type { MessageObject } from '../events/types.ts';
import type { NumberRow, NumberWorkspace } from '../numbers/numbers.ts';
import { notFound } from '../errors.ts';
import { keysetPage, type PageWindow } from '../rows.ts';
import { encodeText } from './encoding.ts';
import type { CarrierError } from './link-store.ts';
import { insertMmsPart, outboundPartsCte, outboundPartsValues, partsSummary } from './parts.ts';
import {
  lastStep,
  type MessageStatus,
  reportedStatuses,
  settledNotices,
  type StatusStep,
  statusSteps,
} from './statuses.ts';

export type { MessageStatus } from './statuses.ts';

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

/** The status of the workspace's message `id`, or undefined when there is none (read as of now). */
export async function messageStatus(db: Queryable, id: string): Promise<MessageStatus | undefined> {
  const found = await db.query<{ status: MessageStatus }>('SELECT status FROM messages WHERE id = $1', [id]);
  return found.rows[0]?.status;
}

/** The message's event for its status, if that status is reported (in the number's stream); undefined if not. */
function statusEvent(
  row: MessageRow,
  externalWorkspaceId: string,
): NewEvent<'message.received' | 'message.status'> | undefined {
  if (!reportedStatuses.has(row.status)) return undefined;
  return {
    type: row.direction === 'inbound' ? 'message.received' : 'message.status',
    streamId: row.phone_number_id,
    applicationId: row.application_id,
    workspaceId: row.workspace_id,
    externalWorkspaceId,
    fields: { message: messageObject(row) },
  };
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
  /** Its id, when the send chose it already (claiming its dedupe hash: core/messages/dedupe.ts); else a new one. */
  id?: string;
}

/**
 * Writes an outbound message `queued` with its parts and its first history row, and wakes the engine that sends for
 * the number's carrier (at commit). Checks none of operation 67's refusals: the caller did (and the replies to
 * keywords skip them on purpose).
 */
export async function createOutboundMessage(db: Queryable, input: NewOutboundMessage): Promise<MessageRow> {
  // An MMS is one part, for the carrier's media interface (docs/messaging.md, "MMS"); an SMS has one reference per
  // message, so a handset joins its parts and no other's (8 bits, as the header carries).
  const mms = (input.media ?? []).length > 0;
  const parts = mms || input.text === '' ? [] : encodeText(input.text, randomInt(256));
  if (parts.length === 0 && !mms) throw new Error('an outbound message needs text or media');
  // The message, its SMS parts, its first history row (`queued` is not reported: no event) and the notice that wakes
  // the number's carrier's SMPP link (an MMS: the MMS senders) at commit, in one statement.
  const inserted = await db.query<MessageRow>({
    name: 'sb-outbound-message',
    text: `WITH message AS (
             INSERT INTO messages (id, application_id, workspace_id, phone_number_id, direction, from_number,
                                   to_number, text, media, status, segments, actor, dedupe_hash)
             VALUES (coalesce($13::uuid, gen_random_uuid()), $1, $2, $3, 'outbound', $4, $5, $6, $7, 'queued', $8, $9,
                     $10)
             RETURNING ${messageColumns}),
           history AS (INSERT INTO message_events (message_id, status) SELECT id, status FROM message),
           ${outboundPartsCte(14)}
           SELECT message.*, pg_notify($11, $12) FROM message`,
    values: [
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
      mms ? mmsChannel : messagesChannel,
      input.number.carrier,
      input.id ?? null,
      ...outboundPartsValues(input.number.carrier, parts),
    ],
  });
  const { pg_notify: _notified, ...row } = inserted.rows[0] as MessageRow & { pg_notify: unknown };
  if (mms) await insertMmsPart(db, { messageId: row.id, carrier: input.number.carrier, numberId: input.number.id });
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
    `WITH message AS (
       INSERT INTO messages (application_id, workspace_id, phone_number_id, direction, from_number, to_number, text,
                             status, segments, incomplete, media)
       VALUES ($1, $2, $3, 'inbound', $4, $5, $6, 'received', $7, $8, $9) RETURNING ${messageColumns}),
     history AS (INSERT INTO message_events (message_id, status) SELECT id, status FROM message)
     SELECT * FROM message`,
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
  const received = statusEvent(row, input.workspace.externalWorkspaceId);
  if (received !== undefined) await appendEvent(db, received);
  return row;
}

/**
 * Brings the outbound messages' statuses in line with their parts (after a take, an answer or a receipt), each
 * status passed on the way one history row and one `message.status` (a message whose last acknowledgement comes
 * after its receipts goes `sent` then `delivered`). Messages are locked in id order and their events written number
 * by number, so that two transactions settling messages never wait on each other in a circle. A message never goes back, nor out of
 * `delivered` or `failed`.
 */
export async function settleMessages(db: Queryable, messageIds: readonly string[]): Promise<void> {
  if (messageIds.length === 0) return;
  const locked = await db.query<MessageRow & { external_workspace_id: string }>({
    name: 'sb-settle-lock',
    text: `SELECT ${messageColumns.replace(/(\w+)/g, 'm.$1')}, w.external_workspace_id
             FROM messages m JOIN workspaces w ON w.id = m.workspace_id
            WHERE m.id = ANY ($1::uuid[]) AND m.direction = 'outbound' AND m.status NOT IN ('delivered', 'failed')
            ORDER BY m.id FOR UPDATE OF m`,
    values: [[...new Set(messageIds)]],
  });
  if (locked.rows.length === 0) return;
  const summaries = await partsSummary(
    db,
    locked.rows.map((row) => row.id),
  );
  const changed: Array<{ row: MessageRow; externalWorkspaceId: string; steps: StatusStep[] }> = [];
  for (const { external_workspace_id: externalWorkspaceId, ...row } of locked.rows) {
    const parts = summaries.get(row.id);
    const steps = parts === undefined ? [] : statusSteps(row.status, parts);
    if (steps.length > 0) changed.push({ row, externalWorkspaceId, steps });
  }
  if (changed.length === 0) return;
  // The messages' new statuses and every status passed on the way (their history rows), in one statement.
  const history = changed.flatMap(({ row, steps }) => steps.map((step) => ({ messageId: row.id, ...step })));
  const jsonOf = (error: CarrierError | null) => (error === null ? null : JSON.stringify(error));
  const updated = await db.query<MessageRow>({
    name: 'sb-settle-messages',
    text: `WITH updated AS (
             UPDATE messages m SET status = change.status, error = change.error, updated_at = clock_timestamp()
               FROM unnest($1::uuid[], $2::text[], $3::jsonb[]) AS change (id, status, error)
              WHERE m.id = change.id
             RETURNING ${messageColumns.replace(/(\w+)/g, 'm.$1')}),
           history AS (
             INSERT INTO message_events (message_id, status, error)
             SELECT change.id, change.status, change.error
               FROM unnest($4::uuid[], $5::text[], $6::jsonb[]) WITH ORDINALITY AS change (id, status, error, n)
              ORDER BY change.n)
           SELECT * FROM updated`,
    values: [
      changed.map(({ row }) => row.id),
      changed.map(({ steps }) => lastStep(steps).status),
      changed.map(({ steps }) => jsonOf(lastStep(steps).error)),
      history.map((change) => change.messageId),
      history.map((change) => change.status),
      history.map((change) => jsonOf(change.error)),
    ],
  });
  const after = new Map(updated.rows.map((row) => [row.id, row]));
  // Each reported status is an event in its number's stream, whose row stays locked until commit: the numbers are
  // taken in one order, so two transactions settling messages of several numbers (a take, a group of answers) never
  // wait on each other in a circle.
  const byNumber = changed.sort(
    (a, b) => a.row.phone_number_id.localeCompare(b.row.phone_number_id) || a.row.id.localeCompare(b.row.id),
  );
  await appendEvents(
    db,
    byNumber.flatMap(({ row, externalWorkspaceId, steps }) =>
      steps.flatMap((step) => statusEvent({ ...(after.get(row.id) ?? row), ...step }, externalWorkspaceId) ?? []),
    ),
  );
  // The sends waiting for these messages (api/routes/messages.ts) hear it at commit: one notice per group of ids.
  const settled = updated.rows
    .filter((row) => row.status !== 'queued' && row.status !== 'sending')
    .map((row) => ({ id: row.id, status: row.status, at: row.updated_at.getTime() }));
  for (const payload of settledNotices(settled)) await announce(db, messageSettledChannel, payload);
}

/**
 * CTEs for the statement that takes parts (core/messages/parts.ts `takeWaitingParts`, whose CTE `parts` they read):
 * the messages of the parts taken that are still `queued` are `sending`, with a history row each (no event: the
 * status is not reported), as the take commits.
 */
export const markSending = {
  name: 'sending',
  ctes: `moved AS (
       UPDATE messages SET status = 'sending', updated_at = clock_timestamp()
        WHERE id IN (SELECT message_id FROM parts) AND status = 'queued'
       RETURNING id),
     sending_history AS (INSERT INTO message_events (message_id, status) SELECT id, 'sending' FROM moved ORDER BY id)`,
};

export interface StatusChange {
  status: MessageStatus;
  error: CarrierError | null;
  at: Date;
}

/** The workspace's message with its status history, oldest change first (one statement); 404 `not_found` when it has none. */
export async function getMessage(
  db: Queryable,
  workspaceId: string,
  id: string,
): Promise<MessageRow & { statusHistory: StatusChange[] }> {
  const result = await db.query<
    MessageRow & { history: Array<{ status: MessageStatus; error: CarrierError | null; at: string }> }
  >({
    name: 'sb-get-message',
    text: `SELECT ${messageColumns},
                  (SELECT coalesce(json_agg(json_build_object('status', e.status, 'error', e.error, 'at', e.at)
                                            ORDER BY e.id), '[]')
                     FROM message_events e WHERE e.message_id = m.id) AS history
             FROM messages m WHERE m.id = $1 AND m.workspace_id = $2`,
    values: [id, workspaceId],
  });
  const found = result.rows[0];
  if (found === undefined) throw notFound('message');
  const { history, ...row } = found;
  return { ...row, statusHistory: history.map((change) => ({ ...change, at: new Date(change.at) })) };
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
