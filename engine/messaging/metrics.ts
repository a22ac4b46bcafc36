/**
 * The SMPP links' Prometheus metrics: outbound parts by the carrier's answer, what we refused from the carrier by
 * reason (its input is checked, never trusted), what it delivered, bound sessions, leadership and reconnects per
 * carrier. One per registry: every link of the process counts through the same one.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

/** An outbound part's outcome: acknowledged, throttled (retried later), refused, or unanswered (requeued). */
export type PartResult = 'acknowledged' | 'throttled' | 'refused' | 'unanswered';

export class MessagingMetrics {
  private readonly parts: Counter<'result'>;
  private readonly refusals: Counter<'reason'>;
  private readonly deliveries: Counter<'kind'>;
  readonly sessions: Gauge<'carrier'>;
  readonly leader: Gauge<'carrier'>;
  readonly reconnects: Counter<'carrier'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.parts = new Counter({
      name: 'switchboard_sms_parts_total',
      help: 'Outbound SMS parts (submit_sm) by the carrier’s answer: acknowledged, throttled, refused, unanswered',
      labelNames: ['result'],
      registers,
    });
    this.refusals = new Counter({
      name: 'switchboard_sms_refused_total',
      help: 'What a carrier sent that was refused or not taken, by reason (unknown_number, bad_receipt, …)',
      labelNames: ['reason'],
      registers,
    });
    this.deliveries = new Counter({
      name: 'switchboard_sms_received_total',
      help: 'deliver_sm taken from carriers: inbound parts, receipts, intermediate (not final) receipts',
      labelNames: ['kind'],
      registers,
    });
    this.sessions = new Gauge({
      name: 'switchboard_smpp_sessions',
      help: 'SMPP transceiver sessions bound by this process, per carrier',
      labelNames: ['carrier'],
      registers,
    });
    this.leader = new Gauge({
      name: 'switchboard_smpp_leader',
      help: 'Whether this process leads (holds the advisory lock of) the carrier’s SMPP link',
      labelNames: ['carrier'],
      registers,
    });
    this.reconnects = new Counter({
      name: 'switchboard_smpp_reconnects_total',
      help: 'SMPP connections or binds that failed or ended and were tried again, per carrier',
      labelNames: ['carrier'],
      registers,
    });
  }

  part(result: PartResult, count = 1): void {
    this.parts.inc({ result }, count);
  }

  refused(reason: string): void {
    this.refusals.inc({ reason });
  }

  received(kind: 'inbound' | 'receipt' | 'intermediate'): void {
    this.deliveries.inc({ kind });
  }
}
