/**
 * `afterCommit` (core/database.ts): work sent on a transaction's connection once `inTransaction` committed, outside
 * the transaction, with the caller not waiting for it; never after a rollback; at once outside a transaction. The
 * queue's notices (core/queues/entries.ts `notify`) go this way, distribution's offers in the transaction.
 */
import test from 'ava';
import pg from 'pg';
import { afterCommit, inTransaction } from '../../core/database.ts';
import { freshDatabase, type TestDatabase } from '../helpers/database.ts';

let database: TestDatabase;
let pool: pg.Pool;

test.before(async () => {
  database = await freshDatabase({ migrate: false });
  pool = new pg.Pool({ connectionString: database.url, max: 2 });
});

test.after.always(async () => {
  await pool?.end();
  await database?.drop();
});

test('a hook runs after the commit, outside the transaction; a rollback drops it', async (t) => {
  const seen: { inTransaction: boolean; committed: boolean }[] = [];
  let done = () => {};
  const ran = new Promise<void>((resolve) => (done = resolve));
  const table = 'after_commit';
  await pool.query(`CREATE TABLE ${table} (id int)`);
  await inTransaction(pool, async (db) => {
    await db.query(`INSERT INTO ${table} VALUES (1)`);
    await afterCommit(db, async (client) => {
      // Outside the transaction: no transaction id is assigned to the hook's statement's own.
      const state = await client.query<{ open: boolean }>(
        'SELECT pg_current_xact_id_if_assigned() IS NOT NULL AS open',
      );
      const other = await pool.query<{ count: string }>(`SELECT count(*) FROM ${table}`);
      seen.push({ inTransaction: state.rows[0]?.open === true, committed: other.rows[0]?.count === '1' });
      done();
    });
    t.deepEqual(seen, [], 'not run inside the transaction');
  });
  await ran;
  t.deepEqual(seen, [{ inTransaction: false, committed: true }]);

  let rolledBackHookRan = false;
  await t.throwsAsync(
    inTransaction(pool, async (db) => {
      await afterCommit(db, async () => {
        rolledBackHookRan = true;
      });
      throw new Error('rolled back');
    }),
    { message: 'rolled back' },
  );
  // The pool has two connections: both come back (the hook's connection too), so the queries below run.
  await pool.query('SELECT 1');
  await Promise.all([pool.query('SELECT 1'), pool.query('SELECT 1')]);
  t.false(rolledBackHookRan);
});

test('outside a transaction the hook runs at once; a failing hook drops its connection, not the pool', async (t) => {
  let ran = false;
  await afterCommit(pool, async () => {
    ran = true;
  });
  t.true(ran, 'on the pool, at once');
  await inTransaction(pool, async (db) => {
    await afterCommit(db, async (client) => {
      await client.query('SELECT no_such_function()');
    });
  });
  // The failed hook's connection was released with its error (discarded); the pool still serves.
  const answers = await Promise.all([pool.query('SELECT 1 AS one'), pool.query('SELECT 1 AS one')]);
  t.deepEqual(
    answers.map((answer) => answer.rows[0]?.one),
    [1, 1],
  );
});
