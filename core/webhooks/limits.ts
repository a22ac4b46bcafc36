/** Webhook endpoints an application may have (spec section 8): the API and the operator both hold to it. */
import type { Queryable } from '../database.ts';

export const maxEndpointsPerApplication = 20;

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
  const application = await db.query('SELECT 1 FROM applications WHERE id = $1 FOR NO KEY UPDATE', [applicationId]);
  if (application.rowCount === 0) return 'no_application';
  const counted = await db.query<{ count: string }>(
    'SELECT count(*) FROM webhook_endpoints WHERE application_id = $1',
    [applicationId],
  );
  return Number(counted.rows[0]?.count) < maxEndpointsPerApplication ? 'room' : 'full';
}
