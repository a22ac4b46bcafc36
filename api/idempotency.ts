/**
 * Idempotency (sections 7 and 8). Every mutation carries `idempotency-key` (1-255 visible ASCII). Keys are scoped
 * to their sender (api/idempotency-scopes.ts: the application's keys share one scope, each person's tokens have
 * theirs), and the sender is part of the fingerprint. The first request with a key runs inside one transaction that
 * also stores its answer, under a transaction-scoped advisory lock on (scope, key):
 * - a retry while it runs cannot take the lock: 409 `idempotency_in_progress`;
 * - a retry after it committed replays the stored answer with `idempotent-replayed: true` (a lost answer is safe);
 * - a different body with the same key within 24 hours: 422 `idempotency_key_reused`;
 * - a 5xx (or a crash) rolls the whole transaction back and stores nothing, so a retry runs again and the change
 *   happens at most once. 2xx and 4xx answers are stored; a 4xx's partial writes roll back with its transaction,
 *   and its answer is stored in a new one under the key's lock.
 *
 * Stored answers may hold a credential shown once (a new key, a webhook signing secret, a token), so every answer is
 * stored sealed (core/sealing.ts), bound to its scope, key and status: it cannot be replayed from another record.
 *
 * An operation may finish its answer after the change commits, with no connection held (a hangup waits for the
 * engine): its transaction stores a provisional answer marked pending, and the finished answer replaces it. A retry
 * meanwhile is 409 `idempotency_in_progress`, as while a transaction runs; a retry after the pending time (the first
 * request's process died) takes the provisional answer as final, and a request that finishes later answers with
 * whatever was stored first, so every answer to one key is the same.
 *
 * A scope keeps at most so many answers and bytes (AnswerLimits: counted by api/answer-tally.ts, checked with the
 * key's lock; past them 409 `limit_exceeded` before any work, not stored), and one answer at most `answerBytes` (a
 * larger one is a 413 refusal, stored as any 4xx).
 *
 * The records' statements are in core/idempotency/records.ts; this file holds the rules and the transaction.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { Queryable } from '../core/database.ts';
import { ApiError } from '../core/errors.ts';
import {
  deleteRecord,
  finishRecord,
  insertRecord,
  keyUsed,
  lockAndReadRecord,
  RecordExistsError,
  recordOf,
  settleRecord,
  type StoredRecord,
} from '../core/idempotency/records.ts';
import { holdingConnection } from '../core/held-connections.ts';
import { openSecret, sealSecret } from '../core/sealing.ts';
import type { AnswerTally } from './answer-tally.ts';

const keyPattern = /^[\x21-\x7e]{1,255}$/;
/** Past an operation's own bound, the time left to store its finished answer before a retry settles it. */
const finishMarginMs = 10_000;
/** Rows per statement of the purge and of the sealing sweep: each statement stays short. */

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
  /** The rest of the work, done once the change has committed; this answer is the provisional one meanwhile. */
  finishLater?: FinishLater;
}

export interface FinishLater {
  /** How long `finish` may take (it must bound itself); a retry this long after, plus a margin, settles the record. */
  withinMs: number;
  /** The finished answer; it runs with no connection of the request held, so it may wait. */
  finish: () => Promise<Answer>;
}

export interface StoredAnswer {
  status: number;
  body: string;
  replayed: boolean;
}

/** What one scope may store (docs/foundation.md, "Idempotency"; settings IDEMPOTENCY_ANSWERS_PER_SCOPE and so on). */
export interface AnswerLimits {
  /** Live answers per scope. */
  answers: number;
  /** Bytes of live answers per scope, as stored (sealed). */
  bytes: number;
  /** Bytes of one answer's JSON. */
  answerBytes: number;
}

/**
 * Where answers are stored, the key they are sealed with (SigningKeys.idempotentAnswers), and what a scope may store.
 */
export interface AnswerStore {
  pool: pg.Pool;
  key: Uint8Array;
  /** None: no limit (tests of the run alone). */
  limits?: AnswerLimits;
  /** Where the answers stored are counted (the process's one); with `limits`. */
  tally?: AnswerTally;
}

/** The associated data of a sealed answer: the record it belongs to. */
function boundTo(scope: string, key: string, status: number): string {
  return JSON.stringify(['idempotent answer', scope, key, status]);
}

export function sealAnswer(store: AnswerStore, scope: string, key: string, status: number, body: string): string {
  return sealSecret(store.key, body, boundTo(scope, key, status));
}

function openAnswer(store: AnswerStore, scope: string, key: string, record: StoredRecord): string {
  if (!record.sealed) return record.response_body;
  return openSecret(store.key, record.response_body, boundTo(scope, key, record.status_code));
}

function inProgress(): ApiError {
  return new ApiError('idempotency_in_progress', 'a request with this idempotency-key is still running; retry later', {
    headers: { 'retry-after': '1' },
  });
}

/**
 * Where an older version kept the answers of this sender, read while those may still be replayed (24 hours after an
 * upgrade): the scope and the fingerprint it gave the same request (api/idempotency-scopes.ts).
 */
export interface EarlierRecord {
  scope: string;
  print: Buffer;
}

/** The stored answer of a live record that is this request's: 409 while it is pending. */
async function replayOf(
  db: Queryable,
  store: AnswerStore,
  scope: string,
  key: string,
  record: StoredRecord,
): Promise<StoredAnswer> {
  if (record.pending) throw inProgress();
  const body = openAnswer(store, scope, key, record);
  // A provisional answer past its time stands as the answer (its request ended before finishing it); one an older
  // version stored in clear text is sealed now.
  if (record.provisional || !record.sealed) {
    await settleRecord(db, scope, key, sealAnswer(store, scope, key, record.status_code, body));
  }
  return { status: record.status_code, body, replayed: true };
}

/**
 * Takes the key's lock in the transaction `db` runs and decides from its record: the stored answer to replay, or
 * undefined when the request runs (an expired record is deleted first). 409 while another request holds the key or
 * its answer is pending; 422 when the key was used for another request. A record an older version kept for this
 * sender elsewhere (`earlier`) is replayed when it is this request's; another request's there is none of its
 * business.
 */
async function takeKey(
  db: Queryable,
  store: AnswerStore,
  scope: string,
  key: string,
  print: Buffer,
  earlier: EarlierRecord | undefined,
): Promise<StoredAnswer | undefined> {
  const { locked, stored, record, earlier: earlierRecord } = await lockAndReadRecord(db, scope, key, earlier?.scope);
  if (!locked) throw inProgress();
  if (record !== undefined && !record.live) await deleteRecord(db, scope, key);
  else if (record !== undefined) {
    const same =
      record.fingerprint.equals(print) || (earlier?.scope === scope && record.fingerprint.equals(earlier.print));
    if (!same) {
      throw new ApiError(
        'idempotency_key_reused',
        'this idempotency-key was used for a different request in the last 24 hours',
      );
    }
    return replayOf(db, store, scope, key, record);
  }
  if (earlier !== undefined && earlierRecord?.live === true && earlierRecord.fingerprint.equals(earlier.print)) {
    return replayOf(db, store, earlier.scope, key, earlierRecord);
  }
  const limits = store.limits;
  const here = store.tally?.pending(scope) ?? { answers: 0, bytes: 0 };
  const answers = stored.answers + here.answers;
  const bytes = stored.bytes + here.bytes;
  if (limits !== undefined && (answers >= limits.answers || bytes >= limits.bytes)) {
    // Before any work, and not stored: the same request runs once older answers have expired.
    throw new ApiError(
      'limit_exceeded',
      `this credential's scope keeps ${answers} idempotent answers (${bytes} bytes) of the last 24 hours, at most ` +
        `${limits.answers} (${limits.bytes} bytes) are kept; retry once older ones expire`,
    );
  }
  return undefined;
}

/** Whether a request with `key` ran, or runs now, in `scope`: a retry, whose work is not prepared again. */
export function keyInUse(store: AnswerStore, scope: string, key: string): Promise<boolean> {
  return keyUsed(store.pool, scope, key);
}

export async function runIdempotent(
  store: AnswerStore,
  scope: string,
  key: string,
  print: Buffer,
  work: (db: Queryable, afterCommit: (effect: () => void | Promise<void>) => void) => Promise<Answer>,
  earlier?: EarlierRecord,
): Promise<StoredAnswer> {
  const effects: (() => void | Promise<void>)[] = [];
  let answer: { status: number; body: string };
  let later: FinishLater | undefined;
  const client = await store.pool.connect();
  try {
    await client.query('BEGIN');
    const replay = await takeKey(client, store, scope, key, print, earlier);
    if (replay !== undefined) {
      await client.query('COMMIT');
      return replay;
    }
    try {
      const result = await holdingConnection("an idempotent request's transaction", () =>
        work(client, (effect) => effects.push(effect)),
      );
      answer = { status: result.status, body: JSON.stringify(result.body) };
      const size = Buffer.byteLength(answer.body);
      if (store.limits !== undefined && size > store.limits.answerBytes) {
        // Refused as any 4xx is: the change rolls back, and this (small) answer is the one kept for the key.
        throw new ApiError(
          'payload_too_large',
          `the answer would be ${size} bytes, more than the ${store.limits.answerBytes} an idempotent answer may ` +
            'keep; nothing was changed',
        );
      }
      later = result.finishLater;
    } catch (error) {
      if (!(error instanceof ApiError) || error.status >= 500) throw error;
      // A refusal: its partial writes roll back with the whole transaction (a savepoint would cost every request a
      // statement), and its answer is stored in a new one under the key's lock, unless another request with the key
      // took it in between: then that one's answer (or 409 while it runs) is the answer, as for any retry.
      await client.query('ROLLBACK');
      effects.length = 0;
      answer = { status: error.status, body: JSON.stringify(error.body()) };
      await client.query('BEGIN');
      const stored = await takeKey(client, store, scope, key, print, earlier);
      if (stored !== undefined) {
        await client.query('COMMIT');
        return stored;
      }
    }
    const sealedBody = sealAnswer(store, scope, key, answer.status, answer.body);
    await insertRecord(
      client,
      { scope, key, fingerprint: print, status: answer.status, sealedBody },
      later === undefined ? null : (later.withinMs + finishMarginMs) / 1000,
    ).catch((error: unknown) => {
      // The request with this key that held the lock committed just as this one read (lockAndReadRecord): this
      // one's change rolls back, and a retry replays that one's answer.
      throw error instanceof RecordExistsError ? inProgress() : error;
    });
    await client.query('COMMIT');
    store.tally?.add(scope, Buffer.byteLength(sealedBody));
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
  await Promise.all(effects.map((effect) => effect()));
  if (later === undefined) return { ...answer, replayed: false };
  return finishPending(store, scope, key, print, later);
}

/**
 * Finishes a provisional answer (no connection held while `finish` runs) and stores it, unless a retry settled the
 * provisional one first: then that one is the answer. A failure leaves the record pending; the client's retry gets
 * 409 until the pending time ends, then the provisional answer (the change itself is made, once).
 */
async function finishPending(
  store: AnswerStore,
  scope: string,
  key: string,
  print: Buffer,
  later: FinishLater,
): Promise<StoredAnswer> {
  const finished = await later.finish();
  const answer = { status: finished.status, body: JSON.stringify(finished.body) };
  const sealedBody = sealAnswer(store, scope, key, answer.status, answer.body);
  if (await finishRecord(store.pool, { scope, key, fingerprint: print, status: answer.status, sealedBody })) {
    return { ...answer, replayed: false };
  }
  const record = await recordOf(store.pool, scope, key, print);
  if (record === undefined) return { ...answer, replayed: false };
  return { status: record.status_code, body: openAnswer(store, scope, key, record), replayed: false };
}
