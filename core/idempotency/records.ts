/**
 * The `idempotency_records` table: the stored answers of mutations (sections 7 and 8; the rules are in
 * api/idempotency.ts), each under its scope and key, sealed (core/sealing.ts), kept 24 hours; and
 * `idempotency_counts`, what each scope stored by the hour, against which its limits are checked. The statements run
 * on the connection (and in the transaction) the caller holds.
 */
import type { Queryable } from '../database.ts';

const idempotencyRetentionHours = 24;

export interface StoredRecord {
  fingerprint: Buffer;
  status_code: number;
  response_body: string;
  sealed: boolean;
  live: boolean;
  /** A provisional answer whose request may still finish it. */
  pending: boolean;
  /** A provisional answer (pending or past its time). */
  provisional: boolean;
}

const recordColumns = (alias: string, prefix: string) =>
  `${alias}.scope IS NOT NULL AS ${prefix}found, ${alias}.fingerprint AS ${prefix}fingerprint,
   ${alias}.status_code AS ${prefix}status_code, ${alias}.response_body AS ${prefix}response_body,
   ${alias}.sealed AS ${prefix}sealed, ${alias}.created_at > now() - make_interval(hours => $4) AS ${prefix}live,
   coalesce(${alias}.pending_until > clock_timestamp(), false) AS ${prefix}pending,
   ${alias}.pending_until IS NOT NULL AS ${prefix}provisional`;

function recordFrom(row: Record<string, unknown>, prefix: string): StoredRecord | undefined {
  if (row[`${prefix}found`] !== true) return undefined;
  return {
    fingerprint: row[`${prefix}fingerprint`] as Buffer,
    status_code: row[`${prefix}status_code`] as number,
    response_body: row[`${prefix}response_body`] as string,
    sealed: row[`${prefix}sealed`] as boolean,
    live: row[`${prefix}live`] as boolean,
    pending: row[`${prefix}pending`] as boolean,
    provisional: row[`${prefix}provisional`] as boolean,
  };
}

/**
 * What a scope has stored in the last 24 hours, as counted so far (by the hour: the oldest, partly expired hour is left
 * out; each API process adds its answers about once a second).
 */
export interface ScopeUsage {
  answers: number;
  bytes: number;
}

export interface LockedRecord {
  locked: boolean;
  /** What the scope has stored (idempotency_counts). */
  stored: ScopeUsage;
  /** The record of (scope, key), when the lock was taken. */
  record: StoredRecord | undefined;
  /** The record of (earlierScope, key) when asked for and the lock was taken: where an older version kept it. */
  earlier: StoredRecord | undefined;
}

/**
 * Takes the transaction-scoped advisory lock on (scope, key), false while another transaction holds it, and reads the
 * record of (scope, key), live while within its retention, in one statement; with `earlierScope`, the record of
 * (earlierScope, key) too (read only: its lock is not taken). The records are read as of the statement's start: one
 * that a transaction holding the lock committed just then is not seen, and this transaction's `insertRecord` finds
 * it (`RecordExistsError`).
 */
export async function lockAndReadRecord(
  db: Queryable,
  scope: string,
  key: string,
  earlierScope?: string,
): Promise<LockedRecord> {
  const result = await db.query<Record<string, unknown>>({
    name: 'sb-idempotency-lock-read',
    text: `SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS locked, ${recordColumns('r', '')},
                  ${recordColumns('e', 'earlier_')}, c.answers AS stored_answers, c.bytes AS stored_bytes
             FROM (VALUES (1)) AS one
             CROSS JOIN (SELECT coalesce(sum(answers), 0)::float8 AS answers, coalesce(sum(bytes), 0)::float8 AS bytes
                           FROM idempotency_counts WHERE scope = $2 AND hour > now() - make_interval(hours => $4)) AS c
             LEFT JOIN idempotency_records r ON r.scope = $2 AND r.key = $3
             LEFT JOIN idempotency_records e ON e.scope = $5::text AND e.key = $3 AND $5::text <> $2`,
    values: [`idempotency\n${scope}\n${key}`, scope, key, idempotencyRetentionHours, earlierScope ?? null],
  });
  const row = result.rows[0] as Record<string, unknown>;
  const locked = row.locked as boolean;
  return {
    locked,
    stored: { answers: row.stored_answers as number, bytes: row.stored_bytes as number },
    record: locked ? recordFrom(row, '') : undefined,
    earlier: locked ? recordFrom(row, 'earlier_') : undefined,
  };
}

/** Whether (scope, key) has a record within its retention: a request with the key ran, or runs now. */
export async function keyUsed(db: Queryable, scope: string, key: string): Promise<boolean> {
  const found = await db.query({
    name: 'sb-idempotency-key-used',
    text: `SELECT 1 FROM idempotency_records
            WHERE scope = $1 AND key = $2 AND created_at > now() - make_interval(hours => $3)`,
    values: [scope, key, idempotencyRetentionHours],
  });
  return found.rowCount === 1;
}

/** The record an `insertRecord` would write exists: another request with the key committed its answer just now. */
export class RecordExistsError extends Error {
  constructor() {
    super('the idempotency record exists already');
  }
}

/** Makes the stored answer final, as `sealedBody` (a provisional answer past its time, or one in clear text). */
export async function settleRecord(db: Queryable, scope: string, key: string, sealedBody: string): Promise<void> {
  await db.query(
    `UPDATE idempotency_records SET response_body = $3, sealed = true, pending_until = NULL
            WHERE scope = $1 AND key = $2`,
    [scope, key, sealedBody],
  );
}

export async function deleteRecord(db: Queryable, scope: string, key: string): Promise<void> {
  await db.query('DELETE FROM idempotency_records WHERE scope = $1 AND key = $2', [scope, key]);
}

/** Stores a sealed answer; pending for `pendingSecs` when the answer is provisional (null: final). */
export async function insertRecord(
  db: Queryable,
  record: { scope: string; key: string; fingerprint: Buffer; status: number; sealedBody: string },
  pendingSecs: number | null,
): Promise<void> {
  try {
    await db.query({
      name: 'sb-idempotency-insert',
      text: `INSERT INTO idempotency_records (scope, key, fingerprint, status_code, response_body, sealed, pending_until)
               VALUES ($1, $2, $3, $4, $5, true, clock_timestamp() + make_interval(secs => $6::double precision))`,
      values: [record.scope, record.key, record.fingerprint, record.status, record.sealedBody, pendingSecs],
    });
  } catch (error) {
    if ((error as { code?: string }).code === '23505') throw new RecordExistsError();
    throw error;
  }
}

/** Replaces a provisional answer by the finished one; false when a retry settled the provisional one first. */
export async function finishRecord(
  db: Queryable,
  record: { scope: string; key: string; fingerprint: Buffer; status: number; sealedBody: string },
): Promise<boolean> {
  const settled = await db.query({
    name: 'sb-idempotency-finish',
    text: `UPDATE idempotency_records SET status_code = $4, response_body = $5, sealed = true, pending_until = NULL
            WHERE scope = $1 AND key = $2 AND fingerprint = $3 AND pending_until IS NOT NULL`,
    values: [record.scope, record.key, record.fingerprint, record.status, record.sealedBody],
  });
  return settled.rowCount === 1;
}

/** The record of (scope, key) for this request's fingerprint, as it stands. */
export async function recordOf(
  db: Queryable,
  scope: string,
  key: string,
  fingerprint: Buffer,
): Promise<StoredRecord | undefined> {
  const stored = await db.query<StoredRecord>(
    `SELECT fingerprint, status_code, response_body, sealed, true AS live, false AS pending, false AS provisional
       FROM idempotency_records WHERE scope = $1 AND key = $2 AND fingerprint = $3`,
    [scope, key, fingerprint],
  );
  return stored.rows[0];
}

export interface ClearRecord {
  scope: string;
  key: string;
  status_code: number;
  response_body: string;
}

/** Up to `limit` records whose answers are stored in clear text. */
export async function clearRecords(db: Queryable, limit: number): Promise<ClearRecord[]> {
  const batch = await db.query<ClearRecord>(
    'SELECT scope, key, status_code, response_body FROM idempotency_records WHERE NOT sealed LIMIT $1',
    [limit],
  );
  return batch.rows;
}

/** Stores the sealed answers of records read in clear text, each only if unchanged since; how many. */
export async function sealRecords(
  db: Queryable,
  records: readonly ClearRecord[],
  sealedBodies: readonly string[],
): Promise<number> {
  const updated = await db.query(
    `UPDATE idempotency_records r SET response_body = v.sealed, sealed = true
         FROM unnest($1::text[], $2::text[], $3::integer[], $4::text[], $5::text[]) AS v(scope, key, status, clear, sealed)
        WHERE r.scope = v.scope AND r.key = v.key AND NOT r.sealed AND r.status_code = v.status
          AND r.response_body = v.clear`,
    [
      records.map((row) => row.scope),
      records.map((row) => row.key),
      records.map((row) => row.status_code),
      records.map((row) => row.response_body),
      sealedBodies,
    ],
  );
  return updated.rowCount ?? 0;
}

export interface ScopeCount {
  scope: string;
  answers: number;
  bytes: number;
}

/**
 * Adds answers stored to their scopes' counts of the current hour, in one statement. The rows are taken in the order
 * of their scopes, so two processes adding at once wait on each other rather than deadlock.
 */
export async function addCounts(db: Queryable, counts: readonly ScopeCount[]): Promise<void> {
  if (counts.length === 0) return;
  const sorted = [...counts].sort((a, b) => (a.scope < b.scope ? -1 : a.scope > b.scope ? 1 : 0));
  await db.query(
    `INSERT INTO idempotency_counts AS c (scope, hour, answers, bytes)
     SELECT scope, date_trunc('hour', now(), 'UTC'), answers, bytes
       FROM unnest($1::text[], $2::integer[], $3::bigint[]) WITH ORDINALITY AS v(scope, answers, bytes, n)
      ORDER BY n
     ON CONFLICT (scope, hour) DO UPDATE SET answers = c.answers + excluded.answers, bytes = c.bytes + excluded.bytes`,
    [sorted.map((count) => count.scope), sorted.map((count) => count.answers), sorted.map((count) => count.bytes)],
  );
}

/** Deletes the counts of hours no record of which is live any more. */
export async function purgeExpiredCounts(db: Queryable): Promise<number> {
  const result = await db.query('DELETE FROM idempotency_counts WHERE hour < now() - make_interval(hours => $1)', [
    idempotencyRetentionHours + 1,
  ]);
  return result.rowCount ?? 0;
}

/** Deletes up to `limit` records past their retention; how many went. */
export async function purgeExpiredRecords(db: Queryable, limit: number): Promise<number> {
  const result = await db.query(
    `DELETE FROM idempotency_records WHERE ctid IN (
         SELECT ctid FROM idempotency_records WHERE created_at < now() - make_interval(hours => $1) LIMIT $2)`,
    [idempotencyRetentionHours, limit],
  );
  return result.rowCount ?? 0;
}
