/**
 * The `applications` and `api_keys` tables: applications and their keys, shared by the admin commands and the API
 * (operations 3-5, 10), and looked up by the API's authentication.
 */
import type { Queryable } from '../database.ts';
import { keysetPage, type PageWindow } from '../rows.ts';
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

/** Whether the application's legacy secret has this hash. */
export async function legacySecretMatches(db: Queryable, applicationId: string, hash: Buffer): Promise<boolean> {
  const result = await db.query('SELECT 1 FROM applications WHERE id = $1 AND legacy_secret_hash = $2', [
    applicationId,
    hash,
  ]);
  return result.rowCount === 1;
}

export function listKeys(
  db: Queryable,
  applicationId: string,
  window: PageWindow,
): Promise<(KeyRow & { cursor_ts: string })[]> {
  return keysetPage<KeyRow & { cursor_ts: string }>(
    db,
    { select: `SELECT ${keyColumns} FROM api_keys`, where: 'application_id = $1', params: [applicationId] },
    window,
  );
}

/** The scopes of the application's key `id`, if it has it. */
export async function keyScopes(db: Queryable, applicationId: string, id: unknown): Promise<string[] | undefined> {
  const target = await db.query<{ scopes: string[] }>(
    'SELECT scopes FROM api_keys WHERE id = $1 AND application_id = $2',
    [id, applicationId],
  );
  return target.rows[0]?.scopes;
}

/** Revokes the key at `at` (not before now; never later than an earlier revocation). */
export async function revokeKey(db: Queryable, applicationId: string, id: unknown, at: Date): Promise<KeyRow> {
  const result = await db.query<KeyRow>(
    `UPDATE api_keys SET revoked_at = LEAST(coalesce(revoked_at, 'infinity'), greatest($3::timestamptz, now()))
          WHERE id = $1 AND application_id = $2 RETURNING ${keyColumns}`,
    [id, applicationId, at.toISOString()],
  );
  return result.rows[0] as KeyRow;
}

/** What authentication needs of a key. */
export interface KeyRecord {
  id: string;
  application_id: string;
  workspace_id: string | null;
  scopes: string[];
  revoked_at: Date | null;
}

export async function keyByHash(db: Queryable, hash: Buffer): Promise<KeyRecord | undefined> {
  const result = await db.query<KeyRecord>({
    name: 'switchboard-key-by-hash',
    text: 'SELECT id, application_id, workspace_id, scopes, revoked_at FROM api_keys WHERE key_hash = $1',
    values: [hash],
  });
  return result.rows[0];
}

/** Records that the key was used now (`lastUsedAt`). */
export async function noteKeyUse(db: Queryable, id: string): Promise<void> {
  await db.query('UPDATE api_keys SET last_used_at = now() WHERE id = $1', [id]);
}

/**
 * Locks the application's row until commit (FOR NO KEY UPDATE: other writers' foreign-key checks stay unblocked);
 * false when there is no such application.
 */
export async function lockApplication(db: Queryable, applicationId: string): Promise<boolean> {
  const application = await db.query('SELECT 1 FROM applications WHERE id = $1 FOR NO KEY UPDATE', [applicationId]);
  return application.rowCount !== 0;
}
