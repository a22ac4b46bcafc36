/**
 * The database every role uses: a `pg` pool on `DATABASE_URL`, or on the embedded PostgreSQL when it is unset, with
 * the forward migrations of `core/migrations` applied at start (node-pg-migrate; concurrent starts wait on its advisory
 * lock in turn).
 */
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PG_MIGRATE_LOCK_ID, runner } from 'node-pg-migrate';
import pg from 'pg';
import type { Config } from './config.ts';
import { openEmbeddedDatabase } from './embedded-postgres.ts';
import { holdingConnection } from './held-connections.ts';

export const migrationsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
const migrationsTable = 'schema_migrations';

// timestamptz and bigint columns arrive as Date and string; keep bigint as string (ids never exceed it here).
pg.types.setTypeParser(pg.types.builtins.INT8, (value: string) => value);

export type Queryable = pg.Pool | pg.PoolClient;

export interface Database {
  pool: pg.Pool;
  url: string;
  close(): Promise<void>;
}

export async function migrate(url: string, log: (message: string) => void = () => {}): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    // node-pg-migrate only tries its advisory lock and fails ("Another migration is already running") while another
    // process holds it: wait for that lock here, so processes starting together migrate one after the other. The
    // lock is re-entrant within this session, so the runner's own try then succeeds.
    await client.query('SELECT pg_advisory_lock($1)', [PG_MIGRATE_LOCK_ID]);
    await runner({
      dbClient: client,
      dir: migrationsDir,
      direction: 'up',
      migrationsTable,
      checkOrder: true,
      singleTransaction: true,
      log,
      logger: { debug: () => {}, info: log, warn: log, error: log },
    });
  } finally {
    await client.end();
  }
}

/**
 * A pool of connections to `url` (application_name `switchboard` unless named; `options` are session settings, as
 * `-c synchronous_commit=off`), with `onError` told when an idle connection loses its server: without a listener
 * that error would crash the process.
 */
export function openPool(
  url: string,
  settings: { max: number; applicationName?: string; options?: string },
  onError: (error: Error) => void,
): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: settings.max,
    application_name: settings.applicationName ?? 'switchboard',
    ...(settings.options === undefined ? {} : { options: settings.options }),
  });
  pool.on('error', onError);
  return pool;
}

/** True when every migration file has been applied (readiness). */
export async function migrationsApplied(db: Queryable): Promise<boolean> {
  const files = (await readdir(migrationsDir)).filter((name) => name.endsWith('.sql')).map((name) => name.slice(0, -4));
  const result = await db.query<{ name: string }>(`SELECT name FROM ${migrationsTable}`).catch(() => undefined);
  if (result === undefined) return false;
  const applied = new Set(result.rows.map((row) => row.name));
  return files.every((name) => applied.has(name));
}

export async function openDatabase(
  config: Config,
  log: (message: string) => void,
  options: { migrate?: boolean } = {},
): Promise<Database> {
  const embedded =
    config.databaseUrl === undefined
      ? await openEmbeddedDatabase(config.dataDir, config.embeddedPostgresPort, log)
      : undefined;
  const url = config.databaseUrl ?? (embedded?.url as string);
  try {
    if (options.migrate !== false) await migrate(url, log);
  } catch (error) {
    await embedded?.stop();
    throw error;
  }
  const pool = openPool(url, { max: config.poolSize }, (error) => log(`database connection lost: ${error.message}`));
  return {
    pool,
    url,
    async close() {
      await pool.end();
      await embedded?.stop();
    },
  };
}

/** What runs on a transaction's connection once `inTransaction` committed it (`afterCommit`). */
type CommitHook = (db: pg.PoolClient) => Promise<void>;
const commitHooks = new WeakMap<pg.PoolClient, CommitHook[]>();

/**
 * Runs `work` in a transaction on a connection of `pool`: committed when it resolves, rolled back when it throws.
 * `work` holds the connection, so it must not wait on the network (core/held-connections.ts).
 */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  const hooks: CommitHook[] = [];
  commitHooks.set(client, hooks);
  let committed = false;
  try {
    await client.query('BEGIN');
    const result = await holdingConnection('a transaction', () => work(client));
    await client.query('COMMIT');
    committed = true;
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    commitHooks.delete(client);
    if (committed && hooks.length > 0) {
      // The caller goes on at once; the connection returns to the pool once the hooks ran (a failed one drops it).
      void (async () => {
        for (const hook of hooks) await hook(client);
      })().then(
        () => client.release(),
        (error: unknown) => client.release(error instanceof Error ? error : new Error(String(error))),
      );
    } else {
      client.release();
    }
  }
}

/**
 * Runs `hook` on the connection of `db`'s transaction once it committed, outside it (autocommit), without the
 * transaction's caller waiting for it; nothing when the transaction rolls back. Outside `inTransaction`, at once.
 * For what is best sent after the commit rather than in it: a `pg_notify` in a transaction holds PostgreSQL's notify
 * lock through that transaction's commit, WAL flush included, so transactions that notify commit one at a time; a
 * notice sent on its own commits in no time. The notice is then lost if the process dies between the two: only for
 * notices something else makes up for (a periodic sweep). A failing hook is dropped with its connection.
 */
export async function afterCommit(db: Queryable, hook: CommitHook): Promise<void> {
  const hooks = db instanceof pg.Pool ? undefined : commitHooks.get(db);
  if (hooks !== undefined) {
    hooks.push(hook);
    return;
  }
  if (db instanceof pg.Pool) {
    const client = await db.connect();
    try {
      await holdingConnection('a notice after a commit', () => hook(client));
    } finally {
      client.release();
    }
    return;
  }
  await hook(db);
}

/**
 * Tries the session-level advisory lock `key` on `client` (leadership: held for as long as that connection lives);
 * true when this session now holds it.
 */
export async function tryAdvisoryLock(client: pg.ClientBase, key: number | string): Promise<boolean> {
  const taken = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [key]);
  return taken.rows[0]?.ok === true;
}
