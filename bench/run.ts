/**
 * `npm run bench`: requests per second and latency of the real service against a bare fastify route, measured in
 * the same run on the same machine, so the ratios say what our hooks, authentication and database work cost.
 *
 * The database: a scratch database made on the server of DATABASE_URL when it is set (dropped at the end), and
 * otherwise an embedded PostgreSQL started for the run in a temporary folder. The servers run in this process; the
 * load comes from autocannon in a child process (bench/load.ts) so it never competes for this event loop.
 *
 * Target: an authenticated read reaches at least 40% of the bare route's requests per second. The live figures
 * (operation 81) are measured on a contact center of 20 queues, 200 agents and 500 waiting callers with two days of
 * history (bench/contact-center.ts), against the same bare route.
 * Then the events bench (bench/events.ts): events committed and delivered end to end, and their delivery delay; the
 * routing plan validation bench (bench/plans.ts); the calls bench (bench/calls.ts); the phones bench (bench/phones.ts:
 * concurrent browser calls beside carrier-only ones, offer and withdrawal latency); the queue-agents bench
 * (bench/queue-agents.ts: 200 callers in one queue of 50 agents on sipp desk phones, the time from an agent becoming
 * free to the offer reaching its phone, calls per agent, CPU per waiting caller); the messages bench
 * (bench/messages.ts: texts acknowledged by a test SMSC per second end to end against the same SMSC fed directly).
 * Each runs in a process of its own.
 *
 * `BENCH_ONLY=<parts>` (comma-separated) runs only those parts: `http` (the routes above), `events`, `plans`, `calls`,
 * `phones`, `queue-agents`, `messages`, `slow-peers` (bench/slow-peers.ts: another application's reads and calls
 * beside ten MMS sends waiting on a silent media host); e.g. `BENCH_ONLY=events npm run bench`.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import Fastify from 'fastify';
import pg from 'pg';
import { loadConfig } from '../core/config.ts';
import { createApplication } from '../core/identity/applications.ts';
import { startRoles } from '../app/roles.ts';
import { defaultKeyScopes } from '../core/scopes.ts';
import { seedContactCenter, shape } from './contact-center.ts';
import { scratchDatabase } from './database.ts';
import type { Figures, Measurement } from './load.ts';

const connections = Number(process.env.BENCH_CONNECTIONS ?? 10);
const warmupSeconds = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const seconds = Number(process.env.BENCH_SECONDS ?? 6);
const target = 0.4;

/** The parts of the bench to run (BENCH_ONLY, comma-separated), by default all of them in this order. */
const allParts = ['http', 'events', 'plans', 'calls', 'phones', 'queue-agents', 'messages', 'slow-peers'];
const only = (process.env.BENCH_ONLY ?? '')
  .split(',')
  .map((part) => part.trim())
  .filter((part) => part !== '');
const unknownParts = only.filter((part) => !allParts.includes(part));
if (unknownParts.length > 0) {
  process.stderr.write(`BENCH_ONLY: unknown part ${unknownParts.join(', ')}; the parts are ${allParts.join(', ')}\n`);
  process.exit(2);
}
const parts = new Set(only.length > 0 ? only : allParts);

const loadScript = fileURLToPath(new URL('./load.ts', import.meta.url));

/** Runs one measurement in a child process and returns its figures. */
async function measure(measurement: Omit<Measurement, 'connections' | 'warmupSeconds' | 'seconds'>): Promise<Figures> {
  const spec: Measurement = { ...measurement, connections, warmupSeconds, seconds };
  const child = spawn(process.execPath, ['--import=tsx', loadScript, JSON.stringify(spec)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  if (code !== 0) throw new Error(`the load generator failed (exit ${code})`);
  return JSON.parse(stdout) as Figures;
}

async function expectStatus(response: Response, status: number, what: string) {
  const text = await response.text();
  if (response.status !== status) throw new Error(`${what}: ${response.status} ${text}`);
  return JSON.parse(text);
}

function row(cells: string[], widths: number[]): string {
  return `| ${cells.map((cell, index) => (index === 0 ? cell.padEnd(widths[index] ?? 0) : cell.padStart(widths[index] ?? 0))).join(' | ')} |`;
}

/** The routes against the bare baselines; resolves with whether any request failed. */
async function measureRoutes(): Promise<boolean> {
  let failed = false;
  const database = await scratchDatabase();
  const bare = Fastify();
  bare.get('/bare', async () => ({ status: 'ok' }));
  // A second baseline: a bare route that makes the same one-row read, to tell what a database round trip costs here.
  const barePool = new pg.Pool({ connectionString: database.url, max: 10 });
  bare.get<{ Params: { id: string } }>('/bare/workspaces/:id', async (request) => {
    const result = await barePool.query({
      name: 'bare-read',
      text: 'SELECT id, external_workspace_id, name, timezone, destination_policy, limits, created_at, updated_at FROM workspaces WHERE id = $1',
      values: [request.params.id],
    });
    return result.rows[0];
  });
  const service = await startRoles(
    loadConfig({
      ...process.env,
      DATABASE_URL: database.url,
      PORT: '0',
      SIP_PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
    }),
    new Set(['api', 'engine', 'operator']),
  );
  const pool = new pg.Pool({ connectionString: database.url, max: 2 });
  try {
    const bareUrl = await bare.listen({ port: 0, host: '127.0.0.1' });

    // An application, a workspace and a user, made the way a backend would.
    const { apiKey } = await createApplication(pool, 'bench', defaultKeyScopes);
    const auth = { authorization: `Bearer ${apiKey}` };
    const json = { ...auth, 'content-type': 'application/json' };
    const workspace = await expectStatus(
      await fetch(`${service.url}/api/v1/workspaces`, {
        method: 'POST',
        headers: { ...json, 'idempotency-key': randomUUID() },
        body: JSON.stringify({ externalWorkspaceId: 'bench', name: 'Bench', timezone: 'Europe/Paris' }),
      }),
      201,
      'create workspace',
    );
    await expectStatus(
      await fetch(`${service.url}/api/v1/users`, {
        method: 'POST',
        headers: { ...json, 'idempotency-key': randomUUID(), 'x-service-workspace-id': workspace.id },
        body: JSON.stringify({ externalUserId: 'alice', displayName: 'Alice' }),
      }),
      201,
      'create user',
    );
    const sessionBody = JSON.stringify({ externalWorkspaceId: 'bench', externalUserId: 'alice', scopes: ['calls:*'] });
    await expectStatus(
      await fetch(`${service.url}/api/v1/sessions`, {
        method: 'POST',
        headers: { ...json, 'idempotency-key': randomUUID() },
        body: sessionBody,
      }),
      201,
      'create session',
    );

    const seedStart = Date.now();
    await seedContactCenter(pool, 'bench', workspace.id);
    const seeded = `${shape.queues} queues, ${shape.queues * shape.agentsPerQueue} agents, ${shape.waiting} waiting`;
    process.stdout.write(`contact center seeded (${seeded}) in ${((Date.now() - seedStart) / 1000).toFixed(1)} s\n`);

    const runs: { name: string; figures: Figures }[] = [];
    const plan: { name: string; measurement: Omit<Measurement, 'connections' | 'warmupSeconds' | 'seconds'> }[] = [
      {
        name: 'GET /bare (fresh Fastify(), no hooks)',
        measurement: { url: bareUrl, method: 'GET', path: '/bare', headers: {} },
      },
      {
        name: 'GET /bare/workspaces/{id} (bare route, same SQL read)',
        measurement: { url: bareUrl, method: 'GET', path: `/bare/workspaces/${workspace.id}`, headers: {} },
      },
      {
        // Not one of the targets: our HTTP shell (hooks, metrics) without credentials or database, to tell the costs apart.
        name: 'GET /healthz (our HTTP shell, no database)',
        measurement: { url: service.url, method: 'GET', path: '/healthz', headers: {} },
      },
      {
        name: 'GET /api/v1/workspaces/{id} (application key)',
        measurement: { url: service.url, method: 'GET', path: `/api/v1/workspaces/${workspace.id}`, headers: auth },
      },
      {
        name: `GET /api/v1/metrics/realtime (${seeded})`,
        measurement: {
          url: service.url,
          method: 'GET',
          path: '/api/v1/metrics/realtime',
          headers: { ...auth, 'x-service-workspace-id': workspace.id },
        },
      },
      {
        name: 'POST /api/v1/sessions (new idempotency-key each)',
        measurement: {
          url: service.url,
          method: 'POST',
          path: '/api/v1/sessions',
          headers: json,
          body: sessionBody,
          uniqueIdempotencyKey: true,
        },
      },
    ];
    process.stdout.write(
      `switchboard bench: Node ${process.version}, ${os.cpus().length} CPUs, ${database.where}\n` +
        `autocannon in a child process: ${connections} connections, ${warmupSeconds} s warm-up + ${seconds} s measured per route\n\n`,
    );
    for (const { name, measurement } of plan) {
      process.stdout.write(`measuring ${name} ...\n`);
      runs.push({ name, figures: await measure(measurement) });
    }

    const baseline = runs[0]?.figures.requestsPerSecond ?? 0;
    const header = ['route', 'req/s', 'vs bare', 'p50 ms', 'p99 ms', 'non-2xx', 'errors'];
    const lines = runs.map(({ name, figures }) => [
      name,
      figures.requestsPerSecond.toFixed(0),
      `${((figures.requestsPerSecond / baseline) * 100).toFixed(1)}%`,
      String(figures.p50),
      String(figures.p99),
      String(figures.non2xx),
      String(figures.errors),
    ]);
    const widths = header.map((cell, index) => Math.max(cell.length, ...lines.map((line) => line[index]?.length ?? 0)));
    process.stdout.write(
      `\n${[
        row(header, widths),
        `|${widths.map((width) => '-'.repeat(width + 2)).join('|')}|`,
        ...lines.map((line) => row(line, widths)),
      ].join('\n')}\n\n`,
    );

    const read = runs.find(({ name }) => name.startsWith('GET /api/v1/workspaces'))?.figures.requestsPerSecond ?? 0;
    const ratio = read / baseline;
    const figuresRate =
      runs.find(({ name }) => name.startsWith('GET /api/v1/metrics/realtime'))?.figures.requestsPerSecond ?? 0;
    const bareRead = runs.find(({ name }) => name.startsWith('GET /bare/workspaces'))?.figures.requestsPerSecond ?? 0;
    process.stdout.write(
      `target: authenticated read >= ${target * 100}% of bare: ${(ratio * 100).toFixed(1)}% ${ratio >= target ? 'MET' : 'NOT MET'}\n` +
        `authenticated read vs the bare route making the same SQL read: ${((read / bareRead) * 100).toFixed(1)}%\n` +
        `live figures (operation 81) vs bare: ${((figuresRate / baseline) * 100).toFixed(1)}%, ` +
        `vs the authenticated one-row read: ${((figuresRate / read) * 100).toFixed(1)}%\n`,
    );
    for (const { name, figures } of runs) {
      if (figures.non2xx > 0 || figures.errors > 0) {
        failed = true;
        process.stdout.write(`${name}: failed requests, status codes ${JSON.stringify(figures.statusCodes)}\n`);
      }
    }
  } finally {
    await pool.end();
    await bare.close();
    await barePool.end();
    await service.close();
    await database.close();
  }
  return failed;
}

/** Runs another bench (a file beside this one) in a process of its own; resolves with its exit code. */
function runBench(file: string, env: NodeJS.ProcessEnv = process.env): Promise<number | null> {
  process.stdout.write('\n');
  const child = spawn(process.execPath, ['--import=tsx', fileURLToPath(new URL(file, import.meta.url))], {
    stdio: 'inherit',
    env,
  });
  return new Promise((resolve) => child.once('close', resolve));
}

const failed = parts.has('http') ? await measureRoutes() : false;
const codes: (number | null)[] = [];
// The events bench trusts the test certificate of its HTTPS receiver.
if (parts.has('events')) {
  codes.push(
    await runBench('./events.ts', {
      ...process.env,
      NODE_EXTRA_CA_CERTS: fileURLToPath(new URL('../test/fixtures/tls/ca.pem', import.meta.url)),
    }),
  );
}
for (const part of ['plans', 'calls', 'phones', 'queue-agents', 'messages']) {
  if (parts.has(part)) codes.push(await runBench(`./${part}.ts`));
}
// The slow-peers bench's silent media host has the test certificate too.
if (parts.has('slow-peers')) {
  codes.push(
    await runBench('./slow-peers.ts', {
      ...process.env,
      NODE_EXTRA_CA_CERTS: fileURLToPath(new URL('../test/fixtures/tls/ca.pem', import.meta.url)),
    }),
  );
}
process.exit(failed || codes.some((code) => code !== 0) ? 1 : 0);
