/**
 * An inbound `deliver_sm` that is not a receipt (docs/messaging.md, "Receiving"): decoded, kept until its siblings
 * came when it is one part of a concatenated text, then one message with `message.received`; a keyword (STOP, START,
 * HELP) is answered with an opt-out or opt-in and a reply sent even to a peer now opted out. One peer's parts to
 * one number are taken one at a time (a transaction-level advisory lock), so siblings arriving together join once.
 *
 * The carrier may deliver a part again after a reconnect (it never got our answer): a part identical to one still
 * waiting, or to one made into a message within the last two minutes, is taken as that repeat and changes nothing.
 * The cost: the same single text from the same peer twice within two minutes is one message.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { Queryable } from '../database.ts';
import { inTransaction } from '../database.ts';
import { helpTextOf } from '../identity/workspaces.ts';
import { e164Pattern } from '../ids.ts';
import { inboundNumberOf, type TextingNumber } from '../numbers/numbers.ts';
import { decodePart } from './encoding.ts';
import { keywordOf, replyTo } from './keywords.ts';
import type { InboundOutcome, InboundPart } from './link-store.ts';
import { createOutboundMessage, recordInboundMessage } from './messages.ts';
import { optIn, optOut } from './opt-outs.ts';
import {
  dropJoinedParts,
  dropParts,
  insertInboundPart,
  isRepeatedPart,
  joinParts,
  waitingSiblings,
  type WaitingText,
} from './parts.ts';

/** How long after a part became a message the same part again is a repeat of it. */
export const repeatWindowMs = 120_000;

/** How long a concatenated text's parts wait for their siblings before what came is delivered incomplete. */
export const incompleteAfterMs = 3_600_000;

/** One peer's parts to one number are taken under this lock (a transaction-level advisory lock's key). */
function peerLock(numberId: string, peer: string): string {
  return `sms-in:${numberId}:${peer}`;
}

/** Takes the peer's lock on the number until the transaction ends (an inbound MMS takes it too). */
export async function lockPeer(db: Queryable, numberId: string, peer: string): Promise<void> {
  await db.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [peerLock(numberId, peer)]);
}

const e164 = new RegExp(e164Pattern);
/** SMPP 3.4's source_addr: at most 20 characters (a number, a short code, or an alphanumeric sender). */
const sourcePattern = /^\+?[\x20-\x7e]{1,20}$/;

/** The longest text kept (and carried by `message.received`): 255 parts of GSM text fit. */
const longestText = 40_000;

/** A decoded text as PostgreSQL can keep it: a NUL (UCS-2 or Latin-1 can carry one) shown as U+FFFD. */
function storable(text: string): string {
  return text.replaceAll('\u0000', '\uFFFD');
}

function isBytes(value: unknown): value is Buffer {
  return Buffer.isBuffer(value) && value.length <= 255;
}

/** Records one inbound part from `carrier`; the outcome the link answers the carrier with. */
export async function receiveInbound(pool: pg.Pool, carrier: string, part: InboundPart): Promise<InboundOutcome> {
  if (typeof part.from !== 'string' || !sourcePattern.test(part.from) || !isBytes(part.bytes)) return 'malformed';
  if (typeof part.to !== 'string' || !e164.test(part.to)) return 'unknown_number';
  if (!Number.isInteger(part.esmClass) || !Number.isInteger(part.dataCoding)) return 'malformed';
  let decoded: ReturnType<typeof decodePart>;
  try {
    decoded = decodePart(part.bytes, part.esmClass, part.dataCoding);
  } catch {
    decoded = undefined;
  }
  if (decoded === undefined) return 'malformed';
  const concatenation = decoded.concatenation;
  if (concatenation !== undefined && (concatenation.index < 1 || concatenation.index > concatenation.count)) {
    return 'malformed';
  }
  const number = await inboundNumberOf(pool, carrier, part.to);
  if (number === undefined) return 'unknown_number';
  // A "concatenated" text of one part is a text.
  const joined = concatenation === undefined || concatenation.count === 1;
  const digest = createHash('sha256')
    .update(
      joined
        ? JSON.stringify(['text', part.esmClass, part.dataCoding, part.bytes.toString('hex')])
        : JSON.stringify(['part', concatenation.reference, concatenation.count, concatenation.index]),
    )
    .digest('hex');
  const row = {
    carrier,
    numberId: number.number.id,
    peer: part.from,
    reference: joined ? null : concatenation.reference,
    index: joined ? 1 : concatenation.index,
    count: joined ? 1 : concatenation.count,
    text: storable(decoded.text),
    bytes: part.bytes,
    esmClass: part.esmClass,
    dataCoding: part.dataCoding,
    digest,
  };
  await inTransaction(pool, async (db) => {
    await lockPeer(db, row.numberId, row.peer);
    await dropJoinedParts(db, carrier, repeatWindowMs);
    if (await isRepeatedPart(db, row.numberId, row.peer, digest, repeatWindowMs)) return;
    if (joined) {
      const message = await recordInboundMessage(db, {
        workspace: number.workspace,
        numberId: row.numberId,
        from: part.from,
        to: part.to,
        text: row.text,
        segments: 1,
      });
      await insertInboundPart(db, row, message.id);
      await answerKeyword(db, number, part.from, row.text);
      return;
    }
    await insertInboundPart(db, row, null);
    const siblings = await waitingSiblings(db, row);
    if (siblings.length < row.count) return;
    const text = siblings
      .map((sibling) => sibling.text)
      .join('')
      .slice(0, longestText);
    const message = await recordInboundMessage(db, {
      workspace: number.workspace,
      numberId: row.numberId,
      from: part.from,
      to: part.to,
      text,
      segments: row.count,
    });
    await joinParts(
      db,
      siblings.map((sibling) => sibling.id),
      message.id,
    );
    await answerKeyword(db, number, part.from, text);
  });
  return 'accepted';
}

/**
 * A concatenated text whose siblings did not all come within `incompleteAfterMs` (found by the engines' sweep,
 * core/messages/sweep.ts): the parts that came, in order, made into one message marked incomplete, with
 * `message.received`. Its keywords are not answered (the whole text is not known). A text whose number is no longer
 * a claimed number of the carrier is dropped. `skipped` when the peer's parts are being taken by someone else (an
 * inbound part or another engine's sweep: the next sweep sees what is left).
 */
export async function deliverIncomplete(
  pool: pg.Pool,
  text: WaitingText,
): Promise<'delivered' | 'dropped' | 'skipped'> {
  return inTransaction(pool, async (db) => {
    const locked = await db.query<{ locked: boolean }>(
      'SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS locked',
      [peerLock(text.numberId, text.peer)],
    );
    if (locked.rows[0]?.locked !== true) return 'skipped';
    const siblings = await waitingSiblings(db, text);
    if (siblings.length === 0) return 'skipped';
    const ids = siblings.map((sibling) => sibling.id);
    const number = await inboundNumberOf(db, text.carrier, text.to);
    if (number === undefined) {
      await dropParts(db, ids);
      return 'dropped';
    }
    const message = await recordInboundMessage(db, {
      workspace: number.workspace,
      numberId: text.numberId,
      from: text.peer,
      to: text.to,
      text: siblings
        .map((sibling) => sibling.text)
        .join('')
        .slice(0, longestText),
      segments: siblings.length,
      incomplete: siblings.length < text.count,
    });
    await joinParts(db, ids, message.id);
    return 'delivered';
  });
}

/**
 * A keyword's opt-out or opt-in, and its reply from the number: written whatever the peer's opt-out and the
 * number's registration (the confirmation of a STOP goes to a peer now opted out). HELP is answered with the
 * workspace's help text (its texting settings), or the default one. A sender that cannot be texted back (an
 * alphanumeric one) gets no reply.
 */
export async function answerKeyword(db: Queryable, number: TextingNumber, peer: string, text: string): Promise<void> {
  const found = keywordOf(text);
  if (found === undefined) return;
  const phoneNumberId = number.number.id;
  if (found.keyword === 'stop') {
    await optOut(db, { workspaceId: number.workspace.id, phoneNumberId, peer, keyword: found.word });
  } else if (found.keyword === 'start') {
    await optIn(db, phoneNumberId, peer);
  }
  if (!e164.test(peer)) return;
  const help = found.keyword === 'help' ? await helpTextOf(db, number.workspace.id) : null;
  await createOutboundMessage(db, {
    workspace: number.workspace,
    number: number.number,
    to: peer,
    text: replyTo(found.keyword, help),
    actor: null,
  });
}
