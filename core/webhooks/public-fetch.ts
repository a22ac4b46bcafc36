/**
 * One GET under the webhook SSRF rules (docs/events.md), for what the service fetches from URLs people give it (a
 * prompt's audio, engine/media/download.ts; an MMS' media, core/messages/media.ts): the host is resolved here and
 * every address it resolves to must be public (address.ts) unless private networks are allowed; the connection goes
 * to one of those checked addresses (a pinned `lookup`, with the host name as TLS server name, so a second DNS answer
 * cannot swap in another address); redirects are not followed; the body is capped at `maxBytes` (by Content-Length
 * at once, else while reading); the whole fetch, DNS included, has `timeoutMs`. The caller checks the URL itself
 * (https, no credentials) and words the failures: each is a `PublicFetchError` saying what went wrong as data.
 */
import type { LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { refusedAddresses } from './address.ts';
import { pinnedLookup } from './pinned-lookup.ts';
import { assertNotHoldingConnection } from '../held-connections.ts';

export type PublicFetchFailure =
  /** The host did not resolve: the resolver's error code, or its message when it has none. */
  | { kind: 'dns'; host: string; code: string | undefined; message: string }
  | { kind: 'no_address'; host: string }
  /** An address the host resolves to is not to be reached: why, as address.ts says it. */
  | { kind: 'address_refused'; reason: string }
  | { kind: 'dns_timeout'; host: string }
  | { kind: 'timeout'; timeoutMs: number }
  | { kind: 'redirect'; status: number }
  | { kind: 'status'; status: number }
  /** The caller's `check` refused the answer's headers. */
  | { kind: 'refused'; reason: string }
  /** Over `maxBytes`: `declared` when the Content-Length said so before any byte came. */
  | { kind: 'too_large'; declared: number | undefined; maxBytes: number }
  | { kind: 'response_failed'; message: string }
  | { kind: 'closed_early' }
  | { kind: 'connection_failed'; message: string };

export class PublicFetchError extends Error {
  constructor(readonly failure: PublicFetchFailure) {
    super(failure.kind);
    this.name = 'PublicFetchError';
  }
}

export interface PublicFetchOptions {
  allowPrivateNetworks: boolean;
  maxBytes: number;
  timeoutMs: number;
  headers: Record<string, string>;
  /** Checks a 2xx answer's headers before its body is read: a reason refuses it. */
  check?: (headers: IncomingHttpHeaders) => string | undefined;
  /** Keeps only the body's first `keep` bytes (the rest is counted and dropped); the whole body without it. */
  keep?: number;
}

export interface PublicFetchAnswer {
  headers: IncomingHttpHeaders;
  /** The body, or its first `keep` bytes. */
  body: Buffer;
  /** The body's whole length. */
  size: number;
}

/** A size as failures say it: bytes, or megabytes to one decimal. */
export function sizeText(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MB` : `${bytes} bytes`;
}

async function checkedAddresses(host: string, allowPrivateNetworks: boolean, signal: AbortSignal) {
  let addresses: LookupAddress[];
  try {
    addresses = await Promise.race([
      lookup(host, { all: true, verbatim: true }),
      new Promise<never>((_, reject) => {
        if (signal.aborted) reject(signal.reason);
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      }),
    ]);
  } catch (error) {
    if (signal.aborted) throw new PublicFetchError({ kind: 'dns_timeout', host });
    const { code, message } = error as NodeJS.ErrnoException;
    throw new PublicFetchError({ kind: 'dns', host, code, message });
  }
  if (addresses.length === 0) throw new PublicFetchError({ kind: 'no_address', host });
  const refused = allowPrivateNetworks ? undefined : refusedAddresses(host, addresses);
  if (refused !== undefined) throw new PublicFetchError({ kind: 'address_refused', reason: refused });
  return addresses;
}

/** GETs `url` (already checked: https, no credentials); see the file's comment. */
export async function publicFetch(url: URL, options: PublicFetchOptions): Promise<PublicFetchAnswer> {
  assertNotHoldingConnection(`a fetch of ${url.origin}`);
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const timeout = AbortSignal.timeout(options.timeoutMs);
  const addresses = await checkedAddresses(host, options.allowPrivateNetworks, timeout);
  return new Promise<PublicFetchAnswer>((resolve, reject) => {
    let settled = false;
    const finish = (result: PublicFetchAnswer | PublicFetchFailure) => {
      if (settled) return;
      settled = true;
      timeout.removeEventListener('abort', onTimeout);
      request.destroy();
      if ('kind' in result) reject(new PublicFetchError(result));
      else resolve(result);
    };
    const onTimeout = () => finish({ kind: 'timeout', timeoutMs: options.timeoutMs });
    const request = https.request({
      protocol: 'https:',
      hostname: host,
      port: url.port === '' ? 443 : Number(url.port),
      path: `${url.pathname}${url.search}`,
      method: 'GET',
      headers: options.headers,
      agent: false,
      lookup: pinnedLookup(addresses),
      ...(isIP(host) === 0 ? { servername: host } : {}),
    });
    if (timeout.aborted) onTimeout();
    else timeout.addEventListener('abort', onTimeout, { once: true });
    request.on('response', (response: IncomingMessage) => {
      const status = response.statusCode ?? 0;
      if (status >= 300 && status < 400) return finish({ kind: 'redirect', status });
      if (status < 200 || status >= 300) return finish({ kind: 'status', status });
      const refused = options.check?.(response.headers);
      if (refused !== undefined) return finish({ kind: 'refused', reason: refused });
      const declared = Number(response.headers['content-length']);
      if (Number.isFinite(declared) && declared > options.maxBytes) {
        return finish({ kind: 'too_large', declared, maxBytes: options.maxBytes });
      }
      const keep = options.keep ?? Number.POSITIVE_INFINITY;
      const chunks: Buffer[] = [];
      let received = 0;
      response.on('data', (chunk: Buffer) => {
        if (received < keep) chunks.push(chunk.subarray(0, keep - received));
        received += chunk.length;
        if (received > options.maxBytes) finish({ kind: 'too_large', declared: undefined, maxBytes: options.maxBytes });
      });
      response.on('end', () => finish({ headers: response.headers, body: Buffer.concat(chunks), size: received }));
      response.on('error', (error) => finish({ kind: 'response_failed', message: error.message }));
      response.on('close', () => {
        if (!response.complete) finish({ kind: 'closed_early' });
      });
    });
    request.on('error', (error) => finish({ kind: 'connection_failed', message: error.message }));
    request.end();
  });
}
