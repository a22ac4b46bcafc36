/**
 * Every row a database holds, as text, for tests that look for what must never be stored (a credential in clear
 * text). It is `pg_dump --data-only` when the installed pg_dump can dump the server: pg_dump refuses a server of a
 * newer major version than its own, and Debian's is 15 while the embedded server `npm test` starts without
 * DATABASE_URL is 18. Then every row of every table is read in its text form through the server itself, with the
 * types' output functions that COPY, and so pg_dump, write with.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import pg from 'pg';

export interface DatabaseDump {
  text: string;
  /** How it was made: pg_dump, or the rows read through the server. */
  by: 'pg_dump' | 'rows';
}

const run = promisify(execFile);

async function pgDumpMajor(): Promise<number> {
  const { stdout } = await run('pg_dump', ['--version']);
  const major = /\(PostgreSQL\) (\d+)/.exec(stdout)?.[1];
  if (major === undefined) throw new Error(`pg_dump --version said ${stdout}`);
  return Number(major);
}

export async function dumpDatabase(url: string): Promise<DatabaseDump> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const server = await client.query<{ major: number }>(
      "SELECT current_setting('server_version_num')::int / 10000 AS major",
    );
    if ((await pgDumpMajor()) >= (server.rows[0]?.major ?? Infinity)) {
      const { stdout } = await run('pg_dump', ['--data-only', url], { maxBuffer: 256 * 1024 * 1024 });
      return { text: stdout, by: 'pg_dump' };
    }
    const tables = await client.query<{ name: string }>(
      `SELECT format('%I.%I', n.nspname, c.relname) AS name
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
          AND n.nspname NOT LIKE 'pg_toast%'
        ORDER BY 1`,
    );
    const parts: string[] = [];
    for (const { name } of tables.rows) {
      const rows = await client.query<{ row: string }>(`SELECT t::text AS row FROM ${name} t`);
      parts.push(`-- ${name}`, ...rows.rows.map((row) => row.row));
    }
    return { text: parts.join('\n'), by: 'rows' };
  } finally {
    await client.end();
  }
}
