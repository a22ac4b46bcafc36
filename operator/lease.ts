/**
 * Leadership in a cluster: a coordination.k8s.io Lease, as client-go's leader election holds one. A candidate takes
 * the Lease when nobody holds it or when its holder has not renewed it for `leaseDurationSeconds`, measured by this
 * process's own clock from when it last saw the Lease change (never by comparing clocks across nodes). The leader
 * renews every `retryMs`; one that cannot renew for `renewDeadlineMs` steps down (`lost` resolves) before another
 * can take over, and one that closes gives the Lease up at once so a successor need not wait.
 *
 * Every write carries the resourceVersion read, so two candidates racing for one Lease cannot both win: the API
 * server refuses the second with 409.
 */
import os from 'node:os';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { CoordinationV1Api, type KubeConfig, type V1Lease, V1MicroTime } from '@kubernetes/client-node';
import { statusOf } from '../core/resources/kubernetes-store.ts';
import type { Log } from '../core/log.ts';
import type { Leadership } from './operator.ts';
import { assertNotHoldingConnection } from '../core/held-connections.ts';

export interface LeaseOptions {
  namespace: string;
  /** The Lease's name; default `switchboard-operator`. */
  name?: string;
  /** Who this process is in the Lease; default host name, process id and a random suffix. */
  identity?: string;
  leaseDurationSeconds?: number;
  renewDeadlineMs?: number;
  retryMs?: number;
  /** Give the Lease up on close (default true); false leaves it to expire, as a process that dies does. */
  releaseOnClose?: boolean;
  log?: Pick<Log, 'info' | 'warn'>;
}

export class LeaseLeadership implements Leadership {
  readonly identity: string;
  private readonly api: CoordinationV1Api;
  private readonly name: string;
  private readonly durationSeconds: number;
  private readonly renewDeadlineMs: number;
  private readonly retryMs: number;
  /** The Lease as last read, and when (monotonic ms) it last changed (a renewal is a write: a new version). */
  private observed: { holder: string; version: string; at: number } | undefined;
  private renewing: Promise<void> | undefined;
  private leading = false;
  private resign: AbortController | undefined;
  private lostResolve: (() => void) | undefined;
  lost: Promise<void> = new Promise(() => {});

  constructor(
    config: KubeConfig,
    private readonly options: LeaseOptions,
  ) {
    this.api = config.makeApiClient(CoordinationV1Api);
    this.name = options.name ?? 'switchboard-operator';
    this.identity = options.identity ?? `${os.hostname()}_${process.pid}_${randomUUID().slice(0, 8)}`;
    this.durationSeconds = options.leaseDurationSeconds ?? 15;
    this.renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.retryMs = options.retryMs ?? 2_000;
    if (this.renewDeadlineMs >= this.durationSeconds * 1000) {
      throw new Error('the renew deadline must be shorter than the lease duration');
    }
  }

  async acquire(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        if (await this.tryTake()) {
          this.startRenewing();
          return;
        }
      } catch (error) {
        this.options.log?.warn({ err: error, lease: this.name }, 'could not read or take the lease; trying again');
      }
      await delay(this.retryMs, undefined, { signal, ref: false }).catch(() => {});
    }
  }

  async close(): Promise<void> {
    this.resign?.abort();
    await this.renewing;
    if (!this.leading) return;
    this.leading = false;
    if (this.options.releaseOnClose === false) return;
    // Give the Lease up: a successor takes it at once instead of waiting for it to expire.
    try {
      const lease = await this.api.readNamespacedLease({ name: this.name, namespace: this.options.namespace });
      if (lease.spec?.holderIdentity === this.identity) {
        await this.api.replaceNamespacedLease({
          name: this.name,
          namespace: this.options.namespace,
          body: { ...lease, spec: { ...lease.spec, holderIdentity: undefined, leaseDurationSeconds: 1 } },
        });
      }
    } catch (error) {
      this.options.log?.warn({ err: error, lease: this.name }, 'could not give the lease up; it expires instead');
    }
  }

  /** One attempt: creates the Lease, renews ours, or takes one that expired. True when this process holds it. */
  private async tryTake(): Promise<boolean> {
    assertNotHoldingConnection(`a take of Lease ${this.name}`);
    const now = new Date();
    let lease: V1Lease;
    try {
      lease = await this.api.readNamespacedLease({ name: this.name, namespace: this.options.namespace });
    } catch (error) {
      if (statusOf(error) !== 404) throw error;
      return this.write(undefined, now, 0);
    }
    const holder = lease.spec?.holderIdentity ?? '';
    const version = lease.metadata?.resourceVersion ?? '';
    if (this.observed?.holder !== holder || this.observed.version !== version) {
      this.observed = { holder, version, at: performance.now() };
    }
    const duration = (lease.spec?.leaseDurationSeconds ?? this.durationSeconds) * 1000;
    const expired = performance.now() - this.observed.at > duration;
    if (holder !== '' && holder !== this.identity && !expired) return false;
    const transitions = (lease.spec?.leaseTransitions ?? 0) + (holder === this.identity ? 0 : 1);
    return this.write(lease, now, transitions);
  }

  private async write(lease: V1Lease | undefined, now: Date, transitions: number): Promise<boolean> {
    const ours = lease?.spec?.holderIdentity === this.identity;
    const spec = {
      holderIdentity: this.identity,
      leaseDurationSeconds: this.durationSeconds,
      acquireTime: ours && lease?.spec?.acquireTime ? lease.spec.acquireTime : new V1MicroTime(now),
      renewTime: new V1MicroTime(now),
      leaseTransitions: transitions,
    };
    try {
      const written =
        lease === undefined
          ? await this.api.createNamespacedLease({
              namespace: this.options.namespace,
              body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: this.name }, spec },
            })
          : await this.api.replaceNamespacedLease({
              name: this.name,
              namespace: this.options.namespace,
              body: { ...lease, spec },
            });
      this.observed = {
        holder: this.identity,
        version: written.metadata?.resourceVersion ?? '',
        at: performance.now(),
      };
      return true;
    } catch (error) {
      // Another candidate wrote first (409 on replace, or the Lease created meanwhile): not ours this time.
      if (statusOf(error) === 409) return false;
      throw error;
    }
  }

  /** Renews every `retryMs`; a leader that cannot renew for `renewDeadlineMs` steps down. */
  private startRenewing(): void {
    this.leading = true;
    this.resign = new AbortController();
    this.lost = new Promise((resolve) => {
      this.lostResolve = resolve;
    });
    const { signal } = this.resign;
    this.renewing = (async () => {
      let renewedAt = performance.now();
      while (!signal.aborted) {
        await delay(this.retryMs, undefined, { signal, ref: false }).catch(() => {});
        if (signal.aborted) return;
        try {
          if (await this.tryTake()) {
            if (this.observed?.holder === this.identity) renewedAt = performance.now();
          } else {
            break; // someone else holds it now
          }
        } catch (error) {
          this.options.log?.warn({ err: error, lease: this.name }, 'could not renew the lease');
        }
        if (performance.now() - renewedAt > this.renewDeadlineMs) break;
      }
      if (signal.aborted) return;
      this.leading = false;
      this.options.log?.warn({ lease: this.name }, 'lost the lease; stepping down');
      this.lostResolve?.();
    })();
  }
}
