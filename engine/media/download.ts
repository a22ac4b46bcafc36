/**
 * Downloading a prompt's audio file under the webhook SSRF rules (docs/events.md; the same checks as
 * engine/delivery/attempt.ts): https only, no credentials in the URL; then `publicFetch` (core/webhooks/public-fetch.ts:
 * public addresses only unless private networks are allowed, the connection pinned to them, no redirect followed, the
 * body capped at `maxBytes`, the whole download within `timeoutMs`).
 *
 * Every failure is a `DownloadError` with a message fit for a log line.
 */
import { type PublicFetchFailure, PublicFetchError, publicFetch, sizeText } from '../../core/webhooks/public-fetch.ts';

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

/** A failure as this file words it (logged with the prompt). */
function wording(failure: PublicFetchFailure): string {
  switch (failure.kind) {
    case 'dns':
      return `dns: ${failure.host} does not resolve (${failure.code ?? failure.message})`;
    case 'no_address':
      return `dns: ${failure.host} has no address`;
    case 'address_refused':
      return failure.reason;
    case 'dns_timeout':
      return `timeout: ${failure.host} did not resolve in time`;
    case 'timeout':
      return `timeout: no complete answer within ${failure.timeoutMs} ms`;
    case 'redirect':
      return `redirect not followed: HTTP ${failure.status}`;
    case 'status':
      return `HTTP ${failure.status}`;
    case 'refused':
      return failure.reason;
    case 'too_large':
      return failure.declared === undefined
        ? `too large: over the ${sizeText(failure.maxBytes)} limit`
        : `too large: ${sizeText(failure.declared)}, over the ${sizeText(failure.maxBytes)} limit`;
    case 'response_failed':
      return `download failed: ${failure.message}`;
    case 'closed_early':
      return 'download failed: the connection closed early';
    case 'connection_failed':
      return `connection failed: ${failure.message}`;
  }
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
  try {
    const answer = await publicFetch(url, {
      ...settings,
      headers: { accept: 'audio/wav, audio/x-wav, audio/*;q=0.5', 'user-agent': 'switchboard-prompts' },
    });
    return answer.body;
  } catch (error) {
    throw error instanceof PublicFetchError ? new DownloadError(wording(error.failure)) : error;
  }
}
