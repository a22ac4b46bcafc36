/**
 * Downloading a prompt's audio file under the webhook SSRF rules (docs/events.md; the same checks as
 * engine/delivery/attempt.ts): https only; the host is resolved here and every address it resolves to must be public
 * (core/webhooks/address.ts) unless private networks are allowed; the connection goes to one of those checked
 * addresses (a pinned `lookup`, with the host name as TLS server name, so a second DNS answer cannot swap in another
 * address); redirects are not followed; the body is capped at `maxBytes` (by Content-Length at once, else while
 * reading); the whole download, DNS included, has `timeoutMs`.
 *
 * Every failure is a `DownloadError` with a message fit for a log line.
 */
import type { LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import type { IncomingMessage } from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { refusedAddresses } from '../../core/webhooks/address.ts';
import { pinnedLookup } from '../../core/webhooks/pinned-lookup.ts';

export class DownloadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DownloadError';
  }
}

export interface DownloadSettings {
  allowPrivateNetworks: boolean;
  maxBytes: number;
  timeoutMs: number;
}

function megabytes(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MB` : `${bytes} bytes`;
}

async function checkedAddresses(host: string, settings: DownloadSettings, signal: AbortSignal) {
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
    if (signal.aborted) throw new DownloadError(`timeout: ${host} did not resolve in time`);
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new DownloadError(`dns: ${host} does not resolve (${code})`);
  }
  if (addresses.length === 0) throw new DownloadError(`dns: ${host} has no address`);
  const refused = settings.allowPrivateNetworks ? undefined : refusedAddresses(host, addresses);
  if (refused !== undefined) throw new DownloadError(refused);
  return addresses;
}

/** The body at `location` (an https URL). */
export async function download(location: string, settings: DownloadSettings): Promise<Buffer> {
  let url: URL;
  try {
    url = new URL(location);
  } catch {
    throw new DownloadError('refused: not a valid URL');
  }
  if (url.protocol !== 'https:') throw new DownloadError(`refused: ${url.protocol} URLs are not fetched (https only)`);
  if (url.username !== '' || url.password !== '') throw new DownloadError('refused: URLs with credentials');
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;

  const timeout = AbortSignal.timeout(settings.timeoutMs);
  const addresses = await checkedAddresses(host, settings, timeout);

  return new Promise<Buffer>((resolve, reject) => {
    let settled = false;
    const finish = (result: Buffer | DownloadError) => {
      if (settled) return;
      settled = true;
      timeout.removeEventListener('abort', onTimeout);
      request.destroy();
      if (result instanceof DownloadError) reject(result);
      else resolve(result);
    };
    const onTimeout = () => finish(new DownloadError(`timeout: no complete answer within ${settings.timeoutMs} ms`));
    const request = https.request({
      protocol: 'https:',
      hostname: host,
      port: url.port === '' ? 443 : Number(url.port),
      path: `${url.pathname}${url.search}`,
      method: 'GET',
      headers: { accept: 'audio/wav, audio/x-wav, audio/*;q=0.5', 'user-agent': 'switchboard-prompts' },
      agent: false,
      lookup: pinnedLookup(addresses),
      ...(isIP(host) === 0 ? { servername: host } : {}),
    });
    if (timeout.aborted) onTimeout();
    else timeout.addEventListener('abort', onTimeout, { once: true });
    request.on('response', (response: IncomingMessage) => {
      const status = response.statusCode ?? 0;
      if (status >= 300 && status < 400) {
        finish(new DownloadError(`redirect not followed: HTTP ${status}`));
        return;
      }
      if (status < 200 || status >= 300) {
        finish(new DownloadError(`HTTP ${status}`));
        return;
      }
      const declared = Number(response.headers['content-length']);
      if (Number.isFinite(declared) && declared > settings.maxBytes) {
        finish(new DownloadError(`too large: ${megabytes(declared)}, over the ${megabytes(settings.maxBytes)} limit`));
        return;
      }
      const chunks: Buffer[] = [];
      let received = 0;
      response.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received > settings.maxBytes) {
          finish(new DownloadError(`too large: over the ${megabytes(settings.maxBytes)} limit`));
          return;
        }
        chunks.push(chunk);
      });
      response.on('end', () => finish(Buffer.concat(chunks)));
      response.on('error', (error) => finish(new DownloadError(`download failed: ${error.message}`)));
      response.on('close', () => {
        if (!response.complete) finish(new DownloadError('download failed: the connection closed early'));
      });
    });
    request.on('error', (error) => finish(new DownloadError(`connection failed: ${error.message}`)));
    request.end();
  });
}
