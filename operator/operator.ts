/**
 * The operator role (`switchboard operator`, and in-process under `all`; docs/kubernetes.md): one controller per
 * kind over a `ResourceStore`, started once this process leads. Without a cluster the store is PostgreSQL's and
 * leadership a PostgreSQL advisory lock held on a connection of its own (a process that dies lets it go with its
 * connection); in a cluster it will be a coordination.k8s.io Lease.
 */
import { setTimeout as delay } from 'node:timers/promises';
import pg from 'pg';
import type { Registry } from 'prom-client';
import type { ResourceStore } from '../core/resources/store.ts';
import { Controller, type OperatorLog } from './controller.ts';
import { OperatorMetrics } from './metrics.ts';
import { queueReconciler } from './queues.ts';
import { routingPlanReconciler } from './routing-plans.ts';
import { type WebhookEndpointSettings, webhookEndpointReconciler } from './webhook-endpoints.ts';

/** Leadership among operator processes: `acquire` resolves once this one leads; `close` lets go. */
export interface Leadership {
  acquire(signal: AbortSignal): Promise<void>;
  close(): Promise<void>;
}

/** An arbitrary fixed key: the one advisory lock operators take. */
const leaderLockKey = 7_305_142_211;

export class DatabaseLeadership implements Leadership {
  private client: pg.Client | undefined;

  constructor(
    private readonly databaseUrl: string,
    private readonly retryMs = 2_000,
  ) {}

  async acquire(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const client = new pg.Client({
        connectionString: this.databaseUrl,
        application_name: 'switchboard-operator-lead',
      });
      // A connection lost while leading ends this process's leadership with it; the lock goes with the connection.
      client.on('error', () => {});
      try {
        await client.connect();
        const taken = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [leaderLockKey]);
        if (taken.rows[0]?.ok === true && !signal.aborted) {
          this.client = client;
          return;
        }
      } catch {
        // The database went away for a moment: try again.
      }
      await client.end().catch(() => {});
      await delay(this.retryMs, undefined, { signal, ref: false }).catch(() => {});
    }
  }

  async close(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}

export interface OperatorOptions {
  pool: pg.Pool;
  store: ResourceStore;
  namespace: string;
  registry: Registry;
  log: OperatorLog;
  leadership: Leadership;
  /** Sealing signing secrets, private networks, and where `secretRef`s are read (none without a cluster). */
  webhooks: WebhookEndpointSettings;
  /** The time conditions are stamped with; default the system clock. */
  clock?: () => Date;
  relistMs?: number;
}

export interface RunningOperator {
  /** Resolves true once this process leads and its controllers have listed; false when closed before that. */
  readonly leading: Promise<boolean>;
  /** Resolves when every queued reconcile has run (tests). */
  settled(): Promise<void>;
  close(): Promise<void>;
}

export function startOperator(options: OperatorOptions): RunningOperator {
  const metrics = new OperatorMetrics(options.registry);
  const { pool, store, namespace, log } = options;
  const common = { namespace, store, metrics, log, ...(options.relistMs ? { relistMs: options.relistMs } : {}) };
  const queues = new Controller({ ...common, kind: 'Queue', reconcile: queueReconciler(pool, store, options.clock) });
  // A plan archived or changed may free queues whose deletion waits on plans: look at those again now.
  const queuesWaiting = () => {
    store
      .list('Queue', namespace)
      .then((listed) => {
        for (const queue of listed.items) if (queue.metadata.deletionTimestamp) queues.enqueue(queue.metadata.name);
      })
      .catch((error: unknown) => log.warn({ err: error }, 'could not list queues waiting to be deleted'));
  };
  const plans = new Controller({
    ...common,
    kind: 'RoutingPlan',
    reconcile: routingPlanReconciler(pool, store, options.clock, queuesWaiting),
  });
  const webhooks = new Controller({
    ...common,
    kind: 'WebhookEndpoint',
    reconcile: webhookEndpointReconciler(pool, store, options.webhooks, options.clock),
  });
  const controllers = [plans, queues, webhooks];
  const stop = new AbortController();
  const leading = (async () => {
    await options.leadership.acquire(stop.signal);
    if (stop.signal.aborted) return false;
    metrics.leader.set(1);
    log.info({ namespace }, 'operator leads; reconciling');
    await Promise.all(controllers.map((controller) => controller.start()));
    return true;
  })();
  leading.catch((error: unknown) => log.warn({ err: error }, 'operator could not start'));
  return {
    leading,
    async settled() {
      await leading;
      // A reconcile of one kind can queue another (none does yet); settle until all are idle together.
      await Promise.all(controllers.map((controller) => controller.settled()));
    },
    async close() {
      stop.abort();
      await leading.catch(() => false);
      await Promise.all(controllers.map((controller) => controller.close()));
      metrics.leader.set(0);
      await options.leadership.close();
    },
  };
}
