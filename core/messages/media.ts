/**
 * An MMS' media checked before it is accepted (docs/messaging.md, "MMS"): each URL given to operation 67 is fetched
 * under the webhook SSRF rules (core/webhooks/): https only, no credentials in it, the host resolved here and every
 * address it resolves to public unless private networks are allowed (WEBHOOK_ALLOW_PRIVATE_NETWORKS), the connection
 * pinned to those checked addresses (so a second DNS answer cannot swap one in), no redirect followed, an answer
 * within `timeoutMs`, at most `maxBytes` (refused at once by Content-Length, else reading stops past it). The
 * Content-Type must be one carriers take for MMS, and an image's first bytes must be of that image type (a page
 * served as image/png is refused). Fetched so the carrier is not handed a link that fails: the carrier fetches the
 * media itself, so the bytes are read and dropped, never kept.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { type PublicFetchFailure, PublicFetchError, publicFetch, sizeText } from '../webhooks/public-fetch.ts';
import { checkWebhookUrl } from '../webhooks/url.ts';
import type { Media } from './messages.ts';

export const mediaTypes = [
  'image/jpeg',
  'image/png',
  'image/gif',
  'video/mp4',
  'audio/mpeg',
  'text/vcard',
  'application/pdf',
] as const;

export interface MediaSettings {
  allowPrivateNetworks: boolean;
  /** Each medium's limit (5 MB). */
  maxBytes: number;
  /** Each fetch's limit, DNS included. */
  timeoutMs: number;
}

export const mediaDefaults = { maxBytes: 5 * 1024 * 1024, timeoutMs: 10_000 };

/** Why one of the URLs was refused: `index` is its place in `mediaUrls`. */
export class MediaError extends Error {
  constructor(
    readonly index: number,
    readonly reason: string,
  ) {
    super(`mediaUrls[${index}] ${reason}`);
    this.name = 'MediaError';
  }
}

/** The first bytes each image type starts with. */
const imageSignatures: Record<string, Buffer[]> = {
  'image/jpeg': [Buffer.from([0xff, 0xd8, 0xff])],
  'image/png': [Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])],
  'image/gif': [Buffer.from('GIF87a'), Buffer.from('GIF89a')],
};

/** The Content-Type's media type (parameters dropped, lower case); `text/x-vcard` is the older name of text/vcard. */
function mediaType(header: string | undefined): string {
  const type = (header ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  return type === 'text/x-vcard' ? 'text/vcard' : type;
}

/** A fetch's failure as the refusal says it, after `mediaUrls[i]`. */
function wording(failure: PublicFetchFailure, timeoutMs: number): string {
  switch (failure.kind) {
    case 'dns':
      return `was not fetched: ${failure.host} does not resolve (${failure.code ?? 'error'})`;
    case 'no_address':
      return `was not fetched: ${failure.host} has no address`;
    case 'address_refused':
      return `is ${failure.reason}`;
    case 'dns_timeout':
      return `timed out: ${failure.host} did not resolve in time`;
    case 'timeout':
      return `timed out: no complete answer within ${timeoutMs / 1000} s`;
    case 'redirect':
      return `answered a redirect (HTTP ${failure.status}), which is not followed`;
    case 'status':
      return `answered HTTP ${failure.status}`;
    case 'refused':
      return failure.reason;
    case 'too_large':
      return failure.declared === undefined
        ? `is too large: over the ${sizeText(failure.maxBytes)} limit`
        : `is too large: ${sizeText(failure.declared)}, over the ${sizeText(failure.maxBytes)} limit`;
    case 'response_failed':
    case 'connection_failed':
      return `was not fetched: ${failure.message}`;
    case 'closed_early':
      return 'was not fetched: the connection closed early';
  }
}

/** A type carriers take for MMS, or why the answer's Content-Type is refused. */
function typeRefusal(headers: IncomingHttpHeaders): string | undefined {
  const contentType = mediaType(headers['content-type']);
  if ((mediaTypes as readonly string[]).includes(contentType)) return undefined;
  return `is ${contentType === '' ? 'of no type' : contentType}: MMS take ${mediaTypes.join(', ')}`;
}

/** Fetches one URL and checks it; throws an Error whose message says why it is refused. */
async function checkOne(raw: string, settings: MediaSettings): Promise<Media> {
  const checked = checkWebhookUrl(raw, { allowPrivateNetworks: settings.allowPrivateNetworks });
  if (!checked.ok) throw new Error(`is refused: the URL ${checked.problem}`);
  let answer;
  try {
    answer = await publicFetch(new URL(checked.url), {
      ...settings,
      headers: { accept: mediaTypes.join(', '), 'user-agent': 'switchboard-mms' },
      check: typeRefusal,
      // Only the first bytes are kept (for the image check); the rest is counted and dropped.
      keep: 16,
    });
  } catch (error) {
    throw error instanceof PublicFetchError ? new Error(wording(error.failure, settings.timeoutMs)) : error;
  }
  if (answer.size === 0) throw new Error('is empty');
  const contentType = mediaType(answer.headers['content-type']);
  const signatures = imageSignatures[contentType];
  if (
    signatures !== undefined &&
    !signatures.some((signature) => answer.body.subarray(0, signature.length).equals(signature))
  ) {
    throw new Error(`is served as ${contentType} but its bytes are not that image type`);
  }
  return { url: checked.url, contentType, size: answer.size };
}

/**
 * Every URL fetched and checked, at once; the media as the message keeps them, in order. The first refused URL (by
 * its place in the list) is thrown as a `MediaError`.
 */
export async function checkMedia(urls: readonly string[], settings: MediaSettings): Promise<Media[]> {
  const outcomes = await Promise.allSettled(urls.map((url) => checkOne(url, settings)));
  return outcomes.map((outcome, index) => {
    if (outcome.status === 'fulfilled') return outcome.value;
    throw new MediaError(index, (outcome.reason as Error).message);
  });
}
