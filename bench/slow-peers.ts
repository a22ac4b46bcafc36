/**
 * The slow-peers bench (part of `npm run bench` as `slow-peers`; alone: `node --import=tsx bench/slow-peers.ts`):
 * what ten MMS sends of one user, their media on a host that takes the connection and never answers, do to everyone
 * else (docs/foundation.md, "Database"). The API and the engine run in this process, as `switchboard all` runs them,
 * on one pool of DATABASE_POOL_SIZE (10) connections. Measured idle, then while the ten sends wait (each fetch waits
 * up to 10 s; they are started again as they end):
 *
 * - another application's `GET /api/v1/workspaces`: BENCH_SLOW_READS (200) requests one after the other, p50 and p99;
 * - a carrier's calls: BENCH_SLOW_CALLS (20) sipp calls, one at a time, to a number whose plan hangs up, and sipp's
 *   mean time from the INVITE to its 200.
 *
 * Target: both within 2x of idle (a ratio measured in the same run).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startRoles } from '../app/roles.ts';
import { addCarrier } from '../core/carriers/carriers.ts';
import { loadConfig } from '../core/config.ts';
import { createApplication } from '../core/identity/applications.ts';
import { defaultKeyScopes } from '../core/scopes.ts';
import { httpsServer } from '../test/helpers/https-server.ts';
import { newNumber, textingSetup } from '../test/helpers/messages.ts';
import { writeScenario } from '../test/helpers/sipp.ts';
import { scratchDatabase } from './database.ts';
import { apiCaller, numberRunning, percentile } from './engine-process.ts';
import { runUac } from './sipp-runs.ts';

const reads = Number(process.env.BENCH_SLOW_READS ?? 200);
const calls = Number(process.env.BENCH_SLOW_CALLS ?? 20);
const stuckSends = 10;
const targetRatio = 2;

const database = await scratchDatabase();
const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-slow-'));
const pool = new pg.Pool({ connectionString: database.url, max: 2 });
pool.on('error', () => {});
const held: ServerResponse[] = [];
const silent = await httpsServer((_request, _body, response) => void held.push(response));
let stopping = false;

const service = await startRoles(
  loadConfig({
    ...process.env,
    DATABASE_URL: database.url,
    PORT: '0',
    HOST: '127.0.0.1',
    SIP_PORT: '0',
    LOG_LEVEL: 'error',
    SWITCHBOARD_DATA_DIR: dataDir,
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  }),
  new Set(['api', 'engine']),
);

/** An application with a key, and a workspace of its own. */
async function tenant(name: string) {
  const applicationId = `${name}-${randomUUID().slice(0, 8)}`;
  const { apiKey } = await createApplication(pool, applicationId, defaultKeyScopes);
  const call = apiCaller(service.url, apiKey);
  const workspace = await call<{ id: string; externalWorkspaceId: string }>('POST', '/workspaces', {
    externalWorkspaceId: `${name}-${randomUUID()}`,
    name,
    timezone: 'UTC',
  });
  return { applicationId, apiKey, call, workspace };
}

/** `count` reads of another application's workspaces, one after the other: their times in ms. */
async function readTimes(apiKey: string, count: number): Promise<number[]> {
  const times: number[] = [];
  for (let index = 0; index < count; index += 1) {
    const started = performance.now();
    const response = await fetch(`${service.url}/api/v1/workspaces`, {
      headers: { authorization: `Bearer ${apiKey}` },
    });
    await response.arrayBuffer();
    if (!response.ok) throw new Error(`GET /workspaces: ${response.status}`);
    times.push(performance.now() - started);
  }
  return times;
}

/** sipp's mean INVITE-to-200 over `count` calls to `e164`, one at a time. */
async function answerMs(work: string, e164: string): Promise<number> {
  const scenario = await writeScenario('answered', work);
  const run = await runUac({
    work,
    args: ['-sf', scenario, '-s', e164.slice(1)],
    target: `127.0.0.1:${service.sipPort}`,
    calls,
    rate: 5,
    limit: 1,
  });
  if (run.successful !== calls) process.stdout.write(`${calls - run.successful} of ${calls} calls failed\n`);
  return run.responseMs;
}

const work = await mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-slow-sipp-'));
try {
  // sipp sends from 127.0.0.1: the carrier (no account, so no password to seal).
  await addCarrier(pool, randomBytes(32), { name: 'sipp', address: '127.0.0.1' });
  const texting = await tenant('texting');
  const { number } = await textingSetup(pool, {
    capabilities: ['voice', 'sms', 'mms'],
    approved: true,
    mmsUrl: 'https://carrier.example/mms',
    workspace: {
      id: texting.workspace.id,
      applicationId: texting.applicationId,
      externalWorkspaceId: texting.workspace.externalWorkspaceId,
    },
  });
  await texting.call('POST', '/users', { externalUserId: 'alice', displayName: 'Alice' }, texting.workspace.id);
  const session = await texting.call<{ token: string }>('POST', '/sessions', {
    externalWorkspaceId: texting.workspace.externalWorkspaceId,
    externalUserId: 'alice',
    scopes: ['messages:*'],
  });
  const other = await tenant('other');
  const e164 = await numberRunning(pool, other.call, other.workspace.id, '628', {
    entry: 'bye',
    steps: { bye: { type: 'hangup', message: null } },
  });

  process.stdout.write(
    `slow-peers bench: Node ${process.version}, ${os.cpus().length} CPUs, ${database.where}; ` +
      `${reads} reads and ${calls} calls idle, then beside ${stuckSends} MMS sends waiting on a silent media host\n`,
  );
  const idleReads = await readTimes(other.apiKey, reads);
  const idleAnswer = await answerMs(work, e164);

  // Ten sends waiting at all times: each is sent again as it ends (its fetch timing out after 10 s).
  const send = async (): Promise<void> => {
    while (!stopping) {
      await fetch(`${service.url}/api/v1/messages`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${session.token}`,
          'content-type': 'application/json',
          'idempotency-key': randomUUID(),
        },
        body: JSON.stringify({
          from: number.e164,
          to: newNumber(),
          text: 'photo',
          mediaUrls: [silent.url(`/${randomUUID()}.png`)],
        }),
      }).then((response) => response.arrayBuffer());
    }
  };
  const senders = Array.from({ length: stuckSends }, () => send());
  while (held.filter((response) => !response.destroyed).length < stuckSends) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const busyReads = await readTimes(other.apiKey, reads);
  const busyAnswer = await answerMs(work, e164);
  stopping = true;
  for (const response of held) response.destroy();
  await Promise.all(senders);

  const p = (times: number[], q: number) => percentile(times, q).toFixed(1);
  const readRatio = percentile(busyReads, 99) / percentile(idleReads, 99);
  const answerRatio = busyAnswer / idleAnswer;
  const verdict = (ratio: number) => (ratio <= targetRatio ? 'MET' : 'NOT MET');
  process.stdout.write(
    `GET /workspaces (another application): idle p50 ${p(idleReads, 50)} ms, p99 ${p(idleReads, 99)} ms; ` +
      `beside the sends p50 ${p(busyReads, 50)} ms, p99 ${p(busyReads, 99)} ms\n` +
      `INVITE to 200 (another workspace's number, mean of ${calls}): idle ${idleAnswer.toFixed(1)} ms; ` +
      `beside the sends ${busyAnswer.toFixed(1)} ms\n` +
      `target: within ${targetRatio}x of idle: reads p99 ${readRatio.toFixed(2)}x ${verdict(readRatio)}, ` +
      `INVITE answers ${answerRatio.toFixed(2)}x ${verdict(answerRatio)}\n`,
  );
} finally {
  stopping = true;
  for (const response of held) response.destroy();
  await service.close();
  await pool.end();
  await silent.close();
  await database.close();
  await rm(dataDir, { recursive: true, force: true });
  await rm(work, { recursive: true, force: true });
}
