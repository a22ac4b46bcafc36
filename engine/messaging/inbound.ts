/**
 * What the carrier delivers (docs/messaging.md, "Receiving"): a `deliver_sm` read from its own bytes (the text's
 * bytes as sent, for reassembly), checked field by field, and handed to the message records as a receipt or an
 * inbound part. The answer is the `deliver_sm_resp` status: 0 when recorded; an address error for an address we
 * cannot take or a number no workspace has; a permanent application error for content that will never be taken (the
 * carrier should not retry it); a temporary one when the records could not be written (the carrier retries).
 */
import smpp from 'smpp';
import type { MessageLinkStore } from '../../core/messages/link-store.ts';
import type { Log } from '../../core/log.ts';
import type { MessagingMetrics } from './metrics.ts';
import { parseReceipt } from './receipt.ts';

const status = {
  ok: 0,
  invalidLength: smpp.errors.ESME_RINVCMDLEN ?? 0x02,
  invalidSource: smpp.errors.ESME_RINVSRCADR ?? 0x0a,
  invalidDestination: smpp.errors.ESME_RINVDSTADR ?? 0x0b,
  /** ESME Receiver Temporary App Error: the carrier delivers it again later. */
  temporary: smpp.errors.ESME_RX_T_APPN ?? 0x64,
  /** ESME Receiver Permanent App Error: it will never be taken; the carrier should not retry. */
  permanent: smpp.errors.ESME_RX_P_APPN ?? 0x65,
};

const tags = { receiptedMessageId: 0x001e, messagePayload: 0x0424, messageState: 0x0427 };

/** A `deliver_sm`'s fields as its bytes carry them. */
export interface DeliverSm {
  sourceTon: number;
  source: string;
  destinationTon: number;
  destination: string;
  esmClass: number;
  dataCoding: number;
  /** `short_message`, or `message_payload` when that carries the text. */
  text: Buffer;
  tlvs: Map<number, Buffer>;
}

/** Reads a `deliver_sm` frame (SMPP 3.4 section 4.6.1); undefined when a field runs past its end or its limit. */
export function readDeliverSm(frame: Buffer): DeliverSm | undefined {
  let at = 16;
  const octet = () => (at < frame.length ? (frame[at++] as number) : undefined);
  const cString = (most: number) => {
    const end = frame.indexOf(0, at);
    if (end === -1 || end - at > most) return undefined;
    const value = frame.toString('latin1', at, end);
    at = end + 1;
    return value;
  };
  if (cString(5) === undefined) return undefined; // service_type
  const sourceTon = octet();
  octet(); // source_addr_npi
  const source = cString(20);
  const destinationTon = octet();
  octet(); // dest_addr_npi
  const destination = cString(20);
  const esmClass = octet();
  octet(); // protocol_id
  octet(); // priority_flag
  if (cString(16) === undefined || cString(16) === undefined) return undefined; // schedule, validity
  octet(); // registered_delivery
  octet(); // replace_if_present_flag
  const dataCoding = octet();
  octet(); // sm_default_msg_id
  const smLength = octet();
  if (
    sourceTon === undefined ||
    source === undefined ||
    destinationTon === undefined ||
    destination === undefined ||
    esmClass === undefined ||
    dataCoding === undefined ||
    smLength === undefined ||
    smLength > 254 ||
    at + smLength > frame.length
  ) {
    return undefined;
  }
  const shortMessage = frame.subarray(at, at + smLength);
  at += smLength;
  const tlvs = new Map<number, Buffer>();
  while (at < frame.length) {
    if (at + 4 > frame.length) return undefined;
    const tag = frame.readUInt16BE(at);
    const length = frame.readUInt16BE(at + 2);
    if (at + 4 + length > frame.length) return undefined;
    tlvs.set(tag, frame.subarray(at + 4, at + 4 + length));
    at += 4 + length;
  }
  const payload = tlvs.get(tags.messagePayload);
  // SMPP 3.4: the text is in one or the other, never both.
  if (payload !== undefined && shortMessage.length > 0) return undefined;
  const text = payload ?? shortMessage;
  return { sourceTon, source, destinationTon, destination, esmClass, dataCoding, text, tlvs };
}

/**
 * An international number as E.164 with its `+`: TON 1 (international), or 0 (unknown) holding a whole international
 * number, 2 to 15 digits. National, alphanumeric and short-code addresses are not taken.
 */
export function internationalNumber(ton: number, address: string): string | undefined {
  if (ton !== 0 && ton !== 1) return undefined;
  const digits = address.startsWith('+') ? address.slice(1) : address;
  return /^[1-9]\d{1,14}$/.test(digits) ? `+${digits}` : undefined;
}

interface Handling {
  carrier: string;
  store: MessageLinkStore;
  metrics: MessagingMetrics;
  log: Pick<Log, 'warn'>;
}

/** Handles one `deliver_sm`; resolves with its `deliver_sm_resp` status, never rejects. */
export async function deliver(frame: Buffer, { carrier, store, metrics, log }: Handling): Promise<number> {
  const refuse = (reason: string, answer: number) => {
    metrics.refused(reason);
    return answer;
  };
  const pdu = readDeliverSm(frame);
  if (pdu === undefined) return refuse('malformed_pdu', status.invalidLength);
  try {
    if ((pdu.esmClass & 0x04) !== 0) {
      const receiptedId = pdu.tlvs.get(tags.receiptedMessageId);
      const state = pdu.tlvs.get(tags.messageState);
      const parsed = parseReceipt(pdu.text.toString('latin1'), {
        receiptedMessageId: receiptedId?.toString('latin1').replace(/\0+$/, ''),
        messageState: state?.length === 1 ? state[0] : undefined,
      });
      if (parsed.kind === 'malformed') return refuse('bad_receipt', status.permanent);
      metrics.received(parsed.kind);
      if (parsed.kind === 'receipt') await store.receipt(carrier, parsed.receipt);
      return status.ok;
    }
    const from = internationalNumber(pdu.sourceTon, pdu.source);
    if (from === undefined) return refuse('bad_source', status.invalidSource);
    const to = internationalNumber(pdu.destinationTon, pdu.destination);
    if (to === undefined) return refuse('bad_destination', status.invalidDestination);
    const outcome = await store.inbound(carrier, {
      from,
      to,
      bytes: Buffer.from(pdu.text),
      esmClass: pdu.esmClass,
      dataCoding: pdu.dataCoding,
    });
    if (outcome === 'unknown_number') return refuse('unknown_number', status.invalidDestination);
    if (outcome === 'malformed') return refuse('malformed_message', status.permanent);
    metrics.received('inbound');
    return status.ok;
  } catch (error) {
    log.warn({ err: error, carrier }, 'a delivery from the carrier could not be recorded; it will be delivered again');
    return refuse('store_error', status.temporary);
  }
}
