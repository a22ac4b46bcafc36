/**
 * Webhook delivery metrics on the process registry (`/metrics`). The lane gauges count every endpoint's lanes in the
 * database (the same figure from every engine process), read when scraped and at most once a second.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { AttemptOutcome } from './attempt.ts';

export interface LaneCounts {
  pending: number;
  parked: number;
}

export class DeliveryMetrics {
  readonly attempts: Counter<'outcome'>;
  readonly attemptSeconds: Histogram<'outcome'>;
  readonly firstAttemptDelay: Histogram;
  private counts: Promise<LaneCounts> | undefined;
  private countsAt = 0;
  private lastCounts: LaneCounts = { pending: 0, parked: 0 };

  constructor(registry: Registry, countLanes: () => Promise<LaneCounts>) {
    this.attempts = new Counter({
      name: 'switchboard_webhook_deliveries_total',
      help: 'Webhook delivery attempts by outcome: success, http_error, redirect, timeout, connection_error, refused',
      labelNames: ['outcome'],
      registers: [registry],
    });
    this.attemptSeconds = new Histogram({
      name: 'switchboard_webhook_attempt_duration_seconds',
      help: 'Duration of webhook delivery attempts (DNS, connection and answer), by result: success or failure',
      labelNames: ['outcome'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
    this.firstAttemptDelay = new Histogram({
      name: 'switchboard_webhook_first_attempt_delay_seconds',
      help: 'From an event being written (or queued again by a replay) to the start of its first delivery attempt',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300],
      registers: [registry],
    });
    const read = async (): Promise<LaneCounts> => {
      if (this.counts === undefined || Date.now() - this.countsAt > 1_000) {
        this.countsAt = Date.now();
        this.counts = countLanes().then(
          (counts) => (this.lastCounts = counts),
          () => this.lastCounts,
        );
      }
      return this.counts;
    };
    new Gauge({
      name: 'switchboard_webhook_lanes_pending',
      help: 'Webhook streams (endpoint and stream) with events waiting for delivery, parked ones excepted',
      registers: [registry],
      async collect() {
        this.set((await read()).pending);
      },
    });
    new Gauge({
      name: 'switchboard_webhook_lanes_parked',
      help: 'Webhook streams parked after 24 hours of failures, waiting for a replay',
      registers: [registry],
      async collect() {
        this.set((await read()).parked);
      },
    });
  }

  attempted(outcome: AttemptOutcome, seconds: number): void {
    this.attempts.inc({ outcome });
    this.attemptSeconds.observe({ outcome: outcome === 'success' ? 'success' : 'failure' }, seconds);
  }
}
