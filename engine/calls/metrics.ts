/**
 * The call engine's Prometheus metrics: active calls, calls by end reason, SIP messages by direction and method or
 * status, input that was not SIP, SIP transactions in progress, RTP packets, losses and foreign datagrams, steps not built yet, prompts
 * that could not be played, re-INVITEs of a hold or resume by result.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { MediaStats } from '../media/rtp.ts';

export class CallMetrics {
  readonly active: Gauge;
  readonly started: Counter;
  private readonly endedByReason: Counter<'reason'>;
  readonly sipMessages: Counter<'direction' | 'kind'>;
  readonly sipMalformed: Counter<'reason'>;
  /** Where the transactions gauge reads its value (the SIP endpoint, once it runs). */
  private openTransactions: () => number = () => 0;
  private readonly rtpPackets: Counter<'direction'>;
  private readonly rtpLost: Counter;
  private readonly rtpForeign: Counter;
  readonly stepsUnavailable: Counter;
  readonly promptFailures: Counter;
  readonly holdReinvites: Counter<'result'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.active = new Gauge({ name: 'switchboard_calls_active', help: 'Calls in progress on this engine', registers });
    this.started = new Counter({ name: 'switchboard_calls_started_total', help: 'Calls answered', registers });
    this.endedByReason = new Counter({
      name: 'switchboard_calls_ended_total',
      help: 'Calls ended, by end reason',
      labelNames: ['reason'],
      registers,
    });
    this.sipMessages = new Counter({
      name: 'switchboard_sip_messages_total',
      help: 'SIP messages received (in) and sent (out), by method or status code',
      labelNames: ['direction', 'kind'],
      registers,
    });
    this.sipMalformed = new Counter({
      name: 'switchboard_sip_malformed_total',
      help: 'Datagrams and stream frames that were not a SIP message we take, by reason',
      labelNames: ['reason'],
      registers,
    });
    const transactions: Gauge = new Gauge({
      name: 'switchboard_sip_transactions',
      // What a flood of requests grows: the core keeps each transaction for up to 32 s after its final answer.
      help: 'SIP transactions in progress (server and client), including those kept after their answer (RFC 3261 timers)',
      registers,
      collect: () => transactions.set(this.openTransactions()),
    });
    this.rtpPackets = new Counter({
      name: 'switchboard_rtp_packets_total',
      help: 'RTP packets received (in) and sent (out), counted when a call ends',
      labelNames: ['direction'],
      registers,
    });
    this.rtpLost = new Counter({
      name: 'switchboard_rtp_packets_lost_total',
      help: 'RTP packets lost (sequence gaps), counted when a call ends',
      registers,
    });
    this.rtpForeign = new Counter({
      name: 'switchboard_rtp_foreign_datagrams_total',
      help: "Datagrams at a call's RTP port from an address that is not the call's peer's (dropped), counted when it ends",
      registers,
    });
    this.stepsUnavailable = new Counter({
      name: 'switchboard_calls_step_unavailable_total',
      help: 'Plan steps not built yet (ring, queue, ai_answer, forward) that took their no-answer edge',
      registers,
    });
    this.promptFailures = new Counter({
      name: 'switchboard_calls_prompt_failures_total',
      help: 'Prompts that could not be produced during a call (silence played instead)',
      registers,
    });
    this.holdReinvites = new Counter({
      name: 'switchboard_sip_hold_reinvites_total',
      help:
        'Re-INVITEs telling a SIP party of a hold or resume, by result: answered, refused (a final answer of 300 or ' +
        'more, or 491 twice), timeout (no final answer), unsent (the dialog could not take one)',
      labelNames: ['result'],
      registers,
    });
  }

  /** The gauge of SIP transactions in progress reads `count` from now on. */
  countTransactions(count: () => number): void {
    this.openTransactions = count;
  }

  ended(reason: string): void {
    this.endedByReason.inc({ reason });
  }

  /** Adds an RTP endpoint's packet counts (once, as it closes). */
  countRtp(stats: Pick<MediaStats, 'packetsIn' | 'packetsOut' | 'lost' | 'foreign'>): void {
    this.rtpPackets.inc({ direction: 'in' }, stats.packetsIn);
    this.rtpPackets.inc({ direction: 'out' }, stats.packetsOut);
    this.rtpLost.inc(stats.lost);
    this.rtpForeign.inc(stats.foreign);
  }
}
