/**
 * Delivery signatures (section 6): hex HMAC-SHA256 of `<timestamp>.<rawBody>`, keyed by the whole secret string as
 * UTF-8 (prefix included); one per live secret, comma-separated during a rotation's overlap.
 */
import { createHmac } from 'node:crypto';

export function sign(secret: string, timestamp: string, rawBody: string): string {
  return createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${timestamp}.${rawBody}`, 'utf8').digest('hex');
}

export function signatureHeader(secrets: readonly string[], timestamp: string, rawBody: string): string {
  return secrets.map((secret) => sign(secret, timestamp, rawBody)).join(',');
}
