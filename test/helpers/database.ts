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
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}
