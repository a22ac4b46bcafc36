/**
 * The idempotency records' statements (core/idempotency/records.ts; the rules are api/idempotency.ts's): the lock
 * and the read in one statement (with an earlier scope's record and the scope's counts), held by one transaction at a
 * time, and an insert over a record another request committed meanwhile told apart from any other failure (the
 * request answers 409 `idempotency_in_progress`).
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import pg from 'pg';
import { inTransaction } from '../../core/database.ts';
import { addCounts, insertRecord, lockAndReadRecord, RecordExistsError } from '../../core/idempotency/records.ts';
import { freshDatabase, type TestDatabase } from '../helpers/database.ts';

let database: TestDatabase;
let pool: pg.Pool;

test.before(async () => {
  database = await freshDatabase();
  pool = new pg.Pool({ connectionString: database.url, max: 4 });
});

test.after.always(async () => {
  await pool?.end();
  await database?.drop();
});

const record = (scope: string, key: string) => ({
  scope,
  key,
  fingerprint: Buffer.from('print'),
  status: 201,
  sealedBody: 'sealed',
});

test('the lock is one transaction’s at a time, and the read sees the record once committed', async (t) => {
  const scope = `app-${randomUUID()}`;
  const first = await pool.connect();
  try {
    await first.query('BEGIN');
    t.deepEqual(await lockAndReadRecord(first, scope, 'k1'), {
      locked: true,
      stored: { answers: 0, bytes: 0 },
      record: undefined,
      earlier: undefined,
    });
    // Another transaction cannot take it while the first holds it, and reads nothing then.
    const other = await inTransaction(pool, (db) => lockAndReadRecord(db, scope, 'k1'));
    t.deepEqual(other, { locked: false, stored: { answers: 0, bytes: 0 }, record: undefined, earlier: undefined });
    // Another key is another lock.
    t.true((await inTransaction(pool, (db) => lockAndReadRecord(db, scope, 'k2'))).locked);
    await insertRecord(first, record(scope, 'k1'), null);
    await first.query('COMMIT');
  } finally {
    first.release();
  }
  const after = await inTransaction(pool, (db) => lockAndReadRecord(db, scope, 'k1'));
  t.true(after.locked);
  t.like(after.record, { status_code: 201, response_body: 'sealed', live: true, pending: false, provisional: false });
  t.true(after.record?.fingerprint.equals(Buffer.from('print')));
  // The scope's counts are what was added to them.
  t.deepEqual(after.stored, { answers: 0, bytes: 0 });
  await addCounts(pool, [
    { scope, answers: 1, bytes: 6 },
    { scope: `${scope}-other`, answers: 5, bytes: 50 },
  ]);
  await addCounts(pool, [{ scope, answers: 2, bytes: 10 }]);
  const counted = await inTransaction(pool, (db) => lockAndReadRecord(db, scope, 'k1'));
  t.deepEqual(counted.stored, { answers: 3, bytes: 16 });
});

test("the record of an earlier scope is read beside the scope's own, and its lock is not taken", async (t) => {
  const scope = `user-${randomUUID()}`;
  const earlierScope = `app-${randomUUID()}`;
  await inTransaction(pool, (db) => insertRecord(db, { ...record(earlierScope, 'k'), sealedBody: 'older' }, null));
  const read = await inTransaction(pool, (db) => lockAndReadRecord(db, scope, 'k', earlierScope));
  t.like(read, { locked: true, record: undefined, stored: { answers: 0, bytes: 0 } });
  t.like(read.earlier, { status_code: 201, response_body: 'older', live: true });
  // The earlier scope's lock is not taken: its own request runs meanwhile.
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await lockAndReadRecord(client, scope, 'k', earlierScope);
    const own = await inTransaction(pool, (db) => lockAndReadRecord(db, earlierScope, 'k'));
    t.true(own.locked);
    t.like(own.record, { response_body: 'older' });
    await client.query('ROLLBACK');
  } finally {
    client.release();
  }
});

test('an insert over a committed record is RecordExistsError, and any other failure is not', async (t) => {
  const scope = `app-${randomUUID()}`;
  await inTransaction(pool, (db) => insertRecord(db, record(scope, 'k'), 12));
  const pending = await inTransaction(pool, (db) => lockAndReadRecord(db, scope, 'k'));
  t.like(pending.record, { pending: true, provisional: true });
  await t.throwsAsync(
    inTransaction(pool, (db) => insertRecord(db, record(scope, 'k'), null)),
    { instanceOf: RecordExistsError },
  );
  // Any other failure is not that one.
  await t.throwsAsync(
    inTransaction(pool, (db) => insertRecord(db, { ...record(scope, 'k2'), status: Number.NaN }, null)),
    { message: /invalid input syntax|NaN|integer/i },
  );
});
