/**
 * One kind's controller (docs/kubernetes.md, The operator): lists the kind in the namespace, queues every name, then
 * watches from the list's resourceVersion and queues each name that changes. A broken watch (410 Gone included) and
 * a watchdog timer both relist, since a watch can also end without a word. Each queued name is reconciled with the
 * resource as it is now (undefined once it is gone); a reconcile that throws comes back with backoff, and one that
 * asks for it comes back after a delay (for example a deletion waiting on a queue in use).
 */
import { performance } from 'node:perf_hooks';
import type { Log } from '../core/log.ts';
import type { Resource, ResourceKind, ResourceStore, Watch } from '../core/resources/store.ts';
import { conditionEvents, type EventRecorder } from './events.ts';
import type { OperatorMetrics } from './metrics.ts';
import { WorkQueue } from './work-queue.ts';

/** What a reconcile may ask for: to run again after `requeueAfterMs` even if nothing changes. */
export type ReconcileResult = { requeueAfterMs?: number } | void;

export type Reconcile = (name: string, resource: Resource | undefined) => Promise<ReconcileResult>;

/** Objects of another kind whose changes concern resources of this one (an EnginePool's Deployment). */
export interface RelatedWatch {
  /** Lists, then watches from the list; `concerns` hears the name of the resource each change is about. */
  watch(namespace: string, concerns: (name: string) => void, onError: (error: unknown) => void): Promise<Watch>;
}

export interface ControllerOptions {
  kind: ResourceKind;
  namespace: string;
  store: ResourceStore;
  reconcile: Reconcile;
  metrics: OperatorMetrics;
  log: Pick<Log, 'info' | 'warn'>;
  /** Names reconciled at once. Default 4. */
  concurrency?: number;
  /** The watchdog: a full relist this often. Default 5 minutes. */
  relistMs?: number;
  /** Hears every change of a condition seen on the kind (Kubernetes Events in a cluster). */
  events?: EventRecorder;
  /** Changes of other objects that queue a resource of this kind; watched and relisted with it. */
  related?: RelatedWatch;
}

export class Controller {
  private readonly queue: WorkQueue;
  private watch: Watch | undefined;
  private relatedWatch: Watch | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private relistTimer: NodeJS.Timeout | undefined;
  private relistFailures = 0;
  private relisting: Promise<void> | undefined;
  private closed = false;
  /** Each resource as last seen (by list or watch), to tell which conditions changed. */
  private readonly seen = new Map<string, Resource>();

  constructor(private readonly options: ControllerOptions) {
    const { kind } = options;
    this.queue = new WorkQueue((name) => this.reconcileOne(name), {
      concurrency: options.concurrency ?? 4,
      onDepth: (depth) => options.metrics.queueDepth.set({ kind }, depth),
    });
  }

  async start(): Promise<void> {
    await this.relist();
    this.watchdog = setInterval(() => void this.relist(), this.options.relistMs ?? 300_000);
    this.watchdog.unref();
  }

  /** Queues a name (other controllers use it: a plan's change may free a queue waiting to be deleted). */
  enqueue(name: string, delayMs = 0): void {
    this.queue.add(name, delayMs);
  }

  /** Resolves when every queued name has been reconciled (tests). */
  settled(): Promise<void> {
    return this.queue.settled();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.watchdog);
    clearTimeout(this.relistTimer);
    await this.relisting;
    await this.watch?.stop();
    await this.relatedWatch?.stop();
    await this.queue.close();
  }

  /** Lists, queues every name, and watches from the list (replacing the watch there was). */
  private relist(): Promise<void> {
    this.relisting ??= this.relistNow().finally(() => {
      this.relisting = undefined;
    });
    return this.relisting;
  }

  private async relistNow(): Promise<void> {
    const { store, kind, namespace, log } = this.options;
    if (this.closed) return;
    try {
      await Promise.all([this.watch?.stop(), this.relatedWatch?.stop()]);
      this.watch = undefined;
      this.relatedWatch = undefined;
      const listed = await store.list(kind, namespace);
      const listedNames = new Set<string>();
      for (const item of listed.items) {
        listedNames.add(item.metadata.name);
        this.saw(item, !this.seen.has(item.metadata.name));
        this.queue.add(item.metadata.name);
      }
      for (const name of this.seen.keys()) if (!listedNames.has(name)) this.seen.delete(name);
      this.options.metrics.relists.inc({ kind });
      this.watch = await store.watch(
        kind,
        namespace,
        listed.resourceVersion,
        (event) => {
          if (event.type === 'DELETED') this.seen.delete(event.object.metadata.name);
          else this.saw(event.object, false);
          this.queue.add(event.object.metadata.name);
        },
        (error) => {
          log.warn({ err: error, kind }, 'watch ended; listing again');
          this.scheduleRelist();
        },
      );
      if (this.options.related !== undefined) {
        this.relatedWatch = await this.options.related.watch(
          namespace,
          (name) => this.queue.add(name),
          (error) => {
            log.warn({ err: error, kind }, 'watch of related objects ended; listing again');
            this.scheduleRelist();
          },
        );
      }
      this.relistFailures = 0;
    } catch (error) {
      log.warn({ err: error, kind }, 'list or watch failed; trying again');
      this.scheduleRelist();
    }
  }

  /** Keeps the resource as seen and, unless this is the first sight of it, records its conditions' changes. */
  private saw(resource: Resource, first: boolean): void {
    const before = this.seen.get(resource.metadata.name);
    this.seen.set(resource.metadata.name, resource);
    const { events, log, kind } = this.options;
    if (first || events === undefined) return;
    for (const event of conditionEvents(before, resource)) {
      events
        .record(resource, event)
        .catch((error: unknown) => log.warn({ err: error, kind, name: resource.metadata.name }, 'event not recorded'));
    }
  }

  private scheduleRelist(): void {
    if (this.closed) return;
    this.relistFailures += 1;
    clearTimeout(this.relistTimer);
    this.relistTimer = setTimeout(() => void this.relist(), Math.min(30_000, 100 * 2 ** this.relistFailures));
    this.relistTimer.unref();
  }

  private async reconcileOne(name: string): Promise<void> {
    const { store, kind, namespace, metrics, log } = this.options;
    const started = performance.now();
    try {
      const resource = await store.get(kind, namespace, name);
      const result = await this.options.reconcile(name, resource);
      metrics.reconciles.inc({ kind, outcome: 'success' });
      if (result?.requeueAfterMs !== undefined) this.queue.add(name, result.requeueAfterMs);
    } catch (error) {
      metrics.reconciles.inc({ kind, outcome: 'error' });
      log.warn({ err: error, kind, name }, 'reconcile failed; it is retried with backoff');
      throw error;
    } finally {
      metrics.reconcileSeconds.observe({ kind }, (performance.now() - started) / 1000);
    }
  }
}
