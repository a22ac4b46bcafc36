/**
 * How long a link waits before connecting and binding again (docs/messaging.md): 1 s after the first failure,
 * doubling to at most 60 s, with jitter so that links of many carriers, or a carrier's many engines after its SMSC
 * comes back, do not all return in the same instant. Half of the delay is fixed and half random.
 */
export interface BackoffSettings {
  firstMs: number;
  maxMs: number;
}

export const reconnectBackoff: BackoffSettings = { firstMs: 1_000, maxMs: 60_000 };

/** The wait after `failures` failures in a row (1 or more); `random` is in [0, 1). */
export function reconnectDelayMs(failures: number, random: () => number, settings = reconnectBackoff): number {
  const doublings = Math.min(Math.max(failures, 1) - 1, 30);
  const ceiling = Math.min(settings.maxMs, settings.firstMs * 2 ** doublings);
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}
