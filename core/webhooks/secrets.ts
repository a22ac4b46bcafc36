/**
 * Webhook signing secrets: `whsec_` + 32 random bytes, shown once (create, rotate). The dispatcher needs them in the
 * clear to sign, so they are stored sealed (core/sealing.ts) under the webhook secrets key.
 */
import { randomBytes } from 'node:crypto';

export function newSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}
