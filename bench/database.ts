/** A database for one bench run only: made on DATABASE_URL's server, or on an embedded server started here. */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { migrate } from '../core/database.ts';
import { openEmbeddedDatabase } from '../core/embedded-postgres.ts';
import { freePort } from '../test/helpers/free-port.ts';

export interface ScratchDatabase {
  url: string;
  where: string;
  close(): Promise<void>;
}

/** A database for this run only: made on DATABASE_URL's server, or on an embedded server started here. */
export async function scratchDatabase(): Promise<ScratchDatabase> {
  const serverUrl = process.env.DATABASE_URL;
  if (serverUrl === undefined || serverUrl === '') {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-'));
    const embedded = await openEmbeddedDatabase(dataDir, await freePort(), () => {});
    await migrate(embedded.url);
    return {
      url: embedded.url,
      where: 'embedded PostgreSQL (DATABASE_URL is not set)',
      async close() {
        await embedded.stop();
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  }
  const name = `sb_bench_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  await migrate(url.toString());
  return {
    url: url.toString(),
    where: `DATABASE_URL (scratch database ${name})`,
    async close() {
      const client = new pg.Client({ connectionString: serverUrl });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}
