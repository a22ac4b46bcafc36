/**
 * The API's writes of custom resources in a cluster, carried to the Kubernetes API after their request's transaction
 * committed (docs/kubernetes.md, "The API's writes"): a request records each write in `resource_writes`
 * (core/resources/writes.ts) and, once committed, `carry` applies it (then writes its status) or deletes it, with no
 * database connection held while the Kubernetes API answers; the request answers after that. A write that fails
 * (the Kubernetes API down or refusing) stays pending: it is logged, and this process's sweep tries the due ones
 * again every few seconds, backing off from 1 s to 5 minutes, as do the sweeps of every other API process (the
 * writes are whole specs: carrying one twice changes nothing).
 */
import type pg from 'pg';
import { conditions } from '../core/resources/conditions.ts';
import type { Resource, ResourceStore } from '../core/resources/store.ts';
import {
  dueWrites,
  type PendingWrite,
  pendingWritesOf,
  type ResourceKey,
  type StatusIntent,
  writeDone,
  writeFailed,
} from '../core/resources/writes.ts';
import type { Log } from '../core/log.ts';

export const apiWriter = { fieldManager: 'switchboard-api' };
const sweepEveryMs = 3_000;
const sweepBatch = 50;

/** The status the API writes for `resource` as applied: `intent`'s fields and its conditions at that generation. */
export function statusOf(resource: Resource, intent: StatusIntent, now: Date): Record<string, unknown> {
  const generation = resource.metadata.generation;
  return {
    observedGeneration: generation,
    ...intent.fields,
    conditions: conditions(resource.status.conditions, intent.conditions, generation, now),
  };
}

/** The wait before the next attempt of a write that failed `attempts` times: 1 s doubling, at most 5 minutes. */
export function retryMs(attempts: number): number {
  return Math.min(300_000, 1000 * 2 ** Math.min(attempts, 9));
}

export class ResourceWrites {
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly pool: pg.Pool,
    /** The Kubernetes store. */
    private readonly store: ResourceStore,
    private readonly log: Pick<Log, 'warn'>,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.sweep(), sweepEveryMs).unref();
  }

  /** Carries the pending writes of `keys` (a request's, just committed); never rejects. */
  async carry(keys: readonly ResourceKey[]): Promise<void> {
    const writes = await pendingWritesOf(this.pool, keys).catch((error: unknown) => {
      this.log.warn({ err: error }, 'the pending resource writes could not be read; the sweep carries them');
      return [];
    });
    await Promise.all(writes.map((write) => this.carryOne(write)));
  }

  /** Carries the writes whose next attempt is due. */
  sweep(): Promise<void> {
    this.sweeping ??= (async () => {
      if (this.closed) return;
      const writes = await dueWrites(this.pool, sweepBatch);
      await Promise.all(writes.map((write) => this.carryOne(write)));
    })()
      .catch((error: unknown) => this.log.warn({ err: error }, 'the resource writes sweep failed'))
      .finally(() => {
        this.sweeping = undefined;
      });
    return this.sweeping;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await this.sweeping;
  }

  private async carryOne(write: PendingWrite): Promise<void> {
    const { kind, namespace, name, intent } = write;
    try {
      if (intent.operation === 'delete') {
        await this.store.delete(kind, namespace, name, apiWriter);
        await writeDone(this.pool, write, undefined);
        return;
      }
      const resource = await this.store.apply(
        { kind, namespace, name, spec: intent.spec, labels: intent.labels },
        apiWriter,
      );
      if (intent.status !== undefined) {
        await this.store.updateStatus(kind, namespace, name, statusOf(resource, intent.status, new Date()), apiWriter);
      }
      await writeDone(this.pool, write, { uid: resource.metadata.uid, generation: resource.metadata.generation });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.log.warn(
        { err: error, kind, name, attempts: write.attempts + 1 },
        'a resource write failed; it stays pending',
      );
      await writeFailed(this.pool, write, message, retryMs(write.attempts)).catch(() => {});
    }
  }
}
