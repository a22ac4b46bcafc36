/**
 * How a media endpoint (rtp.ts, webrtc.ts) hands events to its listeners and errors to its owner: nothing a listener
 * or an error handler throws ever reaches the socket or peer connection that produced the event.
 */

/** The endpoint's error handler made safe: `onError` (by default a process warning); one that throws is ignored. */
export function errorReporter(onError?: (error: unknown) => void): (error: unknown) => void {
  const handle = onError ?? ((error) => process.emitWarning(error instanceof Error ? error : String(error)));
  return (error) => {
    try {
      handle(error);
    } catch {
      // An error handler that throws has nowhere else to go.
    }
  };
}

/** Calls every listener with `value`; one that throws is reported, and the others are still called. */
export function emit<T>(listeners: ReadonlySet<(value: T) => void>, value: T, report: (error: unknown) => void): void {
  for (const listener of [...listeners]) {
    try {
      listener(value);
    } catch (error) {
      report(error);
    }
  }
}
