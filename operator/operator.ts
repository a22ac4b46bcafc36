/**
 * The operator role (`switchboard operator`, and in-process under `all`; docs/kubernetes.md): one controller per
 * kind over a `ResourceStore`, started once this process leads and stopped when the lead is lost. In a cluster the
 * store is the Kubernetes API and leadership a coordination.k8s.io Lease (lease.ts); without one the store is
 * PostgreSQL's and leadership a PostgreSQL advisory lock held on a connection of its own (a process that dies lets it
 * go with its connection).
 */
import type { Clock } from '../core/clock.ts';
import type pg from 'pg';
import type { Registry } from 'prom-client';
import { AdvisoryLeadership } from '../core/leadership.ts';
import type { Resource, ResourceKind, ResourceStore } from '../core/resources/store.ts';
import type { Log } from '../core/log.ts';
import { Controller } from './controller.ts';
import { engineReconciler, type EngineSettings } from './engines.ts';
import { type EventRecorder, LoggedEvents } from './events.ts';
import { OperatorMetrics } from './metrics.ts';
import { queueReconciler } from './queues.ts';
import { routingPlanReconciler } from './routing-plans.ts';
import { isReady } from './status.ts';
import { type WebhookEndpointSettings, webhookEndpointReconciler } from './webhook-endpoints.ts';

/**
 * Leadership among operator processes: `acquire` resolves once this one leads; `lost` then resolves if the lead ends
 * without `close` (a Lease not renewed in time, the lock's connection gone), and the operator steps down and becomes
 * a candidate again; `close` lets go.
 */
export interface Leadership {
  acquire(signal: AbortSignal): Promise<void>;
  readonly lost: Promise<void>;
  close(): Promise<void>;
}

/** An arbitrary fixed key: the one advisory lock operators take. */
const leaderLockKey = 7_305_142_211;

/** Leadership without a cluster: core/leadership.ts's advisory lock under the operators' one key. */
export class DatabaseLeadership implements Leadership {
  private readonly lock: AdvisoryLeadership;

  constructor(databaseUrl: string, retryMs = 2_000) {
    this.lock = new AdvisoryLeadership({
      databaseUrl,
      key: leaderLockKey,
      applicationName: 'switchboard-operator-lead',
      retryMs,
    });
  }

  get lost(): Promise<void> {
    return this.lock.lost;
  }

  async acquire(signal: AbortSignal): Promise<void> {
    await this.lock.acquire(signal);
  }

  close(): Promise<void> {
    return this.lock.release();
  }
}

export interface OperatorOptions {
  pool: pg.Pool;
  store: ResourceStore;
  namespace: string;
  registry: Registry;
  log: Pick<Log, 'info' | 'warn'>;
  leadership: Leadership;
  /** Sealing signing secrets, private networks, and where `secretRef`s are read (none without a cluster). */
  webhooks: WebhookEndpointSettings;
  /** Engine pools: carriers, and in a cluster the pools' children. */
  engines: EngineSettings;
  /** Where condition changes are told: Kubernetes Events in a cluster, the log without one. */
  events?: EventRecorder;
  /** The time conditions are stamped with; default the system clock. */
  clock?: Clock;
  relistMs?: number;
}

export interface RunningOperator {
  /** Resolves true once this process leads and its controllers have listed; false when closed before that. */
  readonly leading: Promise<boolean>;
  /** Whether this process leads now. */
  isLeading(): boolean;
  /** Resolves when every queued reconcile has run (tests). */
  settled(): Promise<void>;
  close(): Promise<void>;
}

/** One term of leadership: the controllers of every kind, started together and closed together. */
function controllersFor(options: OperatorOptions, metrics: OperatorMetrics): Controller[] {
  const { pool, store, namespace, log } = options;
  const common = {
    namespace,
    store,
    metrics,
    log,
    events: options.events ?? new LoggedEvents(log),
    ...(options.relistMs ? { relistMs: options.relistMs } : {}),
  };
  /** Looks again at the resources of `kind` that `waiting` picks; a failed list is logged (the relist catches up). */
  const enqueueWaiting = (
    kind: ResourceKind,
    controller: Controller,
    waiting: (resource: Resource) => boolean,
    what: string,
  ) => {
    store
      .list(kind, namespace)
      .then((listed) => {
        for (const resource of listed.items) if (waiting(resource)) controller.enqueue(resource.metadata.name);
      })
      .catch((error: unknown) => log.warn({ err: error }, `could not list ${what}`));
  };
  // A queue recorded may make plans valid that named it first (GitOps applies in no set order): look at those again.
  const plansWaiting = () =>
    enqueueWaiting(
      'RoutingPlan',
      plans,
      (plan) => plan.metadata.deletionTimestamp === undefined && !isReady(plan),
      'routing plans waiting for a queue',
    );
  const queues = new Controller({
    ...common,
    kind: 'Queue',
    reconcile: queueReconciler(pool, store, options.clock, plansWaiting),
  });
  // A plan archived or changed may free queues whose deletion waits on plans: look at those again now.
  const queuesWaiting = () =>
    enqueueWaiting(
      'Queue',
      queues,
      (queue) => Boolean(queue.metadata.deletionTimestamp),
      'queues waiting to be deleted',
    );
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
  const engines = new Controller({
    ...common,
    ...(options.engines.cluster === undefined ? {} : { related: options.engines.cluster.children }),
    kind: 'EnginePool',
    reconcile: engineReconciler(pool, store, options.engines, options.clock),
  });
  return [plans, queues, webhooks, engines];
}

export function startOperator(options: OperatorOptions): RunningOperator {
  const metrics = new OperatorMetrics(options.registry);
  const { namespace, log, leadership } = options;
  const stop = new AbortController();
  const stopped = new Promise<void>((resolve) => stop.signal.addEventListener('abort', () => resolve()));
  let controllers: Controller[] = [];
  let leads = false;
  let firstLead: (leading: boolean) => void = () => {};
  const leading = new Promise<boolean>((resolve) => {
    firstLead = resolve;
  });
  // Terms of leadership until closed: lead, reconcile until the lead is lost, step down, be a candidate again.
  const terms = (async () => {
    while (!stop.signal.aborted) {
      await leadership.acquire(stop.signal);
      if (stop.signal.aborted) break;
      metrics.leader.set(1);
      leads = true;
      log.info({ namespace }, 'operator leads; reconciling');
      controllers = controllersFor(options, metrics);
      await Promise.all(controllers.map((controller) => controller.start()));
      firstLead(true);
      await Promise.race([leadership.lost, stopped]);
      leads = false;
      metrics.leader.set(0);
      await Promise.all(controllers.map((controller) => controller.close()));
      if (!stop.signal.aborted) log.warn({ namespace }, 'operator lost the lead; stopped reconciling');
    }
    firstLead(false);
  })();
  terms.catch((error: unknown) => {
    log.warn({ err: error }, 'operator stopped');
    firstLead(false);
  });
  return {
    leading,
    isLeading: () => leads,
    async settled() {
      await leading;
      // A reconcile of one kind can queue another (none does yet); settle until all are idle together.
      await Promise.all(controllers.map((controller) => controller.settled()));
    },
    async close() {
      stop.abort();
      await terms.catch(() => {});
      await leadership.close();
    },
  };
}
