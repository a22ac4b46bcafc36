/**
 * The pace of `submit_sm` to a carrier (docs/messaging.md): at most its throughput in parts a second, evenly spaced;
 * a throttling answer (ESME_RTHROTTLED, ESME_RMSGQFUL) halves the pace for `throttleMs` from the last such answer,
 * and another one within that time halves it again. The time is the caller's (`now`), so tests need no waiting.
 */
/** The slowest pace throttling brings a link to: one part every ten seconds. */
const slowestRate = 0.1;

export class Pacing {
  private rate: number;
  private nextAt = 0;
  private throttledUntil = 0;

  constructor(
    private readonly throughput: number,
    private readonly throttleMs: number,
    private readonly now: () => number,
  ) {
    this.rate = throughput;
  }

  /** Parts a second allowed now. */
  currentRate(): number {
    if (this.now() >= this.throttledUntil) this.rate = this.throughput;
    return this.rate;
  }

  /** Takes the next slot: how long to wait before sending the part in it. */
  take(): number {
    const rate = this.currentRate();
    const now = this.now();
    const at = Math.max(now, this.nextAt);
    this.nextAt = at + 1_000 / rate;
    return at - now;
  }

  /** The carrier asked us to slow down. */
  throttled(): void {
    this.rate = Math.max(this.currentRate() / 2, slowestRate);
    this.throttledUntil = this.now() + this.throttleMs;
  }
}
