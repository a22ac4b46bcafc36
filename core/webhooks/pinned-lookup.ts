/**
 * Connecting only to addresses already checked (SSRF rules, core/webhooks/address.ts): a `lookup` for http(s)
 * requests that answers with the addresses resolved and checked before the request, so the connection cannot go to
 * a different address than the one checked (no second DNS answer in between). Used by webhook attempts and prompt
 * downloads.
 */
import type { LookupAddress, LookupOptions } from 'node:dns';
import type { LookupFunction } from 'node:net';

export function pinnedLookup(addresses: readonly LookupAddress[]): LookupFunction {
  return (_hostname: string, options: LookupOptions, callback) => {
    if (options.all) {
      callback(null, [...addresses]);
      return;
    }
    const chosen = addresses.find((address) => !options.family || address.family === options.family) ?? addresses[0];
    if (chosen === undefined) callback(Object.assign(new Error('no address'), { code: 'ENOTFOUND' }), '', 0);
    else callback(null, chosen.address, chosen.family);
  };
}
