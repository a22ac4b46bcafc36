/**
 * Sealing for secrets the service must read back (webhook signing secrets, carriers' and SIP devices' passwords, AI
 * providers' API keys, stored idempotent answers): AES-256-GCM under a key derived from the service secret for that
 * purpose alone (core/service-secret.ts). `v1.<iv>.<tag>.<ciphertext>`, base64url. Associated data, when given, binds
 * a sealed value to where it is kept: the same data must be given to open it, so a sealed value moved to another
 * record fails.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

export function sealSecret(key: Uint8Array, secret: string, associatedData?: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  if (associatedData !== undefined) cipher.setAAD(Buffer.from(associatedData, 'utf8'));
  const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return `v1.${iv.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}.${sealed.toString('base64url')}`;
}

/** The secret, or an error when the value was altered, sealed under another key or with other associated data. */
export function openSecret(key: Uint8Array, stored: string, associatedData?: string): string {
  const [version, iv, tag, sealed] = stored.split('.');
  if (version !== 'v1' || iv === undefined || tag === undefined || sealed === undefined) {
    throw new Error('a sealed value has an unknown format');
  }
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  if (associatedData !== undefined) decipher.setAAD(Buffer.from(associatedData, 'utf8'));
  return Buffer.concat([decipher.update(Buffer.from(sealed, 'base64url')), decipher.final()]).toString('utf8');
}
