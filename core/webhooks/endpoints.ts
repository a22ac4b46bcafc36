/**
 * The `webhook_endpoints` table: where an application's events are delivered (operations 73-79, docs/events.md),
 * written by the REST API and by the `WebhookEndpoint` reconciler, with the limit both hold to (spec section 8).
 * Signing secrets arrive here sealed (core/sealing.ts).
 */
import type { Queryable } from '../database.ts';
import { lockApplication } from '../identity/applications.ts';
import { keysetPage, type PageWindow } from '../rows.ts';

/** Webhook endpoints an application may have (spec section 8): the API and the operator both hold to it. */
export const maxEndpointsPerApplication = 20;

export interface EndpointRow {
  id: string;
  url: string;
  description: string | null;
  event_types: string[] | null;
  enabled: boolean;
  created_at: Date;
  updated_at: Date;
  cursor_ts: string;
}

/** An endpoint with its delivery state. */
export interface DetailRow extends EndpointRow {
  pending_count: string;
  parked_count: string;
  last_error: string | null;
  last_error_at: Date | null;
  last_error_stream: string | null;
  previous_expires_at: Date | null;
}

const columns = 'id, url, description, event_types, enabled, created_at, updated_at, created_at::text AS cursor_ts';

/**
 * Whether the application may have one more endpoint. Locks the application's row until commit, so that two
 * creations at once cannot both pass the count; NO KEY UPDATE leaves other writers' foreign-key checks (events,
 * workspaces) unblocked.
 */
export async function roomForEndpoint(
  db: Queryable,
  applicationId: string,
): Promise<'room' | 'full' | 'no_application'> {
  // Two statements: the count must read after the lock is granted (a count in the locking statement would keep
  // that statement's snapshot, from before a concurrent creation committed).
  if (!(await lockApplication(db, applicationId))) return 'no_application';
  const counted = await db.query<{ count: string }>(
    'SELECT count(*) FROM webhook_endpoints WHERE application_id = $1',
    [applicationId],
  );
  return Number(counted.rows[0]?.count) < maxEndpointsPerApplication ? 'room' : 'full';
}

export interface EndpointFields {
  url: string;
  eventTypes: string[] | null;
  enabled: boolean;
  description: string | null;
  /** Sealed. */
  secret: string;
}

export async function createEndpoint(
  db: Queryable,
  applicationId: string,
  fields: EndpointFields,
): Promise<EndpointRow> {
  const result = await db.query<EndpointRow>(
    `INSERT INTO webhook_endpoints (application_id, url, event_types, enabled, description, secret)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${columns}`,
    [applicationId, fields.url, fields.eventTypes, fields.enabled, fields.description, fields.secret],
  );
  return result.rows[0] as EndpointRow;
}

export function listEndpoints(db: Queryable, applicationId: string, window: PageWindow): Promise<EndpointRow[]> {
  return keysetPage<EndpointRow>(
    db,
    { select: `SELECT ${columns} FROM webhook_endpoints`, where: 'application_id = $1', params: [applicationId] },
    window,
  );
}

/** The application's endpoint with its delivery state (queued, parked, the last error, a secret in its overlap). */
export async function endpointDetail(
  db: Queryable,
  applicationId: string,
  id: unknown,
): Promise<DetailRow | undefined> {
  const result = await db.query<DetailRow>({
    name: 'switchboard-get-webhook',
    text: `SELECT e.id, e.url, e.description, e.event_types, e.enabled, e.created_at, e.updated_at,
                      e.created_at::text AS cursor_ts,
                      (SELECT count(*) FROM webhook_deliveries d WHERE d.endpoint_id = e.id) AS pending_count,
                      (SELECT count(*) FROM webhook_lanes l
                        WHERE l.endpoint_id = e.id AND l.parked_at IS NOT NULL) AS parked_count,
                      failed.last_error, failed.last_attempt_at AS last_error_at,
                      failed.stream_key AS last_error_stream,
                      CASE WHEN e.previous_secret IS NOT NULL AND e.previous_secret_expires_at > now()
                           THEN e.previous_secret_expires_at END AS previous_expires_at
                 FROM webhook_endpoints e
                 LEFT JOIN LATERAL (
                   SELECT l.last_error, l.last_attempt_at, l.stream_key FROM webhook_lanes l
                    WHERE l.endpoint_id = e.id AND l.last_error IS NOT NULL
                    ORDER BY l.last_attempt_at DESC NULLS LAST LIMIT 1) failed ON true
                WHERE e.id = $1 AND e.application_id = $2`,
    values: [id, applicationId],
  });
  return result.rows[0];
}

/**
 * Changes the fields given: `url` and `enabled` when not null; `eventTypes` and `description` when their key is in
 * `changes` (null clears them).
 */
export async function updateEndpoint(
  db: Queryable,
  applicationId: string,
  id: unknown,
  changes: { url: string | null; enabled: boolean | null; eventTypes?: string[] | null; description?: string | null },
): Promise<EndpointRow | undefined> {
  const result = await db.query<EndpointRow>(
    `UPDATE webhook_endpoints SET
           url = coalesce($3, url),
           event_types = CASE WHEN $4 THEN $5::text[] ELSE event_types END,
           enabled = coalesce($6, enabled),
           description = CASE WHEN $7 THEN $8 ELSE description END,
           updated_at = clock_timestamp()
         WHERE id = $1 AND application_id = $2 RETURNING ${columns}`,
    [
      id,
      applicationId,
      changes.url,
      'eventTypes' in changes,
      changes.eventTypes ?? null,
      changes.enabled,
      'description' in changes,
      changes.description ?? null,
    ],
  );
  return result.rows[0];
}

/** Deletes the application's endpoint; its queued deliveries and lanes go with it (ON DELETE CASCADE). */
export async function deleteEndpoint(
  db: Queryable,
  applicationId: string,
  id: unknown,
): Promise<EndpointRow | undefined> {
  const result = await db.query<EndpointRow>(
    `DELETE FROM webhook_endpoints WHERE id = $1 AND application_id = $2 RETURNING ${columns}`,
    [id, applicationId],
  );
  return result.rows[0];
}

/** The endpoint's id and types when it belongs to the application, row-locked against a concurrent change. */
export async function lockOwnEndpoint(
  db: Queryable,
  id: string,
  applicationId: string,
): Promise<{ id: string; event_types: string[] | null } | undefined> {
  const result = await db.query<{ id: string; event_types: string[] | null }>(
    'SELECT id, event_types FROM webhook_endpoints WHERE id = $1 AND application_id = $2 FOR NO KEY UPDATE',
    [id, applicationId],
  );
  return result.rows[0];
}

/**
 * A new sealed signing secret: the current one becomes the previous one for `overlapSeconds` (0: ends at once; an
 * older previous secret, still in its overlap, ends now). Undefined when the application has no such endpoint.
 */
export async function rotateSecret(
  db: Queryable,
  applicationId: string,
  id: unknown,
  overlapSeconds: number,
  secret: string,
): Promise<{ previous_secret_expires_at: Date | null } | undefined> {
  const result = await db.query<{ previous_secret_expires_at: Date | null }>(
    `UPDATE webhook_endpoints SET
           previous_secret = CASE WHEN $3::integer = 0 THEN NULL ELSE secret END,
           previous_secret_expires_at = CASE WHEN $3::integer = 0 THEN NULL
                                             ELSE clock_timestamp() + make_interval(secs => $3::integer) END,
           secret = $4,
           updated_at = clock_timestamp()
         WHERE id = $1 AND application_id = $2 RETURNING previous_secret_expires_at`,
    [id, applicationId, overlapSeconds, secret],
  );
  return result.rows[0];
}

/** Locks the endpoint's row, if any, until commit and says whose it is (the reconciler's converge). */
export async function lockEndpointOwner(db: Queryable, id: string): Promise<string | undefined> {
  const existing = await db.query<{ application_id: string }>(
    'SELECT application_id FROM webhook_endpoints WHERE id = $1 FOR UPDATE',
    [id],
  );
  return existing.rows[0]?.application_id;
}

/**
 * Records the endpoint as its resource has it. The sealed secret is kept for a new record; it replaces the stored
 * one only when `replaceSecret` (a secret from a Secret, a rotation done there).
 */
export async function recordEndpoint(
  db: Queryable,
  id: string,
  applicationId: string,
  fields: EndpointFields,
  replaceSecret: boolean,
): Promise<void> {
  await db.query(
    `INSERT INTO webhook_endpoints (id, application_id, url, event_types, enabled, description, secret)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (id) DO UPDATE SET url = excluded.url, event_types = excluded.event_types,
              enabled = excluded.enabled, description = excluded.description, updated_at = clock_timestamp(),
              secret = CASE WHEN $8 THEN excluded.secret ELSE webhook_endpoints.secret END
        WHERE (webhook_endpoints.url, webhook_endpoints.event_types, webhook_endpoints.enabled,
               webhook_endpoints.description) IS DISTINCT FROM
              (excluded.url, excluded.event_types, excluded.enabled, excluded.description) OR $8`,
    [
      id,
      applicationId,
      fields.url,
      fields.eventTypes,
      fields.enabled,
      fields.description,
      fields.secret,
      replaceSecret,
    ],
  );
}

/** Deletes the application's endpoint, if it has it (a deleted resource; deliveries and lanes cascade). */
export async function deleteEndpointRecord(db: Queryable, id: string, applicationId: string): Promise<void> {
  await db.query('DELETE FROM webhook_endpoints WHERE id = $1 AND application_id = $2', [id, applicationId]);
}
