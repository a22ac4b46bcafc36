/**
 * Retry timing of a lane (spec section 6): the first retry 1 second after a failed attempt, doubling after each
 * further failure up to 5 minutes between attempts; 24 hours after its head event's first attempt the lane parks
 * (the rest of its stream waits behind it) until a replay.
 */
export const firstRetryMs = 1_000;
export const maxRetryMs = 300_000;
export const parkAfterMs = 24 * 60 * 60_000;

/** The wait before the next attempt after `failures` failed attempts in a row (1 or more) of a lane's head. */
export function retryDelayMs(failures: number): number {
  const doublings = Math.min(Math.max(failures, 1) - 1, 30);
  return Math.min(maxRetryMs, firstRetryMs * 2 ** doublings);
}

/** True when a head first attempted at `firstAttemptAt` has failed for long enough to park its lane at `now`. */
export function shouldPark(firstAttemptAt: Date, now: Date): boolean {
  return now.getTime() - firstAttemptAt.getTime() >= parkAfterMs;
}
