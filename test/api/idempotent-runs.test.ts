/**
 * One idempotent request's run (api/idempotency.ts `runIdempotent`) against PostgreSQL: a refusal's writes roll back
 * with its transaction and its answer is stored and replayed; a 2xx's writes and answer commit together; a 5xx
 * stores nothing, so the retry runs again. A scope's limits (answers, bytes, one answer's size) with the answers
 * counted as an API process counts them (api/answer-tally.ts).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import test from 'ava';
import pg from 'pg';
import { ApiError } from '../../core/errors.ts';
import { AnswerTally } from '../../api/answer-tally.ts';
import { type AnswerLimits, type AnswerStore, runIdempotent } from '../../api/idempotency.ts';
import { freshDatabase, type TestDatabase } from '../helpers/database.ts';

let database: TestDatabase;
let store: AnswerStore;

test.before(async () => {
  database = await freshDatabase();
  store = { pool: new pg.Pool({ connectionString: database.url, max: 4 }), key: randomBytes(32) };
  await store.pool.query('CREATE TABLE IF NOT EXISTS scratch_writes (id text PRIMARY KEY)');
});

test.after.always(async () => {
  await store?.pool.end();
  await database?.drop();
});

const print = Buffer.from('the same request');
const written = async (id: string) =>
  (await store.pool.query('SELECT 1 FROM scratch_writes WHERE id = $1', [id])).rowCount === 1;

test('a refusal after a write: the write rolls back, the 4xx is stored and replayed without running again', async (t) => {
  const scope = `app-${randomUUID()}`;
  const row = randomUUID();
  let runs = 0;
  const refuse = async (db: Parameters<Parameters<typeof runIdempotent>[4]>[0]) => {
    runs += 1;
    await db.query('INSERT INTO scratch_writes (id) VALUES ($1)', [row]);
    throw new ApiError('message_conflict', 'sent already');
  };
  const first = await runIdempotent(store, scope, 'k', print, refuse);
  t.like(first, { status: 409, replayed: false });
  t.is(JSON.parse(first.body).error.code, 'message_conflict');
  t.false(await written(row), 'the refused request left its write');
  const again = await runIdempotent(store, scope, 'k', print, refuse);
  t.deepEqual(again, { ...first, replayed: true });
  t.is(runs, 1);
  // The key with another request is 422.
  await t.throwsAsync(runIdempotent(store, scope, 'k', Buffer.from('another request'), refuse), {
    instanceOf: ApiError,
    message: /different request/,
  });
});

test('a 2xx commits its writes with its answer; a 5xx stores nothing, and the retry runs again', async (t) => {
  const scope = `app-${randomUUID()}`;
  const row = randomUUID();
  let runs = 0;
  const create = async (db: Parameters<Parameters<typeof runIdempotent>[4]>[0]) => {
    runs += 1;
    if (runs === 1) throw new ApiError('internal_error', 'broke');
    await db.query('INSERT INTO scratch_writes (id) VALUES ($1)', [row]);
    return { status: 201, body: { id: row } };
  };
  await t.throwsAsync(runIdempotent(store, scope, 'k', print, create), { message: 'broke' });
  t.false(await written(row));
  t.like(await runIdempotent(store, scope, 'k', print, create), { status: 201, replayed: false });
  t.true(await written(row));
  t.like(await runIdempotent(store, scope, 'k', print, create), { status: 201, replayed: true });
  t.is(runs, 2);
});

type Work = Parameters<typeof runIdempotent>[4];

/** The store with limits, counting what it stores as an API process does (its tally added when a test says). */
function limitedStore(limits: AnswerLimits): AnswerStore & { tally: AnswerTally } {
  const tally = new AnswerTally(store.pool, (error) => {
    throw error;
  });
  return { ...store, limits, tally };
}

test('a scope that keeps its most answers is 409 limit_exceeded before any work, stores nothing; replays still replay', async (t) => {
  const limited = limitedStore({ answers: 3, bytes: 1_000_000, answerBytes: 1_000_000 });
  const scope = `app-${randomUUID()}`;
  let runs = 0;
  const create: Work = async (db) => {
    runs += 1;
    const id = randomUUID();
    await db.query('INSERT INTO scratch_writes (id) VALUES ($1)', [id]);
    return { status: 201, body: { id } };
  };
  for (const key of ['k1', 'k2', 'k3'])
    t.like(await runIdempotent(limited, scope, key, print, create), { status: 201 });
  const refused = await t.throwsAsync(runIdempotent(limited, scope, 'k4', print, create), { instanceOf: ApiError });
  t.is((refused as ApiError).code, 'limit_exceeded');
  t.regex(refused?.message ?? '', /3 idempotent answers .* at most 3/);
  t.is(runs, 3, 'the refused request did not run');
  // Not stored: the same key is refused again (it runs once older answers expire), and the earlier keys replay.
  await t.throwsAsync(runIdempotent(limited, scope, 'k4', print, create), { message: /at most 3/ });
  t.like(await runIdempotent(limited, scope, 'k1', print, create), { status: 201, replayed: true });
  // Another scope has its own count.
  t.like(await runIdempotent(limited, `user-${randomUUID()}`, 'k4', print, create), { status: 201, replayed: false });
  const stored = await store.pool.query('SELECT count(*)::int AS n FROM idempotency_records WHERE scope = $1', [scope]);
  t.is(stored.rows[0].n, 3);
});

test('a scope past its bytes is 409 limit_exceeded; answers of old hours no longer count', async (t) => {
  const limited = limitedStore({ answers: 1_000, bytes: 4_000, answerBytes: 1_000_000 });
  const scope = `app-${randomUUID()}`;
  const large: Work = async () => ({ status: 201, body: { note: 'x'.repeat(1_500) } });
  // Each answer is stored sealed (base64, a little over 2,000 bytes): the second passes the 4,000.
  t.like(await runIdempotent(limited, scope, 'a', print, large), { status: 201 });
  t.like(await runIdempotent(limited, scope, 'b', print, large), { status: 201 });
  await t.throwsAsync(runIdempotent(limited, scope, 'c', print, large), { message: /bytes/ });
  // Counted in the table as the process adds them each second, the same: refused.
  await limited.tally.flush();
  t.deepEqual(limited.tally.pending(scope), { answers: 0, bytes: 0 });
  await t.throwsAsync(runIdempotent(limited, scope, 'c', print, large), { message: /bytes/ });
  // Their hour moves out of the last 24 hours (the records themselves expire alike): the scope may store again.
  await store.pool.query(`UPDATE idempotency_counts SET hour = hour - interval '25 hours' WHERE scope = $1`, [scope]);
  t.like(await runIdempotent(limited, scope, 'c', print, large), { status: 201, replayed: false });
});

test('an answer larger than an idempotent answer may be is 413: the change rolls back, and the retry gets the 413', async (t) => {
  const limited = limitedStore({ answers: 1_000, bytes: 1_000_000, answerBytes: 1_000 });
  const scope = `app-${randomUUID()}`;
  const row = randomUUID();
  let runs = 0;
  const create: Work = async (db) => {
    runs += 1;
    await db.query('INSERT INTO scratch_writes (id) VALUES ($1)', [row]);
    return { status: 201, body: { id: row, note: 'x'.repeat(1_000) } };
  };
  const first = await runIdempotent(limited, scope, 'k', print, create);
  t.like(first, { status: 413, replayed: false });
  t.is(JSON.parse(first.body).error.code, 'payload_too_large');
  t.false(await written(row), 'nothing was changed');
  t.deepEqual(await runIdempotent(limited, scope, 'k', print, create), { ...first, replayed: true });
  t.is(runs, 1);
});

test('the tally keeps what it could not add, adds it the next time, and adds what waits when it closes', async (t) => {
  const scope = `app-${randomUUID()}`;
  let failing = true;
  const errors: unknown[] = [];
  const flaky = {
    query: (...args: Parameters<pg.Pool['query']>) =>
      failing
        ? Promise.reject(new Error('connection lost'))
        : (store.pool.query as (...a: unknown[]) => unknown)(...args),
  } as unknown as pg.Pool;
  const tally = new AnswerTally(flaky, (error) => errors.push(error));
  tally.add(scope, 100);
  tally.add(scope, 50);
  await tally.flush();
  t.is(errors.length, 1);
  t.deepEqual(tally.pending(scope), { answers: 2, bytes: 150 }, 'kept after the failure');
  failing = false;
  tally.add(scope, 10);
  await tally.close();
  t.deepEqual(tally.pending(scope), { answers: 0, bytes: 0 });
  const counted = await store.pool.query('SELECT answers, bytes::int FROM idempotency_counts WHERE scope = $1', [
    scope,
  ]);
  t.deepEqual(counted.rows, [{ answers: 3, bytes: 160 }]);
});
