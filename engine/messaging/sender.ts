/**
 * Sending over one bound session (docs/messaging.md, "Carriers speak SMPP 3.4"): parts taken from the records up to
 * the free window (at most `window` `submit_sm` unanswered, the parts taken and not yet sent included), sent at the
 * carrier's pace, and each answer recorded: acknowledged with the carrier's message id; throttled (ESME_RTHROTTLED,
 * ESME_RMSGQFUL), which slows the pace and puts the part back for later; refused for good with the status's name. A
 * part whose answer never comes, or whose answer could not be recorded, ends the session: the records put every part
 * left submitted back to waiting when it ends (at least once, never lost).
 */
import smpp from 'smpp';
import type { Log } from '../../core/log.ts';
import type { MessageLinkStore, OutboundPart } from '../../core/messages/link-store.ts';
import { wait } from '../media/player.ts';
import type { MessagingMetrics } from './metrics.ts';
import type { Pacing } from './pacing.ts';
import type { SmppSession } from './session.ts';

const throttling = new Set([smpp.errors.ESME_RTHROTTLED ?? 0x58, smpp.errors.ESME_RMSGQFUL ?? 0x14]);
const statusNames = new Map(Object.entries(smpp.errors).map(([name, value]) => [value, name]));

/** An SMPP command status by its name in SMPP 3.4 (`ESME_RINVDSTADR`), or its number in hexadecimal. */
export function statusName(status: number): string {
  return statusNames.get(status) ?? `0x${status.toString(16).padStart(8, '0')}`;
}

/** A carrier's message id as `submit_sm_resp` may carry it: printable ASCII, at most 65 characters. */
const messageIdPattern = /^[\x21-\x7e]{1,65}$/;
/** E.164 with its `+`, as the records keep numbers; the PDU carries the digits (TON 1, NPI 1). */
const e164 = /^\+([1-9]\d{1,14})$/;

export interface SenderOptions {
  session: SmppSession;
  carrier: string;
  store: MessageLinkStore;
  metrics: MessagingMetrics;
  pacing: Pacing;
  window: number;
  /** How long a throttled part waits before it may be taken again. */
  retryAfterMs: number;
  now: () => number;
  log: Pick<Log, 'warn'>;
  /** The session can no longer be trusted to have sent what we think (an answer missing or not recorded). */
  fail(reason: string): void;
}

export class Sender {
  /** Parts taken and not yet answered (sent or waiting for their pace). */
  private inFlight = 0;
  /** Whether parts may be waiting: set by a wake, and while a take fills the window. */
  private wanted = false;
  private pumping = false;
  private readonly stopping = new AbortController();

  constructor(private readonly options: SenderOptions) {}

  /** Parts may be waiting. */
  wake(): void {
    this.wanted = true;
    void this.pump();
  }

  /** No more parts are taken or sent; answers still coming are recorded. */
  stop(): void {
    this.stopping.abort();
  }

  /** Parts unanswered (tests: the window is never exceeded). */
  get unanswered(): number {
    return this.inFlight;
  }

  private async pump(): Promise<void> {
    const { store, carrier, window, pacing } = this.options;
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (this.wanted && !this.stopping.signal.aborted) {
        const free = window - this.inFlight;
        if (free <= 0) break;
        this.wanted = false;
        const parts = await store.takeParts(carrier, free);
        if (parts.length >= free) this.wanted = true;
        this.inFlight += parts.length;
        for (const part of parts) {
          await wait(pacing.take(), this.stopping.signal);
          // Taken but not sent: the records put it back to waiting when the session ends.
          if (this.stopping.signal.aborted) break;
          this.submit(part);
        }
      }
    } catch (error) {
      this.options.log.warn({ err: error, carrier }, 'parts could not be taken from the records');
      this.options.fail('store_error');
    } finally {
      this.pumping = false;
    }
  }

  private submit(part: OutboundPart): void {
    const from = e164.exec(part.from)?.[1];
    const to = e164.exec(part.to)?.[1];
    if (from === undefined || to === undefined || part.bytes.length > 254) {
      this.options.metrics.part('refused');
      void this.record(part, () =>
        this.options.store.refused(part.id, {
          code: 'invalid_part',
          message: 'the part has an address that is not E.164 or more than 254 bytes',
        }),
      );
      return;
    }
    this.options.session
      .request('submit_sm', {
        source_addr_ton: 1,
        source_addr_npi: 1,
        source_addr: from,
        dest_addr_ton: 1,
        dest_addr_npi: 1,
        destination_addr: to,
        esm_class: part.esmClass,
        registered_delivery: 1,
        data_coding: part.dataCoding,
        short_message: part.bytes,
      })
      .then(
        (answer) => this.answered(part, answer.command_status, answer.message_id),
        () => {
          this.inFlight -= 1;
          this.options.metrics.part('unanswered');
          // Unanswered in time: the session is not working, whatever its socket says.
          this.options.fail('submit_sm unanswered');
        },
      );
  }

  private async answered(part: OutboundPart, status: number, messageId: unknown): Promise<void> {
    const { store, metrics, pacing, now, retryAfterMs } = this.options;
    if (status === 0) {
      let id = typeof messageId === 'string' ? messageId : '';
      if (!messageIdPattern.test(id)) {
        // The carrier took the part: it is acknowledged, though no receipt will match it.
        metrics.refused('bad_message_id');
        id = '';
      }
      metrics.part('acknowledged');
      await this.record(part, () => store.acknowledged(part.id, id));
    } else if (throttling.has(status)) {
      pacing.throttled();
      metrics.part('throttled');
      await this.record(part, () => store.retryLater(part.id, new Date(now() + retryAfterMs)));
    } else {
      const name = statusName(status);
      metrics.part('refused');
      await this.record(part, () =>
        store.refused(part.id, { code: name, message: `the carrier refused it (${name})` }),
      );
    }
  }

  /** Records an answer (the part has left the window); a record that failed ends the session. */
  private async record(part: OutboundPart, write: () => Promise<void>): Promise<void> {
    this.inFlight -= 1;
    try {
      await write();
    } catch (error) {
      this.options.log.warn({ err: error, carrier: this.options.carrier, part: part.id }, 'an answer was not recorded');
      this.options.fail('store_error');
    } finally {
      void this.pump();
    }
  }
}
