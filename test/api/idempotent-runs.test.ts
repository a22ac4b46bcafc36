/**
 * One idempotent request's run (api/idempotency.ts `runIdempotent`) against PostgreSQL: a refusal's writes roll back
 * with its transaction and its answer is stored and replayed; a 2xx's writes and answer commit together; a 5xx
 * stores nothing, so the retry runs again.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import test from 'ava';
import pg from 'pg';
import { ApiError } from '../../core/errors.ts';
import { type AnswerStore, runIdempotent } from '../../api/idempotency.ts';
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
