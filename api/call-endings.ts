/**
 * Waiting for calls to end with no database connection held (a hangup waits for the engine, docs/calls.md): one
 * listener per API process on `callEndedChannel`, where the engine announces the end of a call whose hangup was asked
 * (core/calls/calls.ts), wakes the waiters of that call (notice-waiters.ts: a notice is only a hint, the waiter
 * re-reads the call; while the listener is down waiters look again every second, and all of them when it is back).
 */
import { callEndedChannel } from '../core/change-notices.ts';
import { NoticeWaiters } from './notice-waiters.ts';

/** The notice's payload is the id of the call that ended. */
export class CallEndings extends NoticeWaiters {
  constructor(databaseUrl: string, log: (message: string) => void) {
    super(databaseUrl, callEndedChannel, (callId) => callId, log);
  }
}
