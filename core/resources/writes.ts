/**
 * The `resource_writes` table: the API's writes of custom resources in a cluster (docs/kubernetes.md, "The API's
 * writes"). A request records, in its own transaction, the resource as it must become (`recordWrite`: a whole spec
 * with its labels and the status to write after it, or a delete); once that transaction committed, the write is
 * carried to the Kubernetes API with no database connection held (api/resource-writes.ts), and the row keeps the
 * uid and generation the apply answered (`writeDone`), or the error and when to try again (`writeFailed`). A
 * reconcile asks `writeAhead` under its record's lock: a write still pending, or a resource read before the
 * generation the API applied, is not one to converge the records to.
 */
import type { Queryable } from '../database.ts';
import type { ConditionInput } from './conditions.ts';
import type { ResourceKind } from './store.ts';

export interface ResourceKey {
  kind: ResourceKind;
  namespace: string;
  name: string;
}

/** The status the API writes once the resource is applied: its fields, and conditions for the applied generation. */
export interface StatusIntent {
  fields: Record<string, unknown>;
  conditions: ConditionInput[];
}

export type WriteIntent =
  | { operation: 'apply'; spec: Record<string, unknown>; labels: Record<string, string>; status?: StatusIntent }
  | { operation: 'delete' };

export interface PendingWrite extends ResourceKey {
  intent: WriteIntent;
  /** This write's id: a later write of the resource replaces it, and `writeDone` then changes nothing. */
  writeId: string;
  attempts: number;
}

/** Records `intent` as the resource's pending write, replacing one still pending (the newest wins). */
export async function recordWrite(db: Queryable, key: ResourceKey, intent: WriteIntent): Promise<void> {
  await db.query(
    `INSERT INTO resource_writes (kind, namespace, name, operation, spec, labels, status, pending)
     VALUES ($1, $2, $3, $4, $5, $6, $7, true)
     ON CONFLICT (kind, namespace, name) DO UPDATE
       SET operation = excluded.operation, spec = excluded.spec, labels = excluded.labels, status = excluded.status,
           pending = true, write_id = gen_random_uuid(), written_at = clock_timestamp(), attempts = 0, next_attempt_at = clock_timestamp(),
           last_error = NULL`,
    [
      key.kind,
      key.namespace,
      key.name,
      intent.operation,
      intent.operation === 'apply' ? JSON.stringify(intent.spec) : null,
      JSON.stringify(intent.operation === 'apply' ? intent.labels : {}),
      intent.operation === 'apply' && intent.status !== undefined ? JSON.stringify(intent.status) : null,
    ],
  );
}

interface WriteRow {
  kind: ResourceKind;
  namespace: string;
  name: string;
  operation: 'apply' | 'delete';
  spec: Record<string, unknown> | null;
  labels: Record<string, string>;
  status: StatusIntent | null;
  write_id: string;
  attempts: number;
}

function pendingOf(row: WriteRow): PendingWrite {
  return {
    kind: row.kind,
    namespace: row.namespace,
    name: row.name,
    writeId: row.write_id,
    attempts: row.attempts,
    intent:
      row.operation === 'delete'
        ? { operation: 'delete' }
        : {
            operation: 'apply',
            spec: row.spec ?? {},
            labels: row.labels,
            ...(row.status === null ? {} : { status: row.status }),
          },
  };
}

const writeColumns = 'kind, namespace, name, operation, spec, labels, status, write_id, attempts';

/** The pending writes of `keys` (those a request just recorded). */
export async function pendingWritesOf(db: Queryable, keys: readonly ResourceKey[]): Promise<PendingWrite[]> {
  if (keys.length === 0) return [];
  const result = await db.query<WriteRow>(
    `SELECT ${writeColumns} FROM resource_writes
      WHERE pending AND (kind, namespace, name) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))`,
    [keys.map((key) => key.kind), keys.map((key) => key.namespace), keys.map((key) => key.name)],
  );
  return result.rows.map(pendingOf);
}

/** Up to `limit` pending writes whose next attempt is due (a request's process died, or the Kubernetes API failed). */
export async function dueWrites(db: Queryable, limit: number): Promise<PendingWrite[]> {
  const result = await db.query<WriteRow>(
    `SELECT ${writeColumns} FROM resource_writes
      WHERE pending AND next_attempt_at <= clock_timestamp() ORDER BY next_attempt_at LIMIT $1`,
    [limit],
  );
  return result.rows.map(pendingOf);
}

/**
 * The write `write` is carried out (unless a later one replaced it): the resource's uid and generation as the apply answered them (a
 * delete keeps those of the resource it deleted).
 */
export async function writeDone(
  db: Queryable,
  write: PendingWrite,
  applied: { uid: string; generation: number } | undefined,
): Promise<void> {
  await db.query(
    `UPDATE resource_writes SET pending = false, uid = coalesce($5, uid), generation = coalesce($6, generation),
            attempts = 0, last_error = NULL
      WHERE kind = $1 AND namespace = $2 AND name = $3 AND write_id = $4 AND pending`,
    [write.kind, write.namespace, write.name, write.writeId, applied?.uid ?? null, applied?.generation ?? null],
  );
}

/** The write `write` failed: its error, and its next attempt after `retryMs`. */
export async function writeFailed(db: Queryable, write: PendingWrite, error: string, retryMs: number): Promise<void> {
  await db.query(
    `UPDATE resource_writes
        SET attempts = attempts + 1, last_error = $5,
            next_attempt_at = clock_timestamp() + $6 * interval '1 millisecond'
      WHERE kind = $1 AND namespace = $2 AND name = $3 AND write_id = $4 AND pending`,
    [write.kind, write.namespace, write.name, write.writeId, error.slice(0, 1000), retryMs],
  );
}

/**
 * Whether a reconcile of the resource `key` as read (its uid and generation) must leave the records alone: the API
 * has a write of it still pending (the records are ahead of the resource), or it applied a later generation of it.
 */
export async function writeAhead(
  db: Queryable,
  key: ResourceKey,
  read: { uid: string; generation: number },
): Promise<boolean> {
  const result = await db.query<{ ahead: boolean }>(
    `SELECT pending OR (uid = $4 AND generation > $5) OR (operation = 'delete' AND uid = $4) AS ahead
       FROM resource_writes WHERE kind = $1 AND namespace = $2 AND name = $3`,
    [key.kind, key.namespace, key.name, read.uid, read.generation],
  );
  return result.rows[0]?.ahead === true;
}

/** Pending writes, and the oldest one's age in seconds (the API's gauge). */
export async function pendingWriteCounts(db: Queryable): Promise<{ pending: number; oldestSeconds: number }> {
  const result = await db.query<{ pending: number; oldest: number | null }>(
    `SELECT count(*)::int AS pending, extract(epoch FROM clock_timestamp() - min(written_at))::float8 AS oldest
       FROM resource_writes WHERE pending`,
  );
  return { pending: result.rows[0]?.pending ?? 0, oldestSeconds: result.rows[0]?.oldest ?? 0 };
}
