/**
 * The service's own signing material. One master secret (SWITCHBOARD_SECRET, or generated once and kept in the
 * database so every process and every restart shares it) and keys derived from it per purpose with HKDF, so a
 * cursor key can never verify a token.
 */
import { hkdfSync, randomBytes } from 'node:crypto';
import type { Queryable } from './database.ts';
import { storedSecret } from './identity/service-secrets.ts';

export interface SigningKeys {
  tokens: Uint8Array;
  cursors: Uint8Array;
  /** Encrypts webhook signing secrets at rest. */
  webhookSecrets: Uint8Array;
  /** Encrypts the API keys of AI agents' providers at rest. */
  providerSecrets: Uint8Array;
  /** Encrypts carriers' SIP passwords at rest. */
  carrierSecrets: Uint8Array;
  /** Encrypts SIP devices' registration passwords at rest (the registrar reads them back to check a digest). */
  sipPasswords: Uint8Array;
  /** Encrypts the stored answers of mutations (idempotency records) at rest. */
  idempotentAnswers: Uint8Array;
  /** Keys the HMAC of one-time codes (verifications.code_hash). */
  verificationHashes: Uint8Array;
  /** Seals a voice verification's code until an engine takes its call. */
  verificationCodes: Uint8Array;
}

async function masterSecret(db: Queryable, configured: string | undefined): Promise<string> {
  if (configured !== undefined) return configured;
  return storedSecret(db, 'master', randomBytes(32).toString('base64url'));
}

function derive(secret: string, purpose: string): Uint8Array {
  return new Uint8Array(hkdfSync('sha256', secret, 'switchboard', purpose, 32));
}

export async function loadSigningKeys(db: Queryable, configured: string | undefined): Promise<SigningKeys> {
  const secret = await masterSecret(db, configured);
  return {
    tokens: derive(secret, 'end-user tokens'),
    cursors: derive(secret, 'list cursors'),
    webhookSecrets: derive(secret, 'webhook signing secrets'),
    providerSecrets: derive(secret, 'AI provider API keys'),
    carrierSecrets: derive(secret, 'carrier SIP passwords'),
    sipPasswords: derive(secret, 'SIP device passwords'),
    idempotentAnswers: derive(secret, 'idempotent answers'),
    verificationHashes: derive(secret, 'verification code hashes'),
    verificationCodes: derive(secret, 'verification codes'),
  };
}
