/** Applications and their keys: shared by the admin commands and the API (operations 3-5, 10). */
import type { Queryable } from '../database.ts';
import type { Scope } from '../scopes.ts';
import { newCredential } from './secrets.ts';

export class ApplicationExists extends Error {}

export interface KeyRow {
  id: string;
  application_id: string;
  workspace_id: string | null;
  name: string | null;
  prefix: string;
  scopes: string[];
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

export const keyColumns =
  'id, application_id, workspace_id, name, prefix, scopes, created_at, last_used_at, revoked_at, created_at::text AS cursor_ts';

export function keyJson(row: KeyRow) {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    scopes: row.scopes,
    workspaceId: row.workspace_id,
    createdAt: row.created_at.toISOString(),
    lastUsedAt: row.last_used_at?.toISOString() ?? null,
    revokedAt: row.revoked_at?.toISOString() ?? null,
  };
}

export async function issueKey(
  db: Queryable,
  input: { applicationId: string; workspaceId?: string; name?: string | null; scopes: readonly Scope[] },
): Promise<{ row: KeyRow; secret: string }> {
  const credential = newCredential(input.workspaceId === undefined ? 'application_key' : 'workspace_key');
  const result = await db.query<KeyRow>(
    `INSERT INTO api_keys (application_id, workspace_id, name, prefix, key_hash, scopes)
     VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${keyColumns}`,
    [
      input.applicationId,
      input.workspaceId ?? null,
      input.name ?? null,
      credential.prefix,
      credential.hash,
      input.scopes,
    ],
  );
  return { row: result.rows[0] as KeyRow, secret: credential.secret };
}

export async function createApplication(
  db: Queryable,
  applicationId: string,
  scopes: readonly Scope[],
): Promise<{ applicationId: string; apiKey: string }> {
  const inserted = await db.query('INSERT INTO applications (id) VALUES ($1) ON CONFLICT (id) DO NOTHING', [
    applicationId,
  ]);
  if (inserted.rowCount === 0) throw new ApplicationExists(`application "${applicationId}" already exists`);
  const key = await issueKey(db, { applicationId, name: 'created by switchboard applications create', scopes });
  return { applicationId, apiKey: key.secret };
}

export async function applicationExists(db: Queryable, applicationId: string): Promise<boolean> {
  const found = await db.query('SELECT 1 FROM applications WHERE id = $1', [applicationId]);
  return found.rowCount === 1;
}

/** Sets (or replaces) the legacy application secret, accepted with header `x-service-application`. */
export async function resetLegacySecret(db: Queryable, applicationId: string): Promise<string> {
  const credential = newCredential('application_secret');
  await db.query('UPDATE applications SET legacy_secret_hash = $2 WHERE id = $1', [applicationId, credential.hash]);
  return credential.secret;
}
