/**
 * Verifying a webhook delivery on the receiving side (specification section 6, Delivery): the official client's
 * receiver helper, published on its own as `switchboard/webhooks`. It depends on nothing but `node:crypto`.
 *
 * A delivery carries `x-service-timestamp` (Unix seconds, 1 to 12 digits) and `x-service-signature`: hex
 * HMAC-SHA256 of `<timestamp>.<rawBody>` keyed by the whole signing secret as UTF-8 (its `whsec_` prefix included),
 * one per live secret, comma-separated during a rotation. A delivery is accepted when any of those signatures matches
 * any of the receiver's secrets (compared in constant time) and its timestamp is within the tolerance of the
 * receiver's clock, in either direction.
 *
 * ```ts
 * const event = verifyWebhook({ headers: request.headers, rawBody, secrets: process.env.SIGNING_SECRET });
 * ```
 *
 * Pass the body exactly as received (the bytes, or their text), never a re-serialised object.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** The headers of a delivery. */
export const webhookHeaders = {
  timestamp: 'x-service-timestamp',
  signature: 'x-service-signature',
  eventId: 'x-service-event-id',
  eventType: 'x-service-event-type',
} as const;
const timestampHeader = webhookHeaders.timestamp;
const signatureHeader = webhookHeaders.signature;

/** The default tolerance between the delivery's timestamp and the receiver's clock: 5 minutes. */
export const defaultToleranceSeconds = 300;

/** Why a delivery was refused. */
export type WebhookVerificationReason =
  /** `x-service-timestamp` or `x-service-signature` is absent or empty. */
  | 'missing_header'
  /** `x-service-timestamp` is not 1 to 12 digits. */
  | 'malformed_timestamp'
  /** The timestamp is further than the tolerance from the receiver's clock (in the past or the future). */
  | 'stale_timestamp'
  /** No signature of the header matches any of the secrets: wrong secret, altered body or timestamp. */
  | 'no_matching_signature'
  /** The signature matches but the body is not a JSON object. */
  | 'malformed_body';

export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
  readonly reason: WebhookVerificationReason;

  constructor(reason: WebhookVerificationReason, message: string) {
    super(message);
    this.reason = reason;
  }
}

/** Request headers: a plain object (such as Node's `request.headers`, names in any case) or a `Headers` instance. */
export type WebhookHeaders =
  { get(name: string): string | null } | Readonly<Record<string, string | readonly string[] | undefined>>;

export interface VerifyWebhookOptions {
  headers: WebhookHeaders;
  /** The body exactly as received. */
  rawBody: string | Uint8Array;
  /** The endpoint's signing secret, or several (during a rotation, the new and the old). */
  secrets: string | readonly string[];
  /** Largest accepted distance between the timestamp and `now`, in seconds; default 300. */
  toleranceSeconds?: number;
  /** The receiver's clock: a Date or milliseconds since the epoch; default the current time. */
  now?: Date | number;
}

/** The fields every event carries (section 6); each type adds its own. */
export interface WebhookEvent {
  id: string;
  type: string;
  occurredAt: string;
  applicationId: string;
  workspaceId: string;
  externalWorkspaceId: string | null;
  sequence: number;
  callId?: string;
  externalUserId?: string;
  [field: string]: unknown;
}

const timestampPattern = /^\d{1,12}$/;
const hexSignaturePattern = /^[0-9a-fA-F]{64}$/;

function isHeadersInstance(headers: WebhookHeaders): headers is { get(name: string): string | null } {
  return typeof (headers as { get?: unknown }).get === 'function';
}

/** A header's value, whatever the case of its name; repeated values are joined with commas, as HTTP does. */
function headerValue(headers: WebhookHeaders, name: string): string | undefined {
  if (isHeadersInstance(headers)) return headers.get(name) ?? undefined;
  const values: string[] = [];
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== name || value === undefined) continue;
    if (typeof value === 'string') values.push(value);
    else values.push(...value);
  }
  return values.length === 0 ? undefined : values.join(',');
}

function secretList(secrets: string | readonly string[]): string[] {
  const list = typeof secrets === 'string' ? [secrets] : [...secrets];
  if (list.length === 0) throw new TypeError('verifyWebhook needs at least one signing secret');
  for (const secret of list) {
    if (typeof secret !== 'string' || secret === '') {
      throw new TypeError('verifyWebhook: every signing secret must be a non-empty string');
    }
  }
  return list;
}

function bodyBytes(rawBody: string | Uint8Array): Uint8Array {
  if (typeof rawBody === 'string') return Buffer.from(rawBody, 'utf8');
  if (rawBody instanceof Uint8Array) return rawBody;
  throw new TypeError(
    'verifyWebhook: rawBody must be the body as received (a string or a Buffer), not a parsed object',
  );
}

function nowSeconds(now: Date | number | undefined): number {
  const milliseconds = now === undefined ? Date.now() : now instanceof Date ? now.getTime() : now;
  if (!Number.isFinite(milliseconds)) throw new TypeError('verifyWebhook: now must be a valid Date or a number');
  return Math.floor(milliseconds / 1000);
}

/**
 * Checks a delivery and returns its event. Throws `WebhookVerificationError` (with a `reason`) when the delivery must
 * be refused (answer it with a 4xx), and `TypeError` when the call itself is wrong (no secret, a parsed body).
 */
export function verifyWebhook<E extends WebhookEvent = WebhookEvent>(options: VerifyWebhookOptions): E {
  const secrets = secretList(options.secrets);
  const tolerance = options.toleranceSeconds ?? defaultToleranceSeconds;
  if (!Number.isFinite(tolerance) || tolerance < 0) {
    throw new TypeError('verifyWebhook: toleranceSeconds must be a number of seconds, 0 or more');
  }
  const body = bodyBytes(options.rawBody);
  const now = nowSeconds(options.now);

  const timestamp = headerValue(options.headers, timestampHeader)?.trim();
  if (timestamp === undefined || timestamp === '') {
    throw new WebhookVerificationError('missing_header', `the ${timestampHeader} header is missing`);
  }
  const signatures = (headerValue(options.headers, signatureHeader) ?? '')
    .split(',')
    .map((signature) => signature.trim())
    .filter((signature) => signature !== '');
  if (signatures.length === 0) {
    throw new WebhookVerificationError('missing_header', `the ${signatureHeader} header is missing`);
  }
  if (!timestampPattern.test(timestamp)) {
    throw new WebhookVerificationError('malformed_timestamp', `${timestampHeader} must be 1 to 12 digits`);
  }
  if (Math.abs(now - Number(timestamp)) > tolerance) {
    throw new WebhookVerificationError(
      'stale_timestamp',
      `${timestampHeader} is more than ${tolerance} seconds from the receiver's clock`,
    );
  }

  const given = signatures
    .filter((signature) => hexSignaturePattern.test(signature))
    .map((signature) => Buffer.from(signature, 'hex'));
  let matched = false;
  for (const secret of secrets) {
    const expected = createHmac('sha256', Buffer.from(secret, 'utf8'))
      .update(`${timestamp}.`, 'utf8')
      .update(body)
      .digest();
    for (const candidate of given) {
      // Every pair is compared, in constant time, whatever matched before.
      if (candidate.length === expected.length && timingSafeEqual(candidate, expected)) matched = true;
    }
  }
  if (!matched) {
    throw new WebhookVerificationError('no_matching_signature', `no ${signatureHeader} value matches a signing secret`);
  }

  let event: unknown;
  try {
    event = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
  } catch {
    throw new WebhookVerificationError('malformed_body', 'the body is not JSON');
  }
  if (typeof event !== 'object' || event === null || Array.isArray(event)) {
    throw new WebhookVerificationError('malformed_body', 'the body is not a JSON object');
  }
  return event as E;
}
