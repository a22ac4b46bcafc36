/**
 * Credentials the service hands out (application keys, workspace keys, legacy application secrets) are 256-bit
 * random strings with a readable prefix. Only their SHA-256 is stored: for random secrets of this size a fast hash is
 * the right one (nothing to brute-force), and it keeps the lookup on every request a single index probe.
 */
import { createHash, randomBytes } from 'node:crypto';

export type CredentialKind = 'application_key' | 'workspace_key' | 'application_secret';

const prefixes: Record<CredentialKind, string> = {
  application_key: 'sbk_',
  workspace_key: 'sbw_',
  application_secret: 'sbs_',
};

export function newCredential(kind: CredentialKind): { secret: string; hash: Buffer; prefix: string } {
  const secret = prefixes[kind] + randomBytes(32).toString('base64url');
  return { secret, hash: hashCredential(secret), prefix: secret.slice(0, 12) };
}

export function hashCredential(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

export function credentialKindOf(secret: string): CredentialKind | undefined {
  for (const [kind, prefix] of Object.entries(prefixes) as [CredentialKind, string][]) {
    if (secret.startsWith(prefix) && secret.length === prefix.length + 43) return kind;
  }
  return undefined;
}
