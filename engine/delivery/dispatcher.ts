/**
 * The webhook dispatcher of an engine process (docs/events.md, Delivering). It claims due lanes (one endpoint, one
 * stream) under a lease with FOR UPDATE SKIP LOCKED, so any number of engine processes share the work and a lane
 * has one attempt in flight at a time; it runs the attempts of different lanes concurrently up to a cap, so a
 * stalled or failing stream never holds up another, and each claim gives an endpoint and an application no more than
 * their share of the lanes held by all dispatchers, so a slow endpoint never holds up another endpoint or
 * application; and it writes each outcome back (next head due at once, or a retry after backoff, or parking after 24
 * hours).
 *
 * It claims when a transaction that appended events commits (LISTEN on the outbox's channel), when one of its own
 * retries comes due (a timer), when an attempt ends (room for another), and on a slow poll that also picks up the
 * lanes of a dispatcher that died (their leases run out) and retries scheduled by other processes.
 *
 * Longer than 400 lines because the claim loop, its wake-ups, the concurrency cap and the shutdown share the state of
 * one class (in-flight attempts, timers, the listening connection), and their ordering is what keeps a lane to one
 * attempt at a time; its SQL is in core/webhooks/deliveries.ts, one attempt in attempt.ts, batched releases in
 * releases.ts.
 */
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { Registry } from 'prom-client';
import { ChangeListener } from '../../core/change-notices.ts';
import { type Clock, systemClock } from '../../core/clock.ts';
import { webhookShares } from '../../core/config.ts';
import { eventsChannel } from '../../core/change-notices.ts';
import type { Log } from '../../core/log.ts';
import { openSecret } from '../../core/sealing.ts';
import { type AttemptResult, attemptDelivery, defaultAttemptTimeoutMs, deliveryAgent } from './attempt.ts';
import { retryDelayMs, shouldPark } from './backoff.ts';
import {
  type ClaimedLane,
  type HeadEvent,
  claimLanes,
  laneCounts,
  recordFailure,
  sweepIdleLanes,
} from '../../core/webhooks/deliveries.ts';
import { fallAsleep, forgetSleepingDispatchers, stayAwake } from '../../core/webhooks/dispatchers.ts';
import { DeliveryMetrics } from './metrics.ts';
import { ReleaseBatcher } from './releases.ts';

const silent: Log = { info() {}, warn() {}, debug() {} };

export interface DispatcherOptions {
  pool: pg.Pool;
  /** For the LISTEN connection. */
  databaseUrl: string;
  /** Opens the sealed signing secrets (SigningKeys.webhookSecrets). */
  secretsKey: Uint8Array;
  /** WEBHOOK_ALLOW_PRIVATE_NETWORKS. */
  allowPrivateNetworks: boolean;
  /** Attempts in flight at once (WEBHOOK_CONCURRENCY); default 64. */
  concurrency?: number;
  /**
   * Lanes of one application's endpoints held at once, by all dispatchers together (WEBHOOK_APPLICATION_CONCURRENCY);
   * default half of `concurrency`.
   */
  applicationConcurrency?: number;
  /**
   * Lanes of one endpoint held at once, by all dispatchers (WEBHOOK_ENDPOINT_CONCURRENCY); default a quarter of
   * `concurrency`, at most `applicationConcurrency`.
   */
  endpointConcurrency?: number;
  /** Where the delivery metrics go; default a registry of its own. */
  registry?: Registry;
  log?: Log;
  /** Every time the dispatcher writes or compares; tests move it forward. Default: the system clock. */
  clock?: Clock;
  /** How long a claimed lane stays held; longer than an attempt. Default 30 s. */
  leaseMs?: number;
  /** The success window of one attempt. Default 10 s (spec section 6); tests shorten it. */
  attemptTimeoutMs?: number;
  /** The slow poll. Default 1 s. */
  pollIntervalMs?: number;
  /** How long each promise to stay awake runs (renewed while busy). Default 500 ms; tests lengthen it. */
  awakeMs?: number;
}

/** Lanes idle this long are deleted, by a sweep this often. */
const laneIdleMs = 24 * 3_600_000;
const sweepIntervalMs = 10 * 60_000;

/** Claims per query at most (and at most the room left under the concurrency cap). */
const claimBatch = 100;
/** Events of one lane delivered one after another under one claim, at most. */
const headsPerClaim = 16;
/** An attempt starts under a claim only if it can end this long before the lease does. */
const leaseMarginMs = 2_000;
/** Claims start at least this far apart: under load, lanes gather events meanwhile and go out as runs. */
const claimSpacingMs = 10;
/** While awake, a claim at least this often, whatever the dispatcher hears. */
const awakeTickMs = 25;
/** Opened signing secrets kept (the endpoints' current and previous ones). */
const maxOpenedSecrets = 1_000;
/** Retry times remembered for the wake-up timer; beyond this the poll finds them. */
const maxRetryTimes = 10_000;

export class Dispatcher {
  readonly owner = `${hostname()}/${process.pid}/${randomBytes(4).toString('hex')}`;
  private readonly pool: pg.Pool;
  private readonly clock: Clock;
  private readonly log: Log;
  private readonly concurrency: number;
  private readonly applicationConcurrency: number;
  private readonly endpointConcurrency: number;
  private readonly leaseMs: number;
  private readonly attemptTimeoutMs: number;
  private readonly pollIntervalMs: number;
  private readonly agent = deliveryAgent();
  private readonly metrics: DeliveryMetrics;
  private readonly listener: ChangeListener;
  private readonly releases: ReleaseBatcher;
  /** Attempts running here, by lane. */
  private readonly inFlight = new Map<string, Promise<void>>();
  private claiming: Promise<void> | undefined;
  private claimAgain = false;
  private closed = false;
  private pollTimer: NodeJS.Timeout | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  /** Due times (clock ms, ascending) of the retries this dispatcher scheduled, and the timer for the first. */
  private retryTimes: number[] = [];
  private retryTimer: NodeJS.Timeout | undefined;
  private claimErrorLogged = 0;
  private readonly openedSecrets = new Map<string, string>();
  /** Claims made, for lease tokens: each claim holds its lanes under `<owner>#<n>`. */
  private claims = 0;
  /** When the last claim started (performance.now()), and the timer that spaces the next one. */
  private lastClaimAt = -Infinity;
  private spacingTimer: NodeJS.Timeout | undefined;
  private readonly awakeMs: number;
  /** Until when (performance.now()) this dispatcher has promised to claim every awakeTickMs, and the ticking timer. */
  private awakeUntil = -Infinity;
  private awakeTimer: NodeJS.Timeout | undefined;
  /** Whether the last claim found lanes. */
  private lastClaimFound = false;

  constructor(private readonly options: DispatcherOptions) {
    this.pool = options.pool;
    this.clock = options.clock ?? systemClock;
    this.log = options.log ?? silent;
    this.concurrency = options.concurrency ?? 64;
    const shares = webhookShares(this.concurrency);
    this.applicationConcurrency = options.applicationConcurrency ?? shares.application;
    this.endpointConcurrency = options.endpointConcurrency ?? Math.min(shares.endpoint, this.applicationConcurrency);
    this.leaseMs = options.leaseMs ?? 30_000;
    this.attemptTimeoutMs = options.attemptTimeoutMs ?? defaultAttemptTimeoutMs;
    this.pollIntervalMs = options.pollIntervalMs ?? 1_000;
    this.awakeMs = options.awakeMs ?? 500;
    this.releases = new ReleaseBatcher(this.pool, this.clock);
    this.metrics = new DeliveryMetrics(options.registry ?? new Registry(), () => laneCounts(this.pool));
    this.listener = new ChangeListener(
      options.databaseUrl,
      eventsChannel,
      () => this.wake(),
      () => this.wake(),
      (message) => this.log.warn({}, message),
    );
  }

  async start(): Promise<void> {
    await this.listener.start();
    this.pollTimer = setInterval(() => this.wake(), this.pollIntervalMs);
    this.pollTimer.unref();
    this.sweepTimer = setInterval(() => {
      this.sweep().catch((error: unknown) => this.log.warn({ err: error }, 'sweeping idle webhook lanes failed'));
    }, sweepIntervalMs);
    this.sweepTimer.unref();
    this.wake();
  }

  /** Deletes lanes idle for a day (their last error goes with them); returns how many went. */
  async sweep(): Promise<number> {
    const idleBefore = new Date(this.clock.now().getTime() - laneIdleMs);
    await forgetSleepingDispatchers(this.pool, idleBefore);
    let swept = 0;
    for (
      let batch = await sweepIdleLanes(this.pool, idleBefore);
      batch > 0;
      batch = await sweepIdleLanes(this.pool, idleBefore)
    ) {
      swept += batch;
      if (this.closed) break;
    }
    return swept;
  }

  /** Claims due lanes now (or right after the claim under way). */
  wake(): void {
    if (this.closed) return;
    if (this.claiming !== undefined) {
      this.claimAgain = true;
      return;
    }
    const wait = this.lastClaimAt + claimSpacingMs - performance.now();
    if (wait > 0) {
      if (this.spacingTimer === undefined) {
        this.spacingTimer = setTimeout(() => {
          this.spacingTimer = undefined;
          this.wake();
        }, wait);
      }
      return;
    }
    this.claimAgain = false;
    this.claiming = this.claimLoop().finally(() => {
      this.claiming = undefined;
      // Woken while claiming: claim again, spaced.
      if (this.claimAgain) this.wake();
    });
  }

  /** Stops claiming, lets the attempts in flight finish (each is bounded by its time limit) and closes connections. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.pollTimer);
    clearInterval(this.sweepTimer);
    clearTimeout(this.retryTimer);
    clearTimeout(this.spacingTimer);
    clearInterval(this.awakeTimer);
    await this.listener.close();
    await this.claiming;
    let bound: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled(this.inFlight.values()),
      new Promise((resolve) => {
        bound = setTimeout(resolve, this.attemptTimeoutMs + 5_000);
      }),
    ]);
    clearTimeout(bound);
    this.agent.destroy();
    await fallAsleep(this.pool, this.owner).catch((error: unknown) => {
      this.log.warn({ err: error }, 'could not withdraw the dispatcher’s wake-up promise; it lapses by itself');
    });
  }

  private async claimLoop(): Promise<void> {
    try {
      for (;;) {
        const limit = Math.min(this.concurrency - this.inFlight.size, claimBatch);
        if (limit <= 0) return; // an attempt that ends wakes the dispatcher again
        const now = this.clock.now();
        this.lastClaimAt = performance.now();
        this.claims += 1;
        const lease = `${this.owner}#${this.claims}`;
        const leaseUntil = new Date(now.getTime() + this.leaseMs);
        const busy = this.inFlight.size > 0 || this.lastClaimFound;
        const lanes = await claimLanes(this.pool, {
          lease,
          now,
          leaseUntil,
          limit,
          headsPerClaim,
          perEndpoint: this.endpointConcurrency,
          perApplication: this.applicationConcurrency,
        });
        this.lastClaimFound = lanes.length > 0;
        for (const lane of lanes) this.run(lane);
        if (busy) await this.keepAwake();
        // A full batch: more may be due at once.
        if (lanes.length < limit || this.closed) return;
      }
    } catch (error) {
      // The poll tries again; say so once a minute at most.
      if (Date.now() - this.claimErrorLogged > 60_000) {
        this.claimErrorLogged = Date.now();
        this.log.warn({ err: error }, 'webhook dispatcher could not claim work; retrying');
      }
    }
  }

  /**
   * A busy dispatcher renews its promise to claim every awakeTickMs (when half of it is left), so that appends skip
   * their NOTIFY, and keeps it: the tick runs until the promise has run out by this process's clock, which is never
   * before the database's (the promise is measured from the database's now(), which is before the answer came).
   */
  private async keepAwake(): Promise<void> {
    if (this.awakeUntil - performance.now() > this.awakeMs / 2 || this.closed) return;
    await stayAwake(this.pool, this.owner, this.awakeMs);
    this.awakeUntil = performance.now() + this.awakeMs;
    if (this.awakeTimer === undefined) {
      this.awakeTimer = setInterval(() => {
        if (performance.now() > this.awakeUntil) {
          clearInterval(this.awakeTimer);
          this.awakeTimer = undefined;
        }
        this.wake();
      }, awakeTickMs);
    }
  }

  private run(lane: ClaimedLane): void {
    const key = `${lane.endpointId} ${lane.streamKey}`;
    // Still finishing here: the attempt that just released this lane (before it left inFlight), or, after a pause
    // longer than the lease, an attempt whose lease this claim replaced. Either way the new claim runs after it.
    const previous = this.inFlight.get(key) ?? Promise.resolve();
    const attempt: Promise<void> = previous
      .then(() => this.deliver(lane))
      .catch((error: unknown) => {
        this.log.warn(
          { err: error, endpointId: lane.endpointId, streamKey: lane.streamKey },
          'webhook delivery outcome not recorded; the lane is retried when its lease ends',
        );
      })
      .finally(() => {
        if (this.inFlight.get(key) === attempt) this.inFlight.delete(key);
        this.wake();
      });
    this.inFlight.set(key, attempt);
  }

  /**
   * Delivers the lane's claimed events in sequence order, one in flight at a time, each only after the one before it
   * was acknowledged, while the lease leaves room for a whole attempt; then releases the lane with the acknowledged
   * ones in one statement, or records the failure that stopped the run. A run under one claim saves a claim and a
   * release per event when a stream has a backlog; a process that dies mid-run redelivers what it had not recorded
   * (at least once, in order).
   */
  private async deliver(lane: ClaimedLane): Promise<void> {
    const delivered: number[] = [];
    for (const [index, head] of lane.heads.entries()) {
      const startedAt = this.clock.now();
      if (
        index > 0 &&
        (this.closed || startedAt.getTime() + this.attemptTimeoutMs + leaseMarginMs > lane.leaseUntil.getTime())
      ) {
        break;
      }
      const started = performance.now();
      // The lane's failure record is about its first head only; an event further on starts afresh.
      const sameHead = index === 0 && lane.headEventId === head.eventId;
      if (!sameHead) {
        const since = Math.max(head.occurredAt.getTime(), head.queuedAt.getTime());
        this.metrics.firstAttemptDelay.observe(Math.max(0, startedAt.getTime() - since) / 1000);
      }
      const result = await this.attempt(lane, head, startedAt);
      this.metrics.attempted(result.outcome, (performance.now() - started) / 1000);
      if (result.outcome === 'success') {
        delivered.push(head.sequence);
        continue;
      }
      await this.failed(lane, head, sameHead, startedAt, result, delivered);
      return;
    }
    await this.releases.release(lane, delivered);
  }

  /** A failed attempt: the lane backs off (or parks) with what the run acknowledged before it recorded. */
  private async failed(
    lane: ClaimedLane,
    head: HeadEvent,
    sameHead: boolean,
    startedAt: Date,
    result: AttemptResult,
    delivered: readonly number[],
  ): Promise<void> {
    const now = this.clock.now();
    const attempts = (sameHead ? lane.attempts : 0) + 1;
    const headFirstAttemptAt = (sameHead ? lane.headFirstAttemptAt : null) ?? startedAt;
    const parked = shouldPark(headFirstAttemptAt, now);
    const nextAttemptAt = new Date(now.getTime() + retryDelayMs(attempts));
    const error = result.error ?? result.outcome;
    await recordFailure(
      this.pool,
      lane,
      {
        attempts,
        headEventId: head.eventId,
        headFirstAttemptAt,
        attemptedAt: startedAt,
        error,
        nextAttemptAt,
        parkedAt: parked ? now : null,
      },
      delivered,
    );
    const context = { endpointId: lane.endpointId, streamKey: lane.streamKey, eventId: head.eventId, attempts, error };
    if (parked) {
      this.log.warn(context, 'webhook stream parked after 24 hours of failed attempts; it resumes on replay');
    } else {
      this.log.debug(context, 'webhook delivery attempt failed');
      this.retryAt(nextAttemptAt.getTime());
    }
  }

  private async attempt(lane: ClaimedLane, head: HeadEvent, startedAt: Date): Promise<AttemptResult> {
    let secrets: string[];
    try {
      secrets = [this.openSecret(lane.secret)];
      if (
        lane.previousSecret !== null &&
        lane.previousSecretExpiresAt !== null &&
        lane.previousSecretExpiresAt.getTime() > startedAt.getTime()
      ) {
        secrets.push(this.openSecret(lane.previousSecret));
      }
    } catch {
      return {
        outcome: 'refused',
        error: "refused: the endpoint's signing secret cannot be opened with this service's key",
      };
    }
    return attemptDelivery(
      {
        url: lane.url,
        secrets,
        eventId: head.eventId,
        eventType: head.type,
        payload: head.payload,
        timestamp: Math.floor(startedAt.getTime() / 1000),
      },
      {
        agent: this.agent,
        allowPrivateNetworks: this.options.allowPrivateNetworks,
        timeoutMs: this.attemptTimeoutMs,
      },
    );
  }

  /** Signing secrets in the clear, by their sealed form (which changes with every rotation). */
  private openSecret(sealed: string): string {
    let secret = this.openedSecrets.get(sealed);
    if (secret === undefined) {
      secret = openSecret(this.options.secretsKey, sealed);
      if (this.openedSecrets.size >= maxOpenedSecrets) this.openedSecrets.clear();
      this.openedSecrets.set(sealed, secret);
    }
    return secret;
  }

  /** Wakes the dispatcher when a retry it scheduled comes due (the poll covers retries scheduled elsewhere). */
  private retryAt(at: number): void {
    if (this.closed) return;
    const times = this.retryTimes;
    let index = times.length;
    while (index > 0 && (times[index - 1] as number) > at) index -= 1;
    times.splice(index, 0, at);
    if (times.length > maxRetryTimes) times.pop();
    if (index === 0) this.armRetryTimer();
  }

  private armRetryTimer(): void {
    clearTimeout(this.retryTimer);
    const first = this.retryTimes[0];
    if (first === undefined || this.closed) return;
    this.retryTimer = setTimeout(
      () => {
        const now = this.clock.now().getTime();
        let due = 0;
        while (due < this.retryTimes.length && (this.retryTimes[due] as number) <= now) due += 1;
        this.retryTimes.splice(0, due);
        this.wake();
        this.armRetryTimer();
      },
      Math.max(0, first - this.clock.now().getTime()),
    );
    this.retryTimer.unref();
  }
}
