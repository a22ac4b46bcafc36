/** Each test file gets a database of its own on the server of DATABASE_URL (set by test/run.ts). */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrate } from '../../core/database.ts';

function serverUrl(): string {
  const url = process.env.DATABASE_URL;
  if (url === undefined || url === '') throw new Error('DATABASE_URL is not set: run the tests with npm test');
  return url;
}

export function databaseUrl(name: string): string {
  const url = new URL(serverUrl());
  url.pathname = `/${name}`;
  return url.toString();
}

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/** A new empty database with every migration applied. */
export async function freshDatabase(options: { migrate?: boolean } = {}): Promise<TestDatabase> {
  const name = `sb_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = databaseUrl(name);
  if (options.migrate !== false) await migrate(url);
  return {
    url,
    async drop() {
      const client = new pg.Client({ connectionString: serverUrl() });
      await client.connect();
      // pg's pool.end() resolves before its connections have closed: FORCE would end one mid-close, and the error
      // it then raises on its client reaches no listener (an uncaught exception in the test's worker). The closing
      // ones take a moment; connections left open after 2 s are ended by FORCE as before.
      for (let waited = 0; waited < 2000; waited += 25) {
        const open = await client.query<{ count: number }>(
          'SELECT count(*)::int AS count FROM pg_stat_activity WHERE datname = $1',
          [name],
        );
        if (open.rows[0]?.count === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}
