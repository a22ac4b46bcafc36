/**
 * The SMPP parts of messages (docs/messaging.md, "Records", "Receiving"): `message_parts`. Outbound, one row per
 * PDU of a message, `waiting` → `submitted` (taken by the carrier's leader, FOR UPDATE SKIP LOCKED so two takers
 * never take the same part) → `acknowledged` with the carrier's id, or `failed`; back to `waiting` after a throttle
 * (not before a time) or a session's end. Inbound, the parts of concatenated texts waiting for their siblings, and
 * parts already made into a message, kept a short while so that one the carrier repeats after a reconnect is known.
 * The message's status follows from its parts (core/messages/messages.ts `settleMessages`). An outbound part's bytes
 * are emptied once the carrier took or refused it: they are never sent again, and a one-time code's SMS (whose
 * record shows the code masked) keeps its digits no longer than it must. An MMS is one part of its own (`channel`
 * `mms`), sent by the engines' MMS sender instead of the SMPP link.
 *
 * Longer than 400 lines because the table keeps one home: the outbound SMS and MMS parts and the inbound parts
 * waiting for their siblings share its rows and its indexes, and splitting them would give it two.
 */
import type { Queryable } from '../database.ts';
import type { EncodedPart } from './encoding.ts';
import type { CarrierError, OutboundPart } from './link-store.ts';

/**
 * The outbound SMS parts of a message, as the CTE `parts` of the statement that writes the message
 * (core/messages/messages.ts `createOutboundMessage`, one statement for both): `message` is that statement's CTE of
 * the message row, and the carrier and the parts' bytes, esm_class and data_coding are its parameters from number
 * `at` on (`outboundPartsValues`, in that order). No parts (an MMS, whose one part is `insertMmsPart`'s) insert none.
 */
export function outboundPartsCte(at: number): string {
  return `parts AS (
       INSERT INTO message_parts (direction, carrier, message_id, phone_number_id, part_index, part_count, state, bytes,
                                  esm_class, data_coding)
       SELECT 'outbound', $${at}, message.id, message.phone_number_id, part.index, cardinality($${at + 1}::bytea[]),
              'waiting', part.bytes, part.esm_class, part.data_coding
         FROM message, unnest($${at + 1}::bytea[], $${at + 2}::smallint[], $${at + 3}::smallint[]) WITH ORDINALITY
              AS part (bytes, esm_class, data_coding, index))`;
}

/** The parameters of `outboundPartsCte`, in its order. */
export function outboundPartsValues(carrier: string, parts: readonly EncodedPart[]): unknown[] {
  return [
    carrier,
    parts.map((part) => part.bytes),
    parts.map((part) => part.esmClass),
    parts.map((part) => part.dataCoding),
  ];
}

/** Writes an MMS' one part `waiting` for the MMS sender (engine/messaging/mms.ts): its content is the message's. */
export async function insertMmsPart(db: Queryable, owner: { messageId: string; carrier: string; numberId: string }) {
  await db.query(
    `INSERT INTO message_parts (direction, channel, carrier, message_id, phone_number_id, part_index, part_count, state,
                                bytes, esm_class, data_coding)
     VALUES ('outbound', 'mms', $1, $2, $3, 1, 1, 'waiting', ''::bytea, 0, 0)`,
    [owner.carrier, owner.messageId, owner.numberId],
  );
}

/** An MMS taken for sending: its part, and what the carrier's media interface is sent. */
export interface MmsPart {
  id: string;
  messageId: string;
  carrier: string;
  from: string;
  to: string;
  text: string;
  media: Array<{ url: string; contentType: string }>;
  /** Submissions before this one. */
  attempts: number;
}

/**
 * Takes up to `limit` MMS parts due at `now`, oldest first, skipping parts another transaction holds: waiting ones,
 * and submitted ones taken over `leaseMs` ago (the engine that took them stopped before it knew the answer: sent
 * again, at least once). They are `submitted` when the transaction commits.
 */
export async function takeMmsParts(db: Queryable, limit: number, now: Date, leaseMs: number): Promise<MmsPart[]> {
  const result = await db.query<Omit<MmsPart, 'media'> & { media: Array<{ url: string; contentType: string }> }>(
    `WITH taken AS (
       SELECT id FROM message_parts
        WHERE direction = 'outbound' AND channel = 'mms' AND state IN ('waiting', 'submitted')
          AND CASE state WHEN 'waiting' THEN not_before IS NULL OR not_before <= $2
                         ELSE submitted_at < $2 - make_interval(secs => $3::float8 / 1000) END
        ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED)
     UPDATE message_parts p SET state = 'submitted', attempts = p.attempts + 1, submitted_at = $2, not_before = NULL
       FROM taken, messages m
      WHERE p.id = taken.id AND m.id = p.message_id
     RETURNING p.id, p.message_id AS "messageId", p.carrier, m.from_number AS "from", m.to_number AS "to", m.text,
               m.media, p.attempts - 1 AS attempts`,
    [limit, now, leaseMs],
  );
  return result.rows.map((row) => ({
    ...row,
    media: row.media.map((medium) => ({ url: medium.url, contentType: medium.contentType })),
  }));
}

/** What a message's parts say of it (core/messages/messages.ts `settleMessages`). */
export interface PartsSummary {
  total: number;
  acknowledged: number;
  /** Acknowledged parts with a delivered receipt. */
  delivered: number;
  /** Parts submitted at least once. */
  taken: number;
  /** The error of the first part refused or reported undelivered, if one was. */
  error: CarrierError | null;
}

export async function partsSummary(db: Queryable, messageIds: readonly string[]): Promise<Map<string, PartsSummary>> {
  const result = await db.query<PartsSummary & { message_id: string }>({
    name: 'sb-parts-summary',
    text: `SELECT message_id, count(*)::int AS total,
            (count(*) FILTER (WHERE state = 'acknowledged'))::int AS acknowledged,
            (count(*) FILTER (WHERE state = 'acknowledged' AND receipt = 'delivered'))::int AS delivered,
            (count(*) FILTER (WHERE attempts > 0))::int AS taken,
            (array_agg(error ORDER BY part_index)
               FILTER (WHERE error IS NOT NULL AND (state = 'failed' OR receipt = 'failed')))[1] AS error
       FROM message_parts WHERE message_id = ANY ($1::uuid[]) AND direction = 'outbound'
      GROUP BY message_id`,
    values: [messageIds],
  });
  return new Map(result.rows.map(({ message_id: id, ...summary }) => [id, summary]));
}

/**
 * Takes up to `limit` of the carrier's waiting parts due at `now`, oldest message first and each message's parts in
 * order, skipping parts another transaction holds; they are `submitted` when the transaction commits.
 */
export async function takeWaitingParts(
  db: Queryable,
  carrier: string,
  limit: number,
  now: Date,
  /** CTEs of another table's module over the parts taken (the CTE `parts`), run in the same statement. */
  also: { name: string; ctes: string },
): Promise<OutboundPart[]> {
  const result = await db.query<{
    id: string;
    message_id: string;
    from_number: string;
    to_number: string;
    bytes: Buffer;
    esm_class: number;
    data_coding: number;
    attempts: number;
    created_at: Date;
    part_index: number;
  }>({
    name: `sb-take-parts-${also.name}`,
    text: `WITH taken AS (
       SELECT id FROM message_parts
        WHERE carrier = $1 AND direction = 'outbound' AND state = 'waiting' AND channel = 'smpp'
          AND (not_before IS NULL OR not_before <= $3)
        ORDER BY created_at, message_id, part_index
        LIMIT $2 FOR UPDATE SKIP LOCKED),
     parts AS (
       UPDATE message_parts p SET state = 'submitted', attempts = p.attempts + 1, submitted_at = $3, not_before = NULL
         FROM taken, messages m
        WHERE p.id = taken.id AND m.id = p.message_id
       RETURNING p.id, p.message_id, m.from_number, m.to_number, p.bytes, p.esm_class, p.data_coding,
                 p.attempts - 1 AS attempts, p.created_at, p.part_index),
     ${also.ctes}
     SELECT * FROM parts`,
    values: [carrier, limit, now],
  });
  return result.rows
    .sort(
      (a, b) =>
        a.created_at.getTime() - b.created_at.getTime() ||
        a.message_id.localeCompare(b.message_id) ||
        a.part_index - b.part_index,
    )
    .map((row) => ({
      id: row.id,
      messageId: row.message_id,
      from: row.from_number,
      to: row.to_number,
      bytes: row.bytes,
      esmClass: row.esm_class,
      dataCoding: row.data_coding,
      attempts: row.attempts,
    }));
}

/** The carrier's answer to one part: the id it gave the part. */
export interface PartAnswer {
  partId: string;
  carrierMessageId: string;
}

/**
 * The advisory lock where a part's answer and a receipt of its carrier id meet (core/messages/receipts.ts): its key,
 * for JavaScript and as SQL over a carrier and a carrier id column.
 */
export const carrierIdLockKey = (carrier: string, carrierMessageId: string) => `smpp-id:${carrier}:${carrierMessageId}`;
const carrierIdLockKeySql = (carrier: string, carrierMessageId: string) =>
  `hashtextextended('smpp-id:' || ${carrier} || ':' || ${carrierMessageId}, 0)`;

/**
 * Records the carrier's ids for parts it took, in one statement (the link's answers come in groups: core/messages/
 * store.ts): each part `acknowledged` with its id and its bytes emptied (a part already answered, or refused, stays as
 * it is; a part answered twice in `answers` keeps its first id); the parts this changed come back with their message
 * and carrier. In the same statement it takes the meeting locks of the carrier ids answered (in one order, so that
 * two takers never wait in a circle), held until commit: what the caller reads after this (the receipts that
 * overtook these answers) sees every receipt that a transaction holding one of those locks committed.
 */
export async function acknowledgeParts<Id extends string | null = string>(
  db: Queryable,
  answers: readonly { partId: string; carrierMessageId: Id }[],
): Promise<Array<{ partId: string; carrierMessageId: Id; messageId: string; carrier: string }>> {
  // An MMS carrier may answer without an id (null): its part is acknowledged all the same, with no lock to take.
  const first = new Map<string, Id>();
  for (const { partId, carrierMessageId } of answers) if (!first.has(partId)) first.set(partId, carrierMessageId);
  if (first.size === 0) return [];
  const key = carrierIdLockKeySql('acked.carrier', 'acked.carrier_message_id');
  const result = await db.query<{ id: string; message_id: string; carrier: string; carrier_message_id: Id }>({
    name: 'sb-acknowledge-parts',
    text: `WITH acked AS (
             UPDATE message_parts p SET state = 'acknowledged', carrier_message_id = answer.carrier_message_id,
                    not_before = NULL, bytes = ''::bytea
               FROM unnest($1::uuid[], $2::text[]) AS answer (id, carrier_message_id)
              WHERE p.id = answer.id AND p.direction = 'outbound' AND p.state IN ('submitted', 'waiting')
             RETURNING p.id, p.message_id, p.carrier, p.carrier_message_id)
           SELECT acked.*,
                  CASE WHEN acked.carrier_message_id IS NOT NULL THEN pg_advisory_xact_lock(${key}) END AS locked
             FROM acked ORDER BY ${key} NULLS FIRST`,
    values: [[...first.keys()], [...first.values()]],
  });
  return result.rows.map((row) => ({
    partId: row.id,
    carrierMessageId: row.carrier_message_id,
    messageId: row.message_id,
    carrier: row.carrier,
  }));
}

/**
 * Fails a part the carrier refused, and the parts of its message still waiting (a text missing a part is no use);
 * the message's id when the part was still open.
 */
export async function failPart(db: Queryable, partId: string, error: CarrierError): Promise<string | undefined> {
  const result = await db.query<{ message_id: string }>(
    `UPDATE message_parts SET state = 'failed', error = $2, not_before = NULL, bytes = ''::bytea
      WHERE id = $1 AND direction = 'outbound' AND state IN ('submitted', 'waiting')
     RETURNING message_id`,
    [partId, JSON.stringify(error)],
  );
  const messageId = result.rows[0]?.message_id;
  if (messageId === undefined) return undefined;
  await db.query(
    `UPDATE message_parts SET state = 'failed', bytes = ''::bytea
      WHERE message_id = $1 AND direction = 'outbound' AND state = 'waiting'`,
    [messageId],
  );
  return messageId;
}

/** A submitted part back to waiting, not taken before `notBefore`; its carrier when it was submitted. */
export async function retryPart(db: Queryable, partId: string, notBefore: Date): Promise<string | undefined> {
  const result = await db.query<{ carrier: string }>(
    `UPDATE message_parts SET state = 'waiting', not_before = $2
      WHERE id = $1 AND direction = 'outbound' AND state = 'submitted' RETURNING carrier`,
    [partId, notBefore],
  );
  return result.rows[0]?.carrier;
}

/** Every part of the carrier left submitted goes back to waiting (at least once); how many did. */
export async function requeueSubmittedParts(db: Queryable, carrier: string): Promise<number> {
  const result = await db.query(
    `UPDATE message_parts SET state = 'waiting'
      WHERE carrier = $1 AND direction = 'outbound' AND state = 'submitted' AND channel = 'smpp'`,
    [carrier],
  );
  return result.rowCount ?? 0;
}

/** When the carrier's next throttled part comes due after `now`, if one waits. */
export async function nextRetryAt(db: Queryable, carrier: string, now: Date): Promise<Date | undefined> {
  const result = await db.query<{ at: Date | null }>(
    `SELECT min(not_before) AS at FROM message_parts
      WHERE carrier = $1 AND direction = 'outbound' AND state = 'waiting' AND not_before > $2 AND channel = 'smpp'`,
    [carrier, now],
  );
  return result.rows[0]?.at ?? undefined;
}

/** The acknowledged part the carrier gave this id, locked until commit, with its receipt so far. */
export async function partByCarrierId(
  db: Queryable,
  carrier: string,
  carrierMessageId: string,
): Promise<{ id: string; messageId: string; receipt: string | null } | undefined> {
  const result = await db.query<{ id: string; message_id: string; receipt: string | null }>(
    `SELECT id, message_id, receipt FROM message_parts
      WHERE carrier = $1 AND carrier_message_id = $2 AND state = 'acknowledged'
      ORDER BY created_at DESC LIMIT 1 FOR UPDATE`,
    [carrier, carrierMessageId],
  );
  const row = result.rows[0];
  return row === undefined ? undefined : { id: row.id, messageId: row.message_id, receipt: row.receipt };
}

/** Records a part's delivery receipt. */
export async function setPartReceipt(
  db: Queryable,
  partId: string,
  delivered: boolean,
  error: CarrierError | null,
): Promise<void> {
  await db.query('UPDATE message_parts SET receipt = $2, error = $3 WHERE id = $1', [
    partId,
    delivered ? 'delivered' : 'failed',
    error === null ? null : JSON.stringify(error),
  ]);
}

/** An inbound part as kept: the same peer to the same number, its place in its text, and what repeats it. */
export interface InboundPartRow {
  carrier: string;
  numberId: string;
  peer: string;
  reference: number | null;
  index: number;
  count: number;
  text: string;
  bytes: Buffer;
  esmClass: number;
  dataCoding: number;
  digest: string;
}

/**
 * Whether a part with this digest from the peer to the number is already here: waiting for its siblings, or made
 * into a message in the last `windowMs` (by the database's clock, which wrote them).
 */
export async function isRepeatedPart(
  db: Queryable,
  numberId: string,
  peer: string,
  digest: string,
  windowMs: number,
): Promise<boolean> {
  const found = await db.query(
    `SELECT 1 FROM message_parts
      WHERE direction = 'inbound' AND phone_number_id = $1 AND peer = $2 AND digest = $3
        AND (state = 'waiting' OR created_at >= clock_timestamp() - make_interval(secs => $4::float8 / 1000))
      LIMIT 1`,
    [numberId, peer, digest, windowMs],
  );
  return found.rowCount !== 0;
}

/** Keeps an inbound part: `waiting` for its siblings, or `joined` to the message it already is. */
export async function insertInboundPart(db: Queryable, part: InboundPartRow, messageId: string | null): Promise<void> {
  await db.query(
    `INSERT INTO message_parts (direction, carrier, message_id, phone_number_id, part_index, part_count, state, bytes,
                                esm_class, data_coding, peer, reference, text, digest)
     VALUES ('inbound', $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
    [
      part.carrier,
      messageId,
      part.numberId,
      part.index,
      part.count,
      messageId === null ? 'waiting' : 'joined',
      part.bytes,
      part.esmClass,
      part.dataCoding,
      part.peer,
      part.reference,
      part.text,
      part.digest,
    ],
  );
}

/** The waiting parts of one concatenated text (the peer's to the number, this reference and count), in order. */
export async function waitingSiblings(
  db: Queryable,
  part: Pick<InboundPartRow, 'numberId' | 'peer' | 'reference' | 'count'>,
): Promise<Array<{ id: string; index: number; text: string }>> {
  const result = await db.query<{ id: string; index: number; text: string }>(
    `SELECT id, part_index AS index, text FROM message_parts
      WHERE direction = 'inbound' AND state = 'waiting' AND phone_number_id = $1 AND peer = $2 AND reference = $3
        AND part_count = $4
      ORDER BY part_index`,
    [part.numberId, part.peer, part.reference, part.count],
  );
  return result.rows;
}

/** Marks the parts as made into the message. */
export async function joinParts(db: Queryable, partIds: readonly string[], messageId: string): Promise<void> {
  await db.query(`UPDATE message_parts SET state = 'joined', message_id = $2 WHERE id = ANY ($1::uuid[])`, [
    partIds,
    messageId,
  ]);
}

/**
 * Drops up to `most` inbound parts (of the carrier, or of every carrier for null) made into messages over `windowMs`
 * ago: no repeat is that late. How many were dropped.
 */
export async function dropJoinedParts(
  db: Queryable,
  carrier: string | null,
  windowMs: number,
  most = 200,
): Promise<number> {
  const dropped = await db.query(
    `DELETE FROM message_parts WHERE id IN (
       SELECT id FROM message_parts
        WHERE ($1::text IS NULL OR carrier = $1) AND direction = 'inbound' AND state = 'joined'
          AND created_at < clock_timestamp() - make_interval(secs => $2::float8 / 1000)
        LIMIT $3 FOR UPDATE SKIP LOCKED)`,
    [carrier, windowMs, most],
  );
  return dropped.rowCount ?? 0;
}

/** One concatenated text's waiting parts: the peer's to the number, with this reference and count. */
export type WaitingText = Pick<InboundPartRow, 'carrier' | 'numberId' | 'peer' | 'reference' | 'count'> & {
  /** The number's E.164. */
  to: string;
};

/**
 * Up to `most` concatenated texts whose first waiting part came over `ageMs` ago (by the database's clock, which
 * wrote them), oldest first: their siblings are given up on.
 */
export async function staleWaitingTexts(db: Queryable, ageMs: number, most: number): Promise<WaitingText[]> {
  const result = await db.query<WaitingText>(
    `SELECT p.carrier, p.phone_number_id AS "numberId", n.e164 AS "to", p.peer, p.reference, p.part_count AS count
       FROM message_parts p JOIN phone_numbers n ON n.id = p.phone_number_id
      WHERE p.direction = 'inbound' AND p.state = 'waiting'
      GROUP BY p.carrier, p.phone_number_id, n.e164, p.peer, p.reference, p.part_count
     HAVING min(p.created_at) < clock_timestamp() - make_interval(secs => $1::float8 / 1000)
      ORDER BY min(p.created_at) LIMIT $2`,
    [ageMs, most],
  );
  return result.rows;
}

/** Drops the parts (those of a text no workspace's number takes any more). */
export async function dropParts(db: Queryable, partIds: readonly string[]): Promise<void> {
  await db.query('DELETE FROM message_parts WHERE id = ANY ($1::uuid[])', [partIds]);
}
