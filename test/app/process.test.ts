/**
 * The `switchboard` command as a user runs it: real child processes (of the sources, test/helpers/cli.ts), the
 * embedded PostgreSQL of a standalone install, the admin commands joining a running service, draining on SIGTERM,
 * restarts that keep their data, and each role started on its own.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { freePort } from '../helpers/free-port.ts';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import test from 'ava';
import { PG_MIGRATE_LOCK_ID } from 'node-pg-migrate';
import pg from 'pg';
import { switchboardArgs } from '../helpers/cli.ts';
import { freshDatabase, type TestDatabase } from '../helpers/database.ts';
import { request } from '../helpers/service.ts';
import { untilTrue } from '../helpers/until.ts';

/** The child's environment: ours without DATABASE_URL (the embedded default), then `env` (undefined removes). */
function childEnv(env: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const result: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'info' };
  delete result.DATABASE_URL;
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) delete result[name];
    else result[name] = value;
  }
  return result;
}

interface Outcome {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function collect(child: ChildProcess): Promise<Outcome> {
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/** Runs `switchboard <args>` to its end. */
function switchboard(args: string[], env: Record<string, string | undefined>): Promise<Outcome> {
  return collect(
    spawn(process.execPath, [...switchboardArgs, ...args], { env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] }),
  );
}

interface RunningProcess {
  child: ChildProcess;
  /** From the "switchboard started" log line. */
  url: string;
  started: { roles: string[]; url: string; database: string };
  /** The log lines written up to "switchboard started", that one included. */
  startLines: Array<{ level: number; msg: string; setting?: string }>;
  exited: Promise<Outcome>;
  /** SIGTERM, then the outcome once the process has exited. */
  stop(): Promise<Outcome>;
}

/** Every service started, until it exits: the cleanup stops whatever a failed test left running. */
const running = new Set<{ child: ChildProcess; exited: Promise<Outcome> }>();

function terminate(child: ChildProcess): void {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
}

/** Starts a role (`all`, `api`, ...) and waits for its "switchboard started" line on stdout. */
async function startSwitchboard(role: string, env: Record<string, string | undefined>): Promise<RunningProcess> {
  const child = spawn(process.execPath, [...switchboardArgs, role], {
    env: childEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = collect(child);
  const spawned = { child, exited };
  running.add(spawned);
  const forget = () => running.delete(spawned);
  exited.then(forget, forget);
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const startLines: RunningProcess['startLines'] = [];
  const started = await new Promise<RunningProcess['started']>((resolve, reject) => {
    lines.on('line', (line) => {
      try {
        const entry = JSON.parse(line);
        if (startLines.length === 0 || startLines.at(-1)?.msg !== 'switchboard started') startLines.push(entry);
        if (entry.msg === 'switchboard started') resolve(entry);
      } catch {
        // not a log line
      }
    });
    exited.then(
      (outcome) =>
        reject(new Error(`switchboard ${role} exited (${outcome.code}) before it started: ${outcome.stderr}`)),
      reject,
    );
  });
  return {
    child,
    url: started.url,
    started,
    startLines,
    exited,
    stop() {
      terminate(child);
      return exited;
    },
  };
}

const temporary: string[] = [];
const databases: TestDatabase[] = [];

async function dataDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-process-'));
  temporary.push(dir);
  return dir;
}

test.after.always(async () => {
  for (const { child, exited } of running) {
    terminate(child);
    const stopped = await Promise.race([exited, delay(30_000, undefined, { ref: false })]);
    if (stopped === undefined) child.kill('SIGKILL');
  }
  for (const dir of temporary) {
    // A killed service leaves its embedded server behind: stop it (fast shutdown) before removing its folder.
    const pidFile = path.join(dir, 'postgres', 'postmaster.pid');
    if (existsSync(pidFile)) {
      const pid = Number((await readFile(pidFile, 'utf8')).split('\n')[0]);
      if (Number.isInteger(pid) && pid > 0) {
        try {
          process.kill(pid, 'SIGINT');
        } catch {
          // already gone
        }
        await untilTrue('the embedded PostgreSQL stopped', async () => !existsSync(pidFile), {
          timeoutMs: 20_000,
        }).catch(() => {});
      }
    }
    await rm(dir, { recursive: true, force: true });
  }
  for (const database of databases) await database.drop();
});

const usage = /usage: switchboard <command>/;

// a) and c) share one embedded install: the first start pays for initdb.
const embedded: {
  dir?: string;
  env?: Record<string, string | undefined>;
  service?: RunningProcess;
  apiKey?: string;
  workspaceId?: string;
} = {};

test.serial(
  'switchboard all without DATABASE_URL runs an embedded PostgreSQL and the admin commands join it',
  async (t) => {
    const dir = await dataDir();
    embedded.dir = dir;
    embedded.env = {
      PORT: String(await freePort()),
      EMBEDDED_POSTGRES_PORT: String(await freePort()),
      SWITCHBOARD_DATA_DIR: dir,
      SWITCHBOARD_SECRET: undefined,
    };
    const service = await startSwitchboard('all', embedded.env);
    embedded.service = service;
    t.is(service.started.database, 'embedded');
    t.deepEqual(service.started.roles, ['api', 'engine', 'operator']);
    t.is(service.url, `http://127.0.0.1:${embedded.env.PORT}`);
    t.true(existsSync(path.join(dir, 'postgres', 'PG_VERSION')), 'the cluster lives in SWITCHBOARD_DATA_DIR');
    // Without SWITCHBOARD_SECRET the start says, once and in one line, that the secret is kept beside the data.
    const warnings = service.startLines.filter((line) => line.setting === 'SWITCHBOARD_SECRET');
    t.is(warnings.length, 1, JSON.stringify(service.startLines));
    t.is(warnings[0]?.level, 40, 'a warning');
    t.regex(
      warnings[0]?.msg ?? '',
      /^SWITCHBOARD_SECRET is unset: the master secret is kept in the database it protects/,
    );

    const health = await request(service.url, 'GET', '/healthz');
    t.is(health.status, 200);
    t.deepEqual(health.body, { status: 'ok' });
    const ready = await request(service.url, 'GET', '/readyz');
    t.is(ready.status, 200);
    t.deepEqual(ready.body, { status: 'ready' });

    // The admin commands name only the data folder: they find the running server there.
    const admin = { SWITCHBOARD_DATA_DIR: dir };
    const created = await switchboard(['applications', 'create', 'acme'], admin);
    t.is(created.code, 0, created.stderr);
    t.regex(created.stdout, /^\{"applicationId":"acme","apiKey":"sbk_[A-Za-z0-9_-]{43}"\}\n$/);
    const apiKey: string = JSON.parse(created.stdout).apiKey;
    embedded.apiKey = apiKey;

    const workspace = await request(service.url, 'POST', '/api/v1/workspaces', {
      auth: apiKey,
      idempotencyKey: randomUUID(),
      body: { externalWorkspaceId: 'acme-support', name: 'Acme Support', timezone: 'Europe/Paris' },
    });
    t.is(workspace.status, 201, workspace.text);
    t.is(workspace.body.externalWorkspaceId, 'acme-support');
    embedded.workspaceId = workspace.body.id;

    const member = await switchboard(
      ['members', 'create', '--workspace', workspace.body.id, '--email', 'a@b.c', '--name', 'A'],
      admin,
    );
    t.is(member.code, 0, member.stderr);
    const memberJson = JSON.parse(member.stdout);
    t.like(memberJson, { workspaceId: workspace.body.id, email: 'a@b.c', name: 'A' });
    t.regex(memberJson.id, /^[0-9a-f-]{36}$/);
    t.true(Array.isArray(memberJson.scopes) && memberJson.scopes.length > 0);

    const again = await switchboard(['applications', 'create', 'acme'], admin);
    t.not(again.code, 0);
    t.is(again.stdout, '');
    t.regex(again.stderr, /application "acme" already exists/);

    // The service kept running through the admin commands, on the same server.
    const listed = await request(service.url, 'GET', '/api/v1/workspaces', { auth: apiKey });
    t.is(listed.status, 200, listed.text);
    t.deepEqual(
      listed.body.data.map((row: { id: string }) => row.id),
      [workspace.body.id],
    );
  },
);

test.serial('bad arguments exit 2 with the usage on stderr', async (t) => {
  const env = { SWITCHBOARD_DATA_DIR: embedded.dir ?? (await dataDir()) };
  const cases: [string, string[], RegExp][] = [
    ['an invalid applicationId', ['applications', 'create', 'Bad!'], /applicationId/],
    ['an unknown command', ['frobnicate'], /unknown command "frobnicate"/],
    ['an unknown scope', ['applications', 'create', 'acme2', '--scopes', 'nope'], /unknown scope "nope"/],
    ['an unknown option', ['applications', 'create', 'acme2', '--colour', 'red'], /--colour/],
    ['members create without --workspace', ['members', 'create', '--email', 'a@b.c'], /--workspace/],
  ];
  const outcomes = await Promise.all(cases.map(([, args]) => switchboard(args, env)));
  for (const [index, [what, , message]] of cases.entries()) {
    const outcome = outcomes[index] as Outcome;
    t.is(outcome.code, 2, `${what}: ${outcome.stderr}`);
    t.is(outcome.stdout, '', what);
    t.regex(outcome.stderr, message, what);
    t.regex(outcome.stderr, usage, what);
  }
  // Nothing was created by the refused commands.
  if (embedded.service !== undefined) {
    const again = await switchboard(['applications', 'create', 'acme2'], env);
    t.is(again.code, 0, again.stderr);
  }
});

test.serial('a restarted embedded install keeps its keys and workspaces', async (t) => {
  const { service, env, dir, apiKey, workspaceId } = embedded;
  if (service === undefined || env === undefined || dir === undefined || apiKey === undefined) {
    t.fail('the embedded install of the first test did not start');
    return;
  }
  const stopped = await service.stop();
  t.is(stopped.code, 0, stopped.stderr);
  t.regex(stopped.stdout, /"msg":"switchboard stopped"/);
  t.false(existsSync(path.join(dir, 'postgres', 'postmaster.pid')), 'the embedded server stopped with it');

  const restarted = await startSwitchboard('all', env);
  embedded.service = restarted;
  t.is(restarted.started.database, 'embedded');
  const listed = await request(restarted.url, 'GET', '/api/v1/workspaces', { auth: apiKey });
  t.is(listed.status, 200, listed.text);
  t.deepEqual(
    listed.body.data.map((row: { id: string; externalWorkspaceId: string }) => [row.id, row.externalWorkspaceId]),
    [[workspaceId, 'acme-support']],
  );
  const read = await request(restarted.url, 'GET', `/api/v1/workspaces/${workspaceId}`, { auth: apiKey });
  t.is(read.status, 200, read.text);
  t.is(read.body.name, 'Acme Support');

  const final = await restarted.stop();
  t.is(final.code, 0, final.stderr);
});

test('SIGTERM lets an in-flight request finish, then exits 0', async (t) => {
  const database = await freshDatabase();
  databases.push(database);
  const env = { DATABASE_URL: database.url, PORT: String(await freePort()) };
  const [service, created] = await Promise.all([
    startSwitchboard('all', env),
    switchboard(['applications', 'create', 'drain'], env),
  ]);
  t.is(service.started.database, 'DATABASE_URL');
  t.is(created.code, 0, created.stderr);
  const { apiKey } = JSON.parse(created.stdout);

  const blocker = new pg.Client({ connectionString: database.url });
  // pg_stat_activity is read once per transaction: watch it from outside the blocker's.
  const observer = new pg.Client({ connectionString: database.url });
  await Promise.all([blocker.connect(), observer.connect()]);
  t.teardown(() => Promise.all([blocker.end(), observer.end()]));
  await blocker.query('BEGIN');
  await blocker.query('LOCK TABLE workspaces IN ACCESS EXCLUSIVE MODE');

  const inFlight = request(service.url, 'POST', '/api/v1/workspaces', {
    auth: apiKey,
    idempotencyKey: randomUUID(),
    body: { externalWorkspaceId: 'drained', name: 'Drained', timezone: 'UTC' },
  });
  let settled: unknown;
  inFlight.then(
    (answer) => {
      settled = answer.text;
    },
    (error: unknown) => {
      settled = error;
    },
  );
  await untilTrue('the request waits on the lock', async () => {
    if (settled !== undefined) throw new Error(`the request did not wait for the lock: ${String(settled)}`);
    const waiting = await observer.query(
      `SELECT 1 FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'switchboard'
          AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO workspaces%'`,
    );
    return waiting.rowCount === 1;
  });

  service.child.kill('SIGTERM');
  // The service stops taking requests (refused, or 503 on a connection that was still open) ...
  await untilTrue('the service stops taking requests', async () => {
    let response: Response;
    try {
      response = await fetch(`${service.url}/healthz`);
    } catch {
      return true;
    }
    if (response.status !== 503) return false;
    t.is(((await response.json()) as { error: { code: string } }).error.code, 'unavailable');
    t.is(response.headers.get('cache-control'), 'no-store');
    return true;
  });
  t.is(service.child.exitCode, null, 'it waits for the request in flight');
  // ... and the request in flight completes once the lock goes.
  await blocker.query('COMMIT');
  const answer = await inFlight;
  t.is(answer.status, 201, answer.text);
  t.is(answer.body.externalWorkspaceId, 'drained');

  const outcome = await service.exited;
  t.is(outcome.code, 0, outcome.stderr);
  t.regex(outcome.stdout, /"msg":"switchboard stopped"/);
  const stored = await observer.query('SELECT id FROM workspaces WHERE external_workspace_id = $1', ['drained']);
  t.deepEqual(
    stored.rows.map((row) => row.id),
    [answer.body.id],
  );
});

test('api, engine and operator started together on an empty DATABASE_URL migrate in turn and answer /healthz', async (t) => {
  const database = await freshDatabase({ migrate: false });
  databases.push(database);
  const [port, enginePort, operatorPort] = [await freePort(), await freePort(), await freePort()];
  const env = {
    DATABASE_URL: database.url,
    PORT: String(port),
    ENGINE_HTTP_PORT: String(enginePort),
    OPERATOR_HTTP_PORT: String(operatorPort),
    SWITCHBOARD_SECRET: 'a-secret-of-32-characters-or-more-for-the-test',
  };
  const expected: [string, number][] = [
    ['api', port],
    ['engine', enginePort],
    ['operator', operatorPort],
  ];
  // While another process migrates (here: holds the migration lock), each role waits for it instead of failing.
  const holder = new pg.Client({ connectionString: database.url });
  await holder.connect();
  t.teardown(() => holder.end());
  await holder.query('SELECT pg_advisory_lock($1)', [PG_MIGRATE_LOCK_ID]);
  const starting = Promise.all(expected.map(([role]) => startSwitchboard(role, env)));
  let failed: unknown;
  starting.catch((error: unknown) => {
    failed = error;
  });
  await untilTrue(
    'the three roles wait for the migration lock',
    async () => {
      if (failed !== undefined) throw failed;
      const waiting = await holder.query<{ count: number }>(
        `SELECT count(*)::int AS count FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`,
      );
      return waiting.rows[0]?.count === 3;
      // Three processes starting at once on a busy 2-core machine (the rest of the suite runs beside): a generous bound.
    },
    { timeoutMs: 120_000 },
  );
  await holder.query('SELECT pg_advisory_unlock($1)', [PG_MIGRATE_LOCK_ID]);
  const services = await starting;
  for (const [index, [role, rolePort]] of expected.entries()) {
    const service = services[index] as RunningProcess;
    t.deepEqual(service.started.roles, [role]);
    t.is(service.started.database, 'DATABASE_URL');
    t.is(service.url, `http://127.0.0.1:${rolePort}`, `${role} listens on its own port`);
    t.deepEqual(
      service.startLines.filter((line) => line.level >= 40),
      [],
      `${role}: with SWITCHBOARD_SECRET, no warning at start`,
    );
    const health = await request(service.url, 'GET', '/healthz');
    t.is(health.status, 200, role);
    t.deepEqual(health.body, { status: 'ok' }, role);
    const ready = await request(service.url, 'GET', '/readyz');
    t.is(ready.status, 200, role);
  }
  const outcomes = await Promise.all(services.map((service) => service.stop()));
  for (const [index, outcome] of outcomes.entries())
    t.is(outcome.code, 0, `${expected[index]?.[0]}: ${outcome.stderr}`);
});

test('an invalid ICE_SERVERS exits 2 naming ICE_SERVERS, without echoing the value (it may hold a credential)', async (t) => {
  for (const role of ['api', 'engine']) {
    const outcome = await switchboard([role], {
      DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none',
      ICE_SERVERS: '[{"urls":"turn:turn.example.net","username":"u","credential":"s3cret-turn"',
    });
    t.is(outcome.code, 2, role);
    t.is(outcome.stdout, '', role);
    t.regex(outcome.stderr, /ICE_SERVERS must be a JSON array/, role);
    t.false(outcome.stderr.includes('s3cret-turn'), role);
  }
});

test('an unknown WEBRTC_MEDIA exits 2 naming WEBRTC_MEDIA and its choices', async (t) => {
  const outcome = await switchboard(['engine'], {
    DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none',
    WEBRTC_MEDIA: 'opus',
  });
  t.is(outcome.code, 2);
  t.is(outcome.stdout, '');
  t.regex(outcome.stderr, /WEBRTC_MEDIA must be g711 or libwebrtc, got "opus"/);
});

test('an invalid PORT exits 2 naming PORT', async (t) => {
  const outcome = await switchboard(['api'], {
    DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none',
    PORT: 'abc',
  });
  t.is(outcome.code, 2);
  t.is(outcome.stdout, '');
  t.regex(outcome.stderr, /PORT must be a whole number, got "abc"/);
  t.regex(outcome.stderr, usage);
});
