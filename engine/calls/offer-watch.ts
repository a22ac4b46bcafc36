/**
 * The offers of the calls this engine holds (a ring round waits for an accept, core/devices/offers.ts): a notice on
 * `switchboard_offers` names the call whose offers changed; when the listener (re)connects, every call reads its
 * offers again, in case a notice was missed. Every engine also sweeps offers whose device's presence lapsed while
 * they rang (withdrawn) and offers past their expiry (marked so); the statements are idempotent, so that a device
 * that went away stops being offered the call and its long-poll hears it (docs/phones.md, "Presence").
 */
import type pg from 'pg';
import { ChangeListener, offerChannel } from '../../core/change-notices.ts';
import { expireOffers, parseOfferNotice, withdrawLapsedOffers } from '../../core/devices/offers.ts';
import type { Log } from '../../core/log.ts';
import type { ActiveCalls } from './active-calls.ts';

/** How often the engine sweeps offers whose device's presence lapsed or whose time is up. */
const offerSweepMs = 2_000;

export class OfferWatch {
  private readonly listener: ChangeListener;
  private sweep: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;

  constructor(
    private readonly options: { pool: pg.Pool; databaseUrl: string; calls: ActiveCalls; log: Pick<Log, 'warn'> },
  ) {
    const { calls, log } = options;
    this.listener = new ChangeListener(
      options.databaseUrl,
      offerChannel,
      (payload) => {
        const notice = parseOfferNotice(payload);
        if (notice !== undefined) calls.get(notice.callId)?.offersChanged();
      },
      () => {
        for (const call of calls.all()) call.offersChanged();
      },
      (message) => log.warn({}, message),
    );
  }

  async start(): Promise<void> {
    await this.listener.start();
    this.sweep = setInterval(() => this.sweepOffers(), offerSweepMs);
    this.sweep.unref();
  }

  /** Stops the sweep (waiting for one in flight) and the notices. */
  async close(): Promise<void> {
    clearInterval(this.sweep);
    await this.sweeping;
    await this.listener.close();
  }

  private sweepOffers(): void {
    const { pool, log } = this.options;
    this.sweeping ??= (async () => {
      await withdrawLapsedOffers(pool);
      await expireOffers(pool);
    })()
      .catch((error: unknown) => log.warn({ err: error }, 'offers could not be swept'))
      .finally(() => (this.sweeping = undefined));
  }
}
