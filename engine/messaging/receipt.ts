/**
 * Delivery receipts (docs/messaging.md, "Receiving"): a `deliver_sm` with `esm_class` bit 2 carries the outcome of
 * a message we submitted, as the text SMPP 3.4 Appendix B suggests (`id:… sub:… dlvrd:… submit date:… done date:…
 * stat:… err:… text:…`) and, from SMSCs that send them, the `receipted_message_id` and `message_state` TLVs, which
 * win over the text where both are present (the text's id is sometimes the decimal form of a hexadecimal id). The
 * text is the carrier's: every field is checked, and a receipt without an id or a known state is refused.
 */
import type { DeliveryReceipt } from '../../core/messages/link-store.ts';

/** The final states: DELIVRD (and ACCEPTD, read on the subscriber's behalf) delivered; the rest failed. */
const finalStates = new Set(['DELIVRD', 'ACCEPTD', 'EXPIRED', 'DELETED', 'UNDELIV', 'REJECTD', 'UNKNOWN']);
const deliveredStates = new Set(['DELIVRD', 'ACCEPTD']);

/** `message_state` TLV values (SMPP 3.4 section 5.2.28) as the text's `stat:` words. */
const stateWords: Record<number, string> = {
  1: 'ENROUTE',
  2: 'DELIVRD',
  3: 'EXPIRED',
  4: 'DELETED',
  5: 'UNDELIV',
  6: 'ACCEPTD',
  7: 'UNKNOWN',
  8: 'REJECTD',
};

const stateMessages: Record<string, string> = {
  EXPIRED: 'the message expired before it could be delivered',
  DELETED: 'the message was deleted by the carrier',
  UNDELIV: 'the message could not be delivered',
  REJECTD: 'the carrier rejected the message',
  UNKNOWN: 'the carrier does not know what became of the message',
};

/** A carrier's message id: printable ASCII, at most 65 characters (SMPP 3.4 `message_id`). */
const messageIdPattern = /^[\x21-\x7e]{1,65}$/;

export type ReceiptResult =
  | { kind: 'receipt'; receipt: DeliveryReceipt }
  /** A receipt of a state that is not final (ENROUTE): nothing to record. */
  | { kind: 'intermediate' }
  | { kind: 'malformed'; reason: string };

/** The fields of an Appendix B receipt text, keys lower-cased; `text` takes the rest of the line. */
export function parseReceiptText(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  const textAt = text.search(/\btext:/i);
  const head = textAt === -1 ? text : text.slice(0, textAt);
  if (textAt !== -1) fields.set('text', text.slice(textAt + 5));
  for (const match of head.matchAll(/\b(id|sub|dlvrd|submit date|done date|stat|err):(\S*)/gi)) {
    const key = (match[1] ?? '').toLowerCase();
    if (!fields.has(key)) fields.set(key, match[2] ?? '');
  }
  return fields;
}

/**
 * The receipt in a `deliver_sm`: `text` its `short_message` (or `message_payload`) read as ASCII, and its TLVs when
 * present.
 */
export function parseReceipt(
  text: string,
  tlvs: { receiptedMessageId?: string | undefined; messageState?: number | undefined } = {},
): ReceiptResult {
  const fields = parseReceiptText(text);
  const carrierMessageId = tlvs.receiptedMessageId ?? fields.get('id');
  if (carrierMessageId === undefined || carrierMessageId === '') return { kind: 'malformed', reason: 'no message id' };
  if (!messageIdPattern.test(carrierMessageId)) return { kind: 'malformed', reason: 'bad message id' };
  let state: string | undefined;
  if (tlvs.messageState !== undefined) {
    state = stateWords[tlvs.messageState];
    if (state === undefined) return { kind: 'malformed', reason: 'unknown message_state' };
  } else {
    state = fields.get('stat')?.toUpperCase();
    if (state === undefined || state === '') return { kind: 'malformed', reason: 'no state' };
  }
  if (state === 'ENROUTE') return { kind: 'intermediate' };
  if (!finalStates.has(state)) return { kind: 'malformed', reason: 'unknown state' };
  const delivered = deliveredStates.has(state);
  const err = fields.get('err');
  if (err !== undefined && !/^[0-9A-Za-z]{1,10}$/.test(err)) return { kind: 'malformed', reason: 'bad err' };
  return {
    kind: 'receipt',
    receipt: {
      carrierMessageId,
      delivered,
      state,
      error: delivered ? null : { code: err ?? state, message: stateMessages[state] ?? state },
    },
  };
}
