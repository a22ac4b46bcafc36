/**
 * Lane releases, batched: under load many attempts end at once, and one statement releases them all (see
 * releaseLanes). One batch runs at a time; releases that come meanwhile wait for the next one, so a quiet dispatcher
 * releases each lane at once and a busy one in batches. A lane an appending transaction holds locked is released on
 * its own (releaseLane, which waits for that transaction) without holding up the batches.
 */
import type pg from 'pg';
import type { Clock } from '../../core/clock.ts';
import { type ClaimedLane, type Release, releaseLane, releaseLanes } from '../../core/webhooks/deliveries.ts';

const maxBatch = 200;

interface Queued extends Release {
  resolve(): void;
  reject(error: unknown): void;
}

export class ReleaseBatcher {
  private queue: Queued[] = [];
  private flushing = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly clock: Clock,
  ) {}

  /** Resolves once the lane is released (or its lease turned out to be another claim's). */
  release(lane: ClaimedLane, delivered: readonly number[]): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ lane, delivered, resolve, reject });
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, maxBatch);
      const now = this.clock.now();
      try {
        const released = await releaseLanes(this.pool, batch, now);
        for (const item of batch) {
          if (released.has(`${item.lane.endpointId} ${item.lane.streamKey}`)) item.resolve();
          else releaseLane(this.pool, item.lane, item.delivered, now).then(item.resolve, item.reject);
        }
      } catch (error) {
        for (const item of batch) item.reject(error);
      }
    }
    this.flushing = false;
  }
}
