/**
 * Long-polls of devices' offers (operation 63, docs/phones.md "Offers") waiting with no database connection held:
 * one listener per API process on `offerChannel`, where every change of an offer is announced with its device
 * (core/devices/offers.ts), wakes the waiters of that device (notice-waiters.ts: a notice is only a hint, the waiter
 * reads the device's offers again; while the listener is down waiters look again every second, and all of them when
 * it is back). The route stops every waiter as the process closes (`stopWaiting`, before the listener closes).
 */
import { offerChannel } from '../core/change-notices.ts';
import { parseOfferNotice } from '../core/devices/offers.ts';
import { NoticeWaiters } from './notice-waiters.ts';

/** A notice names the device whose offer changed. */
export class OfferWaiters extends NoticeWaiters {
  constructor(databaseUrl: string, log: (message: string) => void) {
    super(databaseUrl, offerChannel, (payload) => parseOfferNotice(payload)?.deviceId, log);
  }
}
