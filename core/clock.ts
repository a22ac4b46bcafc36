/** The time the service goes by: the system's, or in tests a clock they set. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };
