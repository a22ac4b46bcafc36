/**
 * The queue-agents bench (part of `npm run bench`; alone: `node --import=tsx bench/queue-agents.ts` once `npm run
 * build` made dist/, which the engine runs): issue 15's "Measured". Callers (sipp UAC, the carrier, on loopback)
 * dial a number whose plan queues them in one queue of AGENTS agents, whose SIP desk phones are sipp UAS processes
 * registered as the agents' `sip` devices (bench/queue-agents-setup.ts). The API role runs in this process, the
 * engine role in a process of its own (`switchboard engine`), so its CPU (/proc/<pid>/stat) is the engine's alone.
 *
 * Each phone rings RING_MS (200) after an INVITE, answers, talks TALK_MS (3 s) and hangs up; the queue's wrap-up
 * is WRAP_UP_SECS (0). Callers send no audio; they hear the hold music while they wait, and take the engine's BYE
 * when their agent hangs up.
 *
 * 1. Idle: the engine's CPU over 5 s, phones registered, nobody calling.
 * 2. Light round (the baseline of the latencies): LIGHT_AGENTS agents, 2 × LIGHT_AGENTS callers, all waiting before
 *    the agents sign in (operation 58); each agent takes two calls, one after signing in, one after its first.
 * 3. Full round: CALLERS callers at once (sipp's limit) and CALLS calls in all (when a caller is served another
 *    dials in), every agent offline until CALLERS entries wait; then the engine's CPU over PLATEAU seconds with
 *    CALLERS callers waiting (against the idle figure: CPU per waiting caller); then every agent signs in at once.
 *
 * The latency of an offer: from the agent becoming free to the offer reaching its phone. The end is the INVITE's
 * arrival at the phone (sipp's message trace, its wall clock, µs); the start is the agent's `agent.state_changed`
 * to `available` (its `changedAt`, clock_timestamp() in the transaction that made the agent free: the end of the
 * previous call, as wrap-up 0 has it, or the sign-in); one machine, one clock. Also from the phone's BYE of the
 * previous call (the agent hanging up), and split into available → `offered` (distribution decided, in PostgreSQL)
 * and `offered` → INVITE at the phone (the engine's ring round). Offers whose caller entered the queue after the
 * agent was free are left out (the wait was the caller's); INVITEs are matched to entries by their Call-ID (the
 * device leg's `sip_call_id`).
 *
 * Where the engine's transactions spend their time (bench/database-waits.ts): pg_stat_activity sampled every 50 ms
 * from the sign-in to the round's end.
 *
 * Checks: every entry connected once, no call rung twice (`call.ringing` per call), no call with two device legs,
 * no phone INVITEd while still on a call (its trace) and no two device legs of one device overlapping (the
 * database). Fairness: calls per agent over the full round; the bound is max - min <= 2 (longest idle with calls
 * of one length rotates the agents in turn: one more for those that started the last turn, one for jitter).
 *
 * Target: after-call p99 under 250 ms. A missed target prints NOT MET; the exit code is non-zero when the run broke
 * (setup failed, a process died, calls failed) or a check failed.
 *
 * Other runs: BENCH_AGENTS (50), BENCH_AGENTS_CALLERS (200), BENCH_AGENTS_CALLS (600), BENCH_AGENTS_PER_PHONE (10),
 * BENCH_AGENTS_RING_MS (200), BENCH_AGENTS_TALK_MS (3000), BENCH_AGENTS_TALK_JITTER_MS (0: every call as long; else
 * talk times drawn uniformly from TALK_MS ± it, and no fairness bound), BENCH_AGENTS_WRAP_UP_SECS (0), BENCH_AGENTS_LIGHT (10),
 * BENCH_AGENTS_PLATEAU_SECONDS (10), BENCH_AGENTS_RATE (50 calls/s), BENCH_AGENTS_ENGINE_NODE_ARGS (--cpu-prof).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { runCli } from '../test/helpers/cli.ts';
import { freeUdpPort } from '../test/helpers/free-port.ts';
import { describeWaits, sampleDatabaseWaits } from './database-waits.ts';
import { scratchDatabase } from './database.ts';
import {
  cpuSeconds,
  databaseNow,
  drained,
  type EngineProcess,
  hostCpu,
  hostShare,
  reasons,
  sleep,
} from './engine-process.ts';
import { eventLoopDelay, startApi, startEngine } from './engine-process.ts';
import {
  type BenchAgent,
  type Phone,
  registerAgents,
  setUpQueue,
  startPhones,
  writeScenarioFrom,
} from './queue-agents-setup.ts';
import { phoneMessages } from './queue-figures.ts';
import { type Checks, printReport, readRound, type Round } from './queue-report.ts';
import { failedOf, sippStats, startSipp, uacArgs } from './sipp-runs.ts';

const env = process.env;
const agentCount = Number(env.BENCH_AGENTS ?? 50);
const callers = Number(env.BENCH_AGENTS_CALLERS ?? 200);
const calls = Number(env.BENCH_AGENTS_CALLS ?? 600);
const perPhone = Number(env.BENCH_AGENTS_PER_PHONE ?? 10);
const ringMs = Number(env.BENCH_AGENTS_RING_MS ?? 200);
const talkMs = Number(env.BENCH_AGENTS_TALK_MS ?? 3000);
const jitterMs = Math.min(talkMs, Number(env.BENCH_AGENTS_TALK_JITTER_MS ?? 0));
const wrapUpSecs = Number(env.BENCH_AGENTS_WRAP_UP_SECS ?? 0);
const lightAgents = Math.min(agentCount, Number(env.BENCH_AGENTS_LIGHT ?? 10));
const plateauSeconds = Number(env.BENCH_AGENTS_PLATEAU_SECONDS ?? 10);
const rate = Number(env.BENCH_AGENTS_RATE ?? 50);
const nodeArgs = (env.BENCH_AGENTS_ENGINE_NODE_ARGS ?? '').split(' ').filter((arg) => arg !== '');
const idleSeconds = 5;

const database = await scratchDatabase();
const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-queue-'));
const work = await mkdtemp(path.join(os.tmpdir(), 'sipp-bench-queue-'));
const pool = new pg.Pool({ connectionString: database.url, max: 4 });
pool.on('error', () => {});
const children: ChildProcess[] = [];
let api: Awaited<ReturnType<typeof startApi>> | undefined;
let engine: EngineProcess | undefined;
let phones: Phone[] = [];
let broken = false;

/** CPU seconds of processes by pid (0 for one that is gone). */
const cpuOf = async (pids: number[]) =>
  (await Promise.all(pids.map((pid) => cpuSeconds(pid).catch(() => 0)))).reduce((sum, value) => sum + value, 0);

/** CPU shares (of one core) of the engine, the phones, the callers and the host over `seconds`. */
async function cpuWindow(seconds: number, callerPid?: number) {
  const phonePids = phones.map((phone) => phone.sipp.child.pid as number);
  const start = {
    at: performance.now(),
    engine: await cpuSeconds((engine as EngineProcess).pid),
    phones: await cpuOf(phonePids),
    callers: callerPid === undefined ? 0 : await cpuOf([callerPid]),
    host: await hostCpu(),
  };
  await sleep(seconds * 1000);
  const elapsed = (performance.now() - start.at) / 1000;
  return {
    engine: ((await cpuSeconds((engine as EngineProcess).pid)) - start.engine) / elapsed,
    phones: ((await cpuOf(phonePids)) - start.phones) / elapsed,
    callers: callerPid === undefined ? 0 : ((await cpuOf([callerPid])) - start.callers) / elapsed,
    host: hostShare(start.host, await hostCpu()),
  };
}

const waitingEntries = async (queueId: string) =>
  Number(
    (
      await pool.query<{ count: string }>(
        "SELECT count(*) FROM queue_entries WHERE queue_id = $1 AND state = 'waiting' AND left_at IS NULL",
        [queueId],
      )
    ).rows[0]?.count,
  );

try {
  process.stdout.write(
    `queue-agents bench: Node ${process.version}, ${os.cpus().length} CPUs, ${database.where}; sipp on loopback as ` +
      `the carrier and as the agents' desk phones (${perPhone} agents a phone)\n` +
      `${agentCount} agents, ${callers} callers at once, ${calls} calls in all; phones ring ${ringMs} ms, talk ` +
      `${talkMs} ms${jitterMs > 0 ? ` ± ${jitterMs} ms (uniform)` : ''}; wrap-up ${wrapUpSecs} s; load average at the start ${os.loadavg()[0]?.toFixed(1)}\n\n`,
  );
  const added = await runCli(database.url, ['carriers', 'add', 'sipp', '--address', '127.0.0.1']);
  if (added.code !== 0) throw new Error(`carriers add: ${added.stderr}`);
  api = await startApi(database.url, dataDir);
  const secret = env.SWITCHBOARD_SECRET === '' ? undefined : env.SWITCHBOARD_SECRET;
  const center = await setUpQueue(pool, api.url, { agents: agentCount, perPhone, wrapUpSecs, secret });
  const phonePorts: number[] = [];
  for (let index = 0; index < Math.ceil(agentCount / perPhone); index += 1) phonePorts.push(await freeUdpPort());
  process.stdout.write(`registering ${agentCount} SIP devices with sipp ...\n`);
  await registerAgents({ pool, databaseUrl: database.url, secret, work, agents: center.agents, phonePorts });
  phones = await startPhones({ work, ports: phonePorts, ringMs, talkMs, jitterMs });
  children.push(...phones.map((phone) => phone.sipp.child));
  engine = await startEngine({ databaseUrl: database.url, dataDir, nodeArgs });

  const callerScenario = await writeScenarioFrom(
    fileURLToPath(new URL('./sipp/queue-caller.xml', import.meta.url)),
    work,
    { WAIT_MS: String(1_800_000) },
  );
  const setState = (agents: readonly BenchAgent[], state: 'available' | 'offline') =>
    Promise.all(
      agents.map((agent) =>
        center.call('PUT', `/agents/${agent.memberId}/state`, { state, reason: null }, center.workspaceId),
      ),
    );

  /** One round: `count` calls, `limit` at once, waiting until `limit` wait; then `agents` sign in. */
  async function round(name: string, agents: readonly BenchAgent[], count: number, limit: number, plateau: number) {
    process.stdout.write(`${name}: ${count} calls (${limit} at once) to ${agents.length} agents ...\n`);
    const since = await databaseNow(pool);
    const statsFile = path.join(work, `stats-${name}.csv`);
    const sipp = startSipp(
      [
        '-sf',
        callerScenario,
        '-s',
        center.number.slice(1),
        ...(await uacArgs({ calls: count, rate, limit, statsFile, seconds: 1800 })),
        `127.0.0.1:${engine?.sipPort}`,
      ],
      work,
    );
    children.push(sipp.child);
    const deadline = Date.now() + 60_000;
    for (let queued = await waitingEntries(center.queueId); queued < limit;) {
      if (Date.now() > deadline) throw new Error(`${name}: ${queued} callers waiting after 60 s, not ${limit}`);
      engine?.alive();
      await sleep(200);
      queued = await waitingEntries(center.queueId);
    }
    const waiting = plateau > 0 ? await cpuWindow(plateau, sipp.child.pid) : undefined;
    const busyFrom = { at: performance.now(), cpu: await cpuSeconds((engine as EngineProcess).pid) };
    const sampler = sampleDatabaseWaits(pool, new URL(database.url).pathname.slice(1));
    await eventLoopDelay((engine as EngineProcess).httpPort);
    await setState(agents, 'available');
    const done = await sipp.done;
    const loop = await eventLoopDelay((engine as EngineProcess).httpPort);
    const waits = await sampler.stop();
    const busy =
      (((await cpuSeconds((engine as EngineProcess).pid)) - busyFrom.cpu) * 1000) / (performance.now() - busyFrom.at);
    const stats = await sippStats(statsFile);
    const ended = await drained(pool, [center.number], since);
    await setState(agents, 'offline');
    engine?.alive();
    if (failedOf(stats) > 0 || done.code !== 0) {
      broken = true;
      process.stdout.write(`${name}: sipp exited ${done.code}, ${failedOf(stats)} calls failed\n${done.output}\n`);
    }
    process.stdout.write(`${name}: calls by end reason: ${reasons(ended)}\n`);
    process.stdout.write(
      `${name}: the service's database sessions, from the sign-in to the end\n${describeWaits(waits)}\n` +
        `${name}: the engine's event-loop delay, from the sign-in to the end: mean ${loop.meanMs.toFixed(1)} ms, ` +
        `p99 ${loop.p99Ms.toFixed(1)} ms, max ${loop.maxMs.toFixed(1)} ms\n`,
    );
    return { since, until: await databaseNow(pool), waiting, busyShare: busy, stats, ended };
  }

  process.stdout.write(`idle engine for ${idleSeconds} s ...\n`);
  const idle = await cpuWindow(idleSeconds);
  const light = await round('light', center.agents.slice(0, lightAgents), 2 * lightAgents, 2 * lightAgents, 0);
  const full = await round('full', center.agents, calls, callers, plateauSeconds);

  const messages = (await Promise.all(phones.map((phone) => readFile(phone.messages, 'utf8')))).flatMap(phoneMessages);
  const rounds: Round[] = [];
  for (const [name, run] of [
    ['light', light],
    ['full', full],
  ] as const) {
    rounds.push(await readRound(pool, { name, center, messages, ...run }));
  }
  const checks: Checks = await printReport(pool, {
    center,
    messages,
    rounds,
    idle,
    callers,
    targetMs: 250,
    fairnessBound: jitterMs > 0 ? undefined : 2,
  });
  if (!checks.ok) broken = true;
  if (engine.lines() > 0) process.stdout.write(`engine log (last lines):\n${engine.log.join('\n')}\n`);
} catch (error) {
  broken = true;
  process.stdout.write(`queue-agents bench failed: ${(error as Error).stack ?? String(error)}\n`);
  if (engine !== undefined) process.stdout.write(`engine log (last lines):\n${engine.log.join('\n')}\n`);
} finally {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await engine?.stop();
  await api?.close();
  await pool.end();
  await database.close();
  await rm(dataDir, { recursive: true, force: true });
  await rm(work, { recursive: true, force: true });
}
process.exit(broken ? 1 : 0);
