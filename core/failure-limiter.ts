/**
 * Failed attempts per key (a source address, a username, an account) in a fixed window, against password guessing:
 * once a key has `limit` failures in the window it is blocked until the window ends; a success clears it. In memory,
 * per process (a guesser spread over pods gets each pod's allowance), with at most `maxKeys` keys: past that, the
 * oldest go first, so a storm of made-up usernames cannot grow it without end. Used by the SIP registrar
 * (engine/sip/registrar.ts) and the carriers' HTTP interface (api/routes/carrier-mms.ts).
 */
export class FailureLimiter {
  private readonly counts = new Map<string, { failures: number; since: number }>();

  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly maxKeys = 100_000,
  ) {}

  /** Seconds until the key may try again, or undefined when it may now. */
  blocked(key: string, now: number): number | undefined {
    const entry = this.counts.get(key);
    if (entry === undefined || entry.failures < this.limit) return undefined;
    const left = entry.since + this.windowMs - now;
    if (left <= 0) {
      this.counts.delete(key);
      return undefined;
    }
    return Math.ceil(left / 1000);
  }

  fail(key: string, now: number): void {
    const entry = this.counts.get(key);
    if (entry !== undefined && now - entry.since < this.windowMs) {
      entry.failures += 1;
      return;
    }
    this.counts.delete(key);
    this.counts.set(key, { failures: 1, since: now });
    while (this.counts.size > this.maxKeys) {
      const oldest = this.counts.keys().next().value;
      if (oldest === undefined) break;
      this.counts.delete(oldest);
    }
  }

  reset(key: string): void {
    this.counts.delete(key);
  }
}
