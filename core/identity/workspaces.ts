/**
 * The `workspaces` table: each business an application serves (operations 6-9), looked up by the API's
 * authentication (by id, or by the application's own id for it), by the reconcilers (a resource's workspace must be
 * its application's) and by routing plans' checks (the destination policy).
 */
import type { Queryable } from '../database.ts';
import { keysetPage, type PageWindow } from '../rows.ts';

export interface DestinationPolicy {
  allowedPrefixes: string[];
  blockedPrefixes: string[];
}

export interface WorkspaceLimits {
  concurrentCalls: number;
  devicesPerUser: number;
}

/**
 * Texting settings (docs/messaging.md, "Receiving"): the help text an inbound HELP is answered with; absent or null
 * is the default text (core/messages/keywords.ts).
 */
export interface WorkspaceTexting {
  helpText?: string | null;
}

export interface WorkspaceRow {
  id: string;
  external_workspace_id: string;
  name: string;
  timezone: string;
  destination_policy: DestinationPolicy;
  limits: WorkspaceLimits;
  texting: WorkspaceTexting;
  created_at: Date;
  updated_at: Date;
  cursor_ts: string;
}

const columns =
  'id, external_workspace_id, name, timezone, destination_policy, limits, texting, created_at, updated_at, created_at::text AS cursor_ts';

/** A new workspace; undefined when the application has one with this external id already. */
export async function createWorkspace(
  db: Queryable,
  applicationId: string,
  fields: {
    externalWorkspaceId: string;
    name: string;
    timezone: string;
    destinationPolicy: DestinationPolicy;
    limits: WorkspaceLimits;
    texting?: WorkspaceTexting;
  },
): Promise<WorkspaceRow | undefined> {
  const result = await db.query<WorkspaceRow>(
    `INSERT INTO workspaces (application_id, external_workspace_id, name, timezone, destination_policy, limits,
                             texting)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (application_id, external_workspace_id) DO NOTHING RETURNING ${columns}`,
    [
      applicationId,
      fields.externalWorkspaceId,
      fields.name,
      fields.timezone,
      fields.destinationPolicy,
      fields.limits,
      fields.texting ?? {},
    ],
  );
  return result.rows[0];
}

export function listWorkspaces(db: Queryable, applicationId: string, window: PageWindow): Promise<WorkspaceRow[]> {
  return keysetPage<WorkspaceRow>(
    db,
    { select: `SELECT ${columns} FROM workspaces`, where: 'application_id = $1', params: [applicationId] },
    window,
  );
}

export async function workspaceRecord(db: Queryable, id: string | undefined): Promise<WorkspaceRow | undefined> {
  const result = await db.query<WorkspaceRow>({
    name: 'switchboard-get-workspace',
    text: `SELECT ${columns} FROM workspaces WHERE id = $1`,
    values: [id],
  });
  return result.rows[0];
}

/**
 * Changes the name and time zone given (null: kept) and merges the policy, limits and texting settings given into
 * the stored ones.
 */
export async function updateWorkspace(
  db: Queryable,
  id: string | undefined,
  changes: {
    name: string | null;
    timezone: string | null;
    destinationPolicy: Partial<DestinationPolicy>;
    limits: Partial<WorkspaceLimits>;
    texting?: WorkspaceTexting;
  },
): Promise<WorkspaceRow | undefined> {
  const result = await db.query<WorkspaceRow>(
    `UPDATE workspaces SET
           name = coalesce($2, name),
           timezone = coalesce($3, timezone),
           destination_policy = destination_policy || $4::jsonb,
           limits = limits || $5::jsonb,
           texting = texting || $6::jsonb,
           updated_at = clock_timestamp()
         WHERE id = $1 RETURNING ${columns}`,
    [id, changes.name, changes.timezone, changes.destinationPolicy, changes.limits, changes.texting ?? {}],
  );
  return result.rows[0];
}

/** A workspace's application and external id (authentication). */
export async function workspaceIdentity(
  db: Queryable,
  id: string,
): Promise<{ id: string; application_id: string; external_workspace_id: string } | undefined> {
  const result = await db.query<{ id: string; application_id: string; external_workspace_id: string }>({
    name: 'switchboard-workspace-by-id',
    text: 'SELECT id, application_id, external_workspace_id FROM workspaces WHERE id = $1',
    values: [id],
  });
  return result.rows[0];
}

/** The id of the application's workspace with this external id (authentication). */
export async function workspaceIdByExternalId(
  db: Queryable,
  applicationId: string,
  externalId: string,
): Promise<string | undefined> {
  const result = await db.query<{ id: string }>(
    'SELECT id FROM workspaces WHERE application_id = $1 AND external_workspace_id = $2',
    [applicationId, externalId],
  );
  return result.rows[0]?.id;
}

/** Whether the workspace exists. */
export async function workspaceExists(db: Queryable, id: string): Promise<boolean> {
  const workspace = await db.query('SELECT 1 FROM workspaces WHERE id = $1', [id]);
  return workspace.rowCount !== 0;
}

/** Whether the workspace is one of the application's. */
export async function workspaceOfApplication(db: Queryable, workspaceId: string, applicationId: string) {
  const found = await db.query('SELECT 1 FROM workspaces WHERE id = $1 AND application_id = $2', [
    workspaceId,
    applicationId,
  ]);
  return found.rowCount !== 0;
}

/**
 * The application's workspace with this external id and, in it, the user (not removed) with this external id (a
 * user session); undefined without such a workspace, `userId` null without such a user.
 */
export async function workspaceAndUser(
  db: Queryable,
  applicationId: string,
  externalWorkspaceId: string,
  externalUserId: string,
): Promise<{ workspace_id: string; user_id: string | null } | undefined> {
  const found = await db.query<{ workspace_id: string; user_id: string | null }>(
    `SELECT w.id AS workspace_id, u.id AS user_id FROM workspaces w
           LEFT JOIN app_users u ON u.workspace_id = w.id AND u.external_user_id = $3 AND u.removed_at IS NULL
          WHERE w.application_id = $1 AND w.external_workspace_id = $2`,
    [applicationId, externalWorkspaceId, externalUserId],
  );
  return found.rows[0];
}

/** The workspace's destination policy (routing plans' checks). */
export async function destinationPolicyOf(db: Queryable, workspaceId: string): Promise<DestinationPolicy | undefined> {
  const workspace = await db.query<{ destination_policy: DestinationPolicy }>(
    'SELECT destination_policy FROM workspaces WHERE id = $1',
    [workspaceId],
  );
  return workspace.rows[0]?.destination_policy;
}

/** The workspace's own help text (an inbound HELP's reply), or null when it keeps the default. */
export async function helpTextOf(db: Queryable, workspaceId: string): Promise<string | null> {
  const workspace = await db.query<{ help_text: string | null }>(
    "SELECT texting ->> 'helpText' AS help_text FROM workspaces WHERE id = $1",
    [workspaceId],
  );
  return workspace.rows[0]?.help_text ?? null;
}
