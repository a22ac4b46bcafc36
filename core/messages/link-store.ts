/**
 * What a carrier's SMPP link (engine/messaging/) needs from the message records (docs/messaging.md, "Records",
 * "Receiving"): implemented over PostgreSQL in core/messages/ (`openLinkStore`); the link's own tests use doubles of
 * this interface. Every method is idempotent enough for at-least-once: a part acknowledged twice, a receipt recorded
 * twice, or an inbound part repeated after a reconnect changes nothing the second time it can tell.
 */

/** One outbound PDU waiting for its carrier: the `submit_sm` fields the link sends. */
export interface OutboundPart {
  /** `message_parts` row id. */
  id: string;
  messageId: string;
  /** E.164 with its `+`: the link writes `source_addr`/`destination_addr` as international (TON 1, NPI 1). */
  from: string;
  to: string;
  /** `short_message`, the concatenation header included (core/messages/encoding.ts `encodeText`). */
  bytes: Buffer;
  esmClass: number;
  dataCoding: number;
  /** How many times it was submitted before this one. */
  attempts: number;
}

/** A carrier's refusal or delivery error: `code` is the SMPP status (`ESME_RINVDSTADR`) or the receipt's `err:`. */
export interface CarrierError {
  code: string;
  message: string;
}

/** A delivery receipt (`deliver_sm` with `esm_class` bit 2), parsed by the link. */
export interface DeliveryReceipt {
  /** The id the carrier gave in `submit_sm_resp` (the receipt's `id:` or its `receipted_message_id`). */
  carrierMessageId: string;
  /** `DELIVRD` is delivered; `EXPIRED`, `DELETED`, `UNDELIV`, `REJECTD`, `UNKNOWN` are failed. */
  delivered: boolean;
  /** The receipt's `stat:` word as sent. */
  state: string;
  error: CarrierError | null;
}

/** One inbound `deliver_sm` that is not a receipt, as the carrier sent it. */
export interface InboundPart {
  /** E.164 with its `+` (the link adds it to international addresses). */
  from: string;
  to: string;
  bytes: Buffer;
  esmClass: number;
  dataCoding: number;
}

/** `accepted`: recorded (or already recorded); `unknown_number`: `to` is no workspace's number (ESME_RINVDSTADR). */
export type InboundOutcome = 'accepted' | 'unknown_number' | 'malformed';

export interface MessageLinkStore {
  /** Takes up to `limit` waiting parts of the carrier's numbers, oldest first (skipping locked ones), marked submitted. */
  takeParts(carrier: string, limit: number): Promise<OutboundPart[]>;
  /** The carrier took the part (`submit_sm_resp` status 0); its message is `sent` once every part is. */
  acknowledged(partId: string, carrierMessageId: string): Promise<void>;
  /** The carrier refused the part for good: its message is `failed` with `error`. */
  refused(partId: string, error: CarrierError): Promise<void>;
  /** The carrier throttled the part (ESME_RTHROTTLED, ESME_RMSGQFUL): waiting again, not taken before `notBefore`. */
  retryLater(partId: string, notBefore: Date): Promise<void>;
  /** After a session ends: every part of the carrier left submitted goes back to waiting; how many did. */
  requeueSubmitted(carrier: string): Promise<number>;
  /** A receipt updates its message, or waits for the `submit_sm_resp` it overtook. */
  receipt(carrier: string, receipt: DeliveryReceipt): Promise<void>;
  /** An inbound part: recorded, joined with its siblings, and the keywords (STOP, START, HELP) answered. */
  inbound(carrier: string, part: InboundPart): Promise<InboundOutcome>;
  /** Calls `wake` whenever parts of the carrier may be waiting (a send, a retry coming due); returns its stop. */
  onWaiting(carrier: string, wake: () => void): () => void;
}
