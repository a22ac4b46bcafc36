/**
 * Idempotency (sections 7 and 8). Every mutation carries `idempotency-key` (1-255 visible ASCII). Keys are scoped
 * to the credential's application. The first request with a key runs inside one transaction that also stores its
 * answer, under a transaction-scoped advisory lock on (scope, key):
 * - a retry while it runs cannot take the lock: 409 `idempotency_in_progress`;
 * - a retry after it committed replays the stored answer with `idempotent-replayed: true` (a lost answer is safe);
 * - a different body with the same key within 24 hours: 422 `idempotency_key_reused`;
 * - a 5xx (or a crash) rolls the whole transaction back and stores nothing, so a retry runs again and the change
 *   happens at most once. 2xx and 4xx answers are stored; a 4xx's partial writes roll back to a savepoint first.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { Queryable } from '../core/database.ts';
import { ApiError } from '../core/errors.ts';

export const idempotencyRetentionHours = 24;
const keyPattern = /^[\x21-\x7e]{1,255}$/;

export function checkIdempotencyKey(value: string | string[] | undefined): string {
  if (value === undefined) {
    throw new ApiError('idempotency_key_required', 'this request changes something: send an idempotency-key header');
  }
  if (Array.isArray(value) || !keyPattern.test(value)) {
    throw new ApiError('invalid_request', 'header idempotency-key must be 1 to 255 visible ASCII characters');
  }
  return value;
}

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, canonical((value as Record<string, unknown>)[key])]),
    );
  }
  return value;
}

/** What makes two requests "the same request": credential, method, URL, workspace headers and body (key order aside). */
export function fingerprint(parts: {
  credential: string;
  method: string;
  url: string;
  workspaceHeaders: (string | undefined)[];
  body: unknown;
}): Buffer {
  return createHash('sha256')
    .update(
      JSON.stringify([
        parts.credential,
        parts.method,
        parts.url,
        parts.workspaceHeaders,
        canonical(parts.body ?? null),
      ]),
    )
    .digest();
}

export interface Answer {
  status: number;
  body: unknown;
}

export interface StoredAnswer {
  status: number;
  body: string;
  replayed: boolean;
}

export async function runIdempotent(
  pool: pg.Pool,
  scope: string,
  key: string,
  print: Buffer,
  work: (db: Queryable, afterCommit: (effect: () => void) => void) => Promise<Answer>,
): Promise<StoredAnswer> {
  const effects: (() => void)[] = [];
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const lock = await client.query<{ ok: boolean }>(
      'SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS ok',
      [`idempotency\n${scope}\n${key}`],
    );
    if (lock.rows[0]?.ok !== true) {
      throw new ApiError(
        'idempotency_in_progress',
        'a request with this idempotency-key is still running; retry later',
        {
          headers: { 'retry-after': '1' },
        },
      );
    }
    const existing = await client.query<{
      fingerprint: Buffer;
      status_code: number;
      response_body: string;
      live: boolean;
    }>(
      `SELECT fingerprint, status_code, response_body,
              created_at > now() - make_interval(hours => $3) AS live
         FROM idempotency_records WHERE scope = $1 AND key = $2`,
      [scope, key, idempotencyRetentionHours],
    );
    const record = existing.rows[0];
    if (record?.live) {
      await client.query('ROLLBACK');
      if (!record.fingerprint.equals(print)) {
        throw new ApiError(
          'idempotency_key_reused',
          'this idempotency-key was used for a different request in the last 24 hours',
        );
      }
      return { status: record.status_code, body: record.response_body, replayed: true };
    }
    if (record !== undefined)
      await client.query('DELETE FROM idempotency_records WHERE scope = $1 AND key = $2', [scope, key]);

    await client.query('SAVEPOINT work');
    let answer: { status: number; body: string };
    try {
      const result = await work(client, (effect) => effects.push(effect));
      answer = { status: result.status, body: JSON.stringify(result.body) };
    } catch (error) {
      if (!(error instanceof ApiError) || error.status >= 500) throw error;
      await client.query('ROLLBACK TO SAVEPOINT work');
      effects.length = 0;
      answer = { status: error.status, body: JSON.stringify(error.body()) };
    }
    await client.query(
      'INSERT INTO idempotency_records (scope, key, fingerprint, status_code, response_body) VALUES ($1, $2, $3, $4, $5)',
      [scope, key, print, answer.status, answer.body],
    );
    await client.query('COMMIT');
    for (const effect of effects) effect();
    return { ...answer, replayed: false };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

/** Deletes records past their retention, a batch at a time. */
export async function purgeIdempotencyRecords(db: Queryable): Promise<number> {
  const result = await db.query(
    `DELETE FROM idempotency_records WHERE ctid IN (
       SELECT ctid FROM idempotency_records WHERE created_at < now() - make_interval(hours => $1) LIMIT 5000)`,
    [idempotencyRetentionHours],
  );
  return result.rowCount ?? 0;
}
