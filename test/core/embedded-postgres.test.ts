/**
 * The embedded PostgreSQL starting, or saying why not: run by root from a folder only root can enter (PostgreSQL then
 * runs as the `postgres` account, which cannot reach that folder by its path), and each way it can fail to start (a
 * port taken, a missing program, an initdb that fails, a copy of the programs someone else could change) as an error
 * with its reason, from the library, from `switchboard all` and from `npm test`'s runner.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, cp, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import pg from 'pg';
import { EmbeddedPostgresError, openEmbeddedDatabase } from '../../core/embedded-postgres.ts';
import { packagedPrograms } from '../../core/postgres-programs.ts';
import { switchboardArgs } from '../helpers/cli.ts';
import { freePort } from '../helpers/free-port.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const needsRoot =
  'this test needs root (CI runs as root): as root the embedded PostgreSQL runs as the postgres account';

const folders: string[] = [];
const stops: (() => Promise<void>)[] = [];

/** A new folder; 0o755 unless a test needs one only root can enter (0o700). */
async function folder(mode = 0o755): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-embedded-'));
  await chmod(dir, mode);
  folders.push(dir);
  return dir;
}

test.after.always(async () => {
  for (const stop of stops) await stop();
  for (const dir of folders) await rm(dir, { recursive: true, force: true });
});

/** A socket that holds a loopback port, as another program would. */
async function holdPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return { port: (server.address() as { port: number }).port, server };
}

function run(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, args, { cwd: root, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stderr }));
  });
}

function withoutDatabaseUrl(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const result = { ...process.env, ...env };
  delete result.DATABASE_URL;
  return result;
}

test('as root, the embedded server runs from a folder only root can enter, its programs and data inside it', async (t) => {
  t.is(process.getuid?.(), 0, needsRoot);
  const closed = await folder(0o700);
  // The platform package as npm installs it, inside the closed folder: the postgres account cannot reach it there.
  const packaged = path.dirname(await packagedPrograms());
  await cp(packaged, path.join(closed, 'package'), { recursive: true, verbatimSymlinks: true });
  const copies = await folder(0o755);
  const dataDir = path.join(closed, 'data');

  const database = await openEmbeddedDatabase(dataDir, await freePort(), () => {}, {
    programs: path.join(closed, 'package', path.basename(await packagedPrograms())),
    copies,
  });
  let stopped = false;
  stops.push(async () => {
    if (!stopped) await database.stop();
  });

  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  const answer = await client.query<{ sum: number; database: string; encoding: string }>(
    'SELECT 1 + 1 AS sum, current_database() AS database, pg_encoding_to_char(encoding) AS encoding FROM pg_database WHERE datname = current_database()',
  );
  await client.end();
  // UTF-8 whatever the locale of the environment (none here: the test's programs get only what initdb needs).
  t.deepEqual(answer.rows, [{ sum: 2, database: 'switchboard', encoding: 'UTF8' }]);

  const clusterDir = path.join(dataDir, 'postgres');
  t.true(existsSync(path.join(clusterDir, 'PG_VERSION')), 'the cluster lives in the data folder');
  const postmaster = Number((await readFile(path.join(clusterDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
  const status = await readFile(`/proc/${postmaster}/status`, 'utf8');
  const postgresUid = (await stat(clusterDir)).uid;
  t.not(postgresUid, 0);
  t.regex(status, new RegExp(`^Uid:\\s+${postgresUid}\\s`, 'm'), 'the server runs as the postgres account');
  t.is((await stat(closed)).mode & 0o777, 0o700, 'the closed folder was not opened');

  // The programs ran from a copy root owns and no one else can change, named by the package's version.
  const { version } = JSON.parse(await readFile(path.join(packaged, 'package.json'), 'utf8'));
  const copy = `switchboard-embedded-postgres-${path.basename(packaged)}-${version}`;
  t.deepEqual(await readdir(copies), [copy]);
  const copied = await stat(path.join(copies, copy, 'bin', 'postgres'));
  t.is(copied.uid, 0);
  t.is(copied.mode & 0o022, 0);

  await database.stop();
  stopped = true;
  t.false(existsSync(path.join(clusterDir, 'postmaster.pid')), 'the server stopped');
  const refused = new pg.Client({ connectionString: database.url });
  await t.throwsAsync(refused.connect());
});

test('as root, a copy of the programs found in place that others could change is refused', async (t) => {
  t.is(process.getuid?.(), 0, needsRoot);
  const closed = await folder(0o700);
  const packaged = path.dirname(await packagedPrograms());
  await cp(packaged, path.join(closed, 'package'), { recursive: true, verbatimSymlinks: true });
  const copies = await folder(0o755);
  const { version } = JSON.parse(await readFile(path.join(packaged, 'package.json'), 'utf8'));
  const planted = path.join(copies, `switchboard-embedded-postgres-${path.basename(packaged)}-${version}`);
  await mkdir(planted);
  await chmod(planted, 0o777);

  const error = await t.throwsAsync(
    openEmbeddedDatabase(path.join(closed, 'data'), await freePort(), () => {}, {
      programs: path.join(closed, 'package', path.basename(await packagedPrograms())),
      copies,
    }),
    { instanceOf: EmbeddedPostgresError },
  );
  t.regex(error?.message ?? '', /exists but is not a folder only root can change \(owner uid 0, mode 777\)/);
  t.false(existsSync(path.join(planted, 'bin')), 'nothing was put in the planted folder');
});

test('a port held by another socket is a clear error, and leaves no server behind', async (t) => {
  const { port, server } = await holdPort();
  t.teardown(() => server.close());
  const dataDir = path.join(await folder(), 'data');
  const error = await t.throwsAsync(
    openEmbeddedDatabase(dataDir, port, () => {}),
    {
      instanceOf: EmbeddedPostgresError,
    },
  );
  t.regex(error?.message ?? '', /^the embedded PostgreSQL in .* did not start: /);
  t.regex(error?.message ?? '', /Address already in use/);
  t.regex(error?.message ?? '', new RegExp(`port ${port} is in use: set EMBEDDED_POSTGRES_PORT to a free port`));
  t.false(existsSync(path.join(dataDir, 'postgres', 'postmaster.pid')));
});

test('a missing program is a clear error', async (t) => {
  const empty = await folder(0o755);
  const error = await t.throwsAsync(
    openEmbeddedDatabase(path.join(await folder(), 'data'), await freePort(), () => {}, { programs: empty }),
    { instanceOf: EmbeddedPostgresError },
  );
  t.regex(error?.message ?? '', new RegExp(`${path.join(empty, 'bin', 'postgres')} does not exist`));
});

test('an initdb that fails is a clear error with what it said', async (t) => {
  const dataDir = path.join(await folder(), 'data');
  // A cluster folder with something in it but no cluster: initdb refuses it.
  await mkdir(path.join(dataDir, 'postgres'), { recursive: true });
  await writeFile(path.join(dataDir, 'postgres', 'stray'), 'not a cluster');
  const error = await t.throwsAsync(
    openEmbeddedDatabase(dataDir, await freePort(), () => {}),
    {
      instanceOf: EmbeddedPostgresError,
    },
  );
  t.regex(error?.message ?? '', /initdb failed \(exit code 1\)/);
  t.regex(error?.message ?? '', /exists but is not empty/);
});

test('switchboard all says why the embedded PostgreSQL did not start and exits 1', async (t) => {
  const { port, server } = await holdPort();
  t.teardown(() => server.close());
  const outcome = await run(
    [...switchboardArgs, 'all'],
    withoutDatabaseUrl({
      SWITCHBOARD_DATA_DIR: path.join(await folder(), 'data'),
      EMBEDDED_POSTGRES_PORT: String(port),
      PORT: String(await freePort()),
      SIP_PORT: '0',
    }),
  );
  t.is(outcome.code, 1, outcome.stderr);
  t.regex(outcome.stderr, /^switchboard: the embedded PostgreSQL in .* did not start: /);
  t.regex(outcome.stderr, new RegExp(`port ${port} is in use: set EMBEDDED_POSTGRES_PORT to a free port\\n$`));
  t.notRegex(outcome.stderr, /Unhandled|node:events|\n\s+at /);
});

test("npm test's runner says why the embedded PostgreSQL did not start and exits 1", async (t) => {
  const { port, server } = await holdPort();
  t.teardown(() => server.close());
  const outcome = await run(
    ['--import=tsx', path.join(root, 'test', 'run.ts'), 'test/no-such.test.ts'],
    withoutDatabaseUrl({ EMBEDDED_POSTGRES_PORT: String(port) }),
  );
  t.is(outcome.code, 1, outcome.stderr);
  t.regex(outcome.stderr, /^npm test: the embedded PostgreSQL in .* did not start: /);
  t.regex(outcome.stderr, new RegExp(`port ${port} is in use: set EMBEDDED_POSTGRES_PORT to a free port\\n$`));
  t.notRegex(outcome.stderr, /Unhandled|node:events|\n\s+at /);
});
