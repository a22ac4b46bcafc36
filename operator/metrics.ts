/** The operator's Prometheus metrics: reconciles by kind and outcome, their duration, queue depth and relists. */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export class OperatorMetrics {
  readonly reconciles: Counter<'kind' | 'outcome'>;
  readonly reconcileSeconds: Histogram<'kind'>;
  readonly queueDepth: Gauge<'kind'>;
  readonly relists: Counter<'kind'>;
  readonly leader: Gauge;

  constructor(registry: Registry) {
    this.reconciles = new Counter({
      name: 'switchboard_operator_reconciles_total',
      help: 'Reconciles of custom resources, by kind and outcome (success, error)',
      labelNames: ['kind', 'outcome'],
      registers: [registry],
    });
    this.reconcileSeconds = new Histogram({
      name: 'switchboard_operator_reconcile_duration_seconds',
      help: 'How long one reconcile took, by kind',
      labelNames: ['kind'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    });
    this.queueDepth = new Gauge({
      name: 'switchboard_operator_queue_depth',
      help: 'Names waiting to be reconciled (ready or backing off), by kind',
      labelNames: ['kind'],
      registers: [registry],
    });
    this.relists = new Counter({
      name: 'switchboard_operator_relists_total',
      help: 'Full lists of a kind (at start, after a broken watch, and by the watchdog)',
      labelNames: ['kind'],
      registers: [registry],
    });
    this.leader = new Gauge({
      name: 'switchboard_operator_leader',
      help: '1 while this process leads (reconciles), 0 while it waits',
      registers: [registry],
    });
  }
}
