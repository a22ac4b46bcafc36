/**
 * The calls bench (part of `npm run bench`; alone: `node --import=tsx bench/calls.ts`), with sipp as the carrier on
 * loopback:
 *
 * 1. Call rate. A sipp UAC offers a fixed load (BENCH_CALLS_RATE calls/s, BENCH_CALLS_TOTAL calls) to sipp's own
 *    UAS (`-sn uas -rtp_echo`, the baseline), then the same load to the engine, whose number runs a one-step
 *    `hangup` plan (test/sipp/answered.xml: INVITE, 200, ACK, the engine's BYE, 200). Achieved calls/s come from
 *    sipp's statistics file (successful calls over the run's wall time); then the engine again at the target rate.
 * 2. Concurrent calls with media. BENCH_CALLS_CONCURRENT calls to a number running a `voicemail` step, each held
 *    BENCH_CALLS_HOLD_SECONDS while sipp plays /usr/share/sip-tester/g711a.pcap to the engine over and over
 *    (test/sipp/caller-hangs-up.xml); the engine records it. The engine process's CPU (utime + stime from
 *    /proc/<pid>/stat) and RSS (/proc/<pid>/status) are read idle before the run and over the plateau.
 *
 * The API role runs in this process (only to set up: application, workspace, numbers, published plans); the engine
 * role runs in a process of its own, started the way users start it (`switchboard engine`).
 *
 * Targets on 2 cores: 100 calls/s; 300 concurrent calls with media. A missed target prints NOT MET; the exit code
 * is non-zero only when the run itself broke (the engine died, a phase completed no call, setup failed).
 *
 * Shorter or other runs: BENCH_CALLS_RATE (200), BENCH_CALLS_TOTAL (10 s of the rate), BENCH_CALLS_LIMIT (calls at
 * once, 1000), BENCH_CALLS_TARGET_SECONDS (10), BENCH_CALLS_CONCURRENT (300), BENCH_CALLS_HOLD_SECONDS (30),
 * BENCH_CALLS_RAMP_RATE (calls/s while the concurrent calls start), BENCH_CALLS_ENGINE_NODE_ARGS (e.g. --cpu-prof).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createApplication } from '../core/identity/applications.ts';
import { defaultKeyScopes } from '../core/scopes.ts';
import { runCli } from '../test/helpers/cli.ts';
import { freePort } from '../test/helpers/free-port.ts';
import { writeScenario } from '../test/helpers/sipp.ts';
import { scratchDatabase } from './database.ts';
import {
  apiCaller,
  cpuSeconds,
  databaseNow,
  drained,
  type EngineProcess,
  hostCpu,
  hostShare,
  numberRunning,
  percent,
  reasons,
  sleep,
  startEngine,
  startApi,
} from './engine-process.ts';
import { holdCalls } from './held-calls.ts';
import { failedOf, mediaFor, runUac, type SippStats, startSipp } from './sipp-runs.ts';

const rate = Number(process.env.BENCH_CALLS_RATE ?? 200);
const total = Number(process.env.BENCH_CALLS_TOTAL ?? rate * 10);
const rateLimit = Number(process.env.BENCH_CALLS_LIMIT ?? 1000);
const concurrent = Number(process.env.BENCH_CALLS_CONCURRENT ?? 300);
const holdSeconds = Number(process.env.BENCH_CALLS_HOLD_SECONDS ?? 30);
// The ramp takes at most a third of the hold time, so the plateau (all calls up) lasts.
const rampRate = Number(process.env.BENCH_CALLS_RAMP_RATE ?? Math.max(50, Math.ceil((3 * concurrent) / holdSeconds)));
const targetRate = 100;
const targetConcurrent = 300;
const targetRunSeconds = Number(process.env.BENCH_CALLS_TARGET_SECONDS ?? 10);

const database = await scratchDatabase();
const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-calls-'));
const pool = new pg.Pool({ connectionString: database.url, max: 4 });
pool.on('error', () => {});
const children: ChildProcess[] = [];
let api: Awaited<ReturnType<typeof startApi>> | undefined;
let engine: EngineProcess | undefined;
let workDir: string | undefined;

try {
  // sipp sends from 127.0.0.1: the carrier, added the way an admin does, before the engine loads its list.
  const added = await runCli(database.url, ['carriers', 'add', 'sipp', '--address', '127.0.0.1']);
  if (added.code !== 0) throw new Error(`carriers add: ${added.stderr}`);

  api = await startApi(database.url, dataDir);
  // BENCH_CALLS_ENGINE_NODE_ARGS: extra node options for the engine process (e.g. --cpu-prof --cpu-prof-dir=/tmp/x).
  const nodeArgs = (process.env.BENCH_CALLS_ENGINE_NODE_ARGS ?? '').split(' ').filter((arg) => arg !== '');
  engine = await startEngine({ databaseUrl: database.url, dataDir, nodeArgs });
  const { pid: enginePid, sipPort, httpPort: enginePort } = engine;
  const engineAlive = () => engine?.alive();

  // An application and a workspace made the way a backend would; numbers claimed; plans published and assigned.
  const { apiKey } = await createApplication(pool, 'bench', defaultKeyScopes);
  const call = apiCaller(api.url, apiKey);
  const workspace = await call('POST', '/workspaces', {
    externalWorkspaceId: 'bench',
    name: 'Bench',
    timezone: 'Europe/Paris',
  });
  const hangupNumber = await numberRunning(pool, call, workspace.id, '628', {
    entry: 'bye',
    steps: { bye: { type: 'hangup', message: null } },
  });
  const voicemailNumber = await numberRunning(pool, call, workspace.id, '629', {
    entry: 'vm',
    steps: { vm: { type: 'voicemail', greeting: { tts: 'Hi.' } } },
  });

  /** The engine's RTP packet counters (/metrics; counted as each call ends). */
  const rtpPackets = async () => {
    const metrics = await fetch(`http://127.0.0.1:${enginePort}/metrics`).then((response) => response.text());
    const metric = (pattern: RegExp) => Number(pattern.exec(metrics)?.[1] ?? 0);
    return {
      in: metric(/^switchboard_rtp_packets_total\{direction="in"\} (\d+)/m),
      out: metric(/^switchboard_rtp_packets_total\{direction="out"\} (\d+)/m),
      lost: metric(/^switchboard_rtp_packets_lost_total (\d+)/m),
    };
  };
  const now = () => databaseNow(pool);
  const drainedOf = (e164: string, since: Date) => drained(pool, [e164], since);

  const work = await mkdtemp(path.join(os.tmpdir(), 'sipp-bench-'));
  workDir = work;
  const answererCpu = (pid: number | undefined) => (pid === undefined ? 0 : cpuSeconds(pid).catch(() => 0));
  /** One UAC run; with `answerer`, that process's CPU share over the run (and the host's). */
  const uacRun = async (options: {
    scenarioArgs: string[];
    calls: number;
    callRate: number;
    limit: number;
    answerer?: number;
  }) => {
    const target = options.scenarioArgs.at(-1) ?? '';
    const began = { at: performance.now(), cpu: await answererCpu(options.answerer), host: await hostCpu() };
    const run = await runUac({
      work,
      args: options.scenarioArgs.slice(0, -1),
      target,
      calls: options.calls,
      rate: options.callRate,
      limit: options.limit,
      started: (sipp) => children.push(sipp.child),
    });
    const wall = (performance.now() - began.at) / 1000;
    const cpu = ((await answererCpu(options.answerer)) - began.cpu) / wall;
    return { ...run, cpu, hostShare: hostShare(began.host, await hostCpu()) };
  };

  process.stdout.write(
    `calls bench: Node ${process.version}, ${os.cpus().length} CPUs, ${database.where}; sipp on loopback as the carrier\n` +
      `call rate: ${rate} calls/s offered, ${total} calls per run (at most ${rateLimit} at once); ` +
      `media: ${concurrent} calls held ${holdSeconds} s (started at ${rampRate}/s); ` +
      `load average at the start ${os.loadavg()[0]?.toFixed(1)}\n\n`,
  );

  // 1. Baseline: sipp's own UAS answering sipp's own UAC, same load, same machine, same run.
  process.stdout.write('measuring sipp UAC -> sipp UAS ...\n');
  const uasPort = await freePort();
  const uas = startSipp(
    [
      '-sn',
      'uas',
      '-i',
      '127.0.0.1',
      '-p',
      String(uasPort),
      '-mi',
      '127.0.0.1',
      '-mp',
      String(await freePort()),
      '-rtp_echo',
      '-nostdin',
    ],
    work,
  );
  children.push(uas.child);
  await sleep(500);
  if (uas.child.exitCode !== null) throw new Error(`sipp UAS exited: ${(await uas.done).output}`);
  const baseline = await uacRun({
    scenarioArgs: ['-sn', 'uac', `127.0.0.1:${uasPort}`],
    calls: total,
    callRate: rate,
    limit: rateLimit,
    answerer: uas.child.pid,
  });
  uas.child.kill('SIGTERM');
  await uas.done;
  if (baseline.successful === 0) throw new Error(`the baseline completed no call: ${baseline.output}`);

  // 2. The engine, a one-step hangup plan: a short warm-up, the same offered load, then the target rate.
  const answered = await writeScenario('answered', work, { MEDIA: '' });
  const engineTarget = ['-sf', answered, '-s', hangupNumber.slice(1), `127.0.0.1:${sipPort}`];
  process.stdout.write('warming up the engine ...\n');
  let since = await now();
  await uacRun({ scenarioArgs: engineTarget, calls: 100, callRate: 50, limit: 100 });
  await drainedOf(hangupNumber, since);
  engineAlive();
  process.stdout.write(`measuring sipp UAC -> engine (hangup plan) at ${rate} calls/s ...\n`);
  since = await now();
  const full = await uacRun({
    scenarioArgs: engineTarget,
    calls: total,
    callRate: rate,
    limit: rateLimit,
    answerer: enginePid,
  });
  const fullReasons = await drainedOf(hangupNumber, since);
  engineAlive();
  if (full.successful === 0) throw new Error(`the engine completed no call: ${full.output}`);
  process.stdout.write(`measuring sipp UAC -> engine (hangup plan) at ${targetRate} calls/s ...\n`);
  since = await now();
  const paced = await uacRun({
    scenarioArgs: engineTarget,
    calls: targetRate * targetRunSeconds,
    callRate: targetRate,
    limit: rateLimit,
    answerer: enginePid,
  });
  const pacedReasons = await drainedOf(hangupNumber, since);
  engineAlive();

  // 3. Concurrent calls with media: voicemail records what sipp plays (the pcap again and again) for the hold time.
  const media = await mediaFor(holdSeconds * 1000);
  const held = await writeScenario('caller-hangs-up', work, { MEDIA: media.MEDIA, HOLD_MS: media.HOLD_MS });
  process.stdout.write(`measuring ${concurrent} concurrent calls with media for ${holdSeconds} s ...\n`);
  // A greeting made once (TTS, then cached) so the measured calls do not wait for it.
  since = await now();
  await uacRun({
    scenarioArgs: [
      '-sf',
      await writeScenario('caller-hangs-up', work, { HOLD_MS: '1500' }),
      '-s',
      voicemailNumber.slice(1),
      `127.0.0.1:${sipPort}`,
    ],
    calls: 1,
    callRate: 1,
    limit: 1,
  });
  await drainedOf(voicemailNumber, since);
  await pool.query('DELETE FROM recordings');
  const rtpBefore = await rtpPackets();
  const plateau = await holdCalls({
    pool,
    engine,
    work,
    children,
    scenarioArgs: ['-sf', held, '-s', voicemailNumber.slice(1)],
    numbers: [voicemailNumber],
    count: concurrent,
    rampRate,
    holdSeconds,
    up: 'answered_at',
  });
  const { lowest, peak, plateauSeconds, idleShare, engineShare, perCallCpu, rssBefore, rssPeak, perCallMb } = plateau;
  const { sippShare, dropped } = plateau;
  const recordings = await pool.query<{ count: string; ms: string | null }>(
    "SELECT count(*), sum(duration_ms) AS ms FROM recordings WHERE kind = 'voicemail'",
  );
  const recorded = Number(recordings.rows[0]?.count);
  const recordedSeconds = Number(recordings.rows[0]?.ms ?? 0) / 1000;
  const rtpAfter = await rtpPackets();
  const rtpIn = rtpAfter.in - rtpBefore.in;
  const rtpOut = rtpAfter.out - rtpBefore.out;
  const rtpLost = rtpAfter.lost - rtpBefore.lost;

  const rateRow = (name: string, run: SippStats & { cpu: number; hostShare: number }, offered: number) =>
    `| ${name} | ${offered} | ${run.callsPerSecond.toFixed(1)} | ${percent(run.callsPerSecond / baseline.callsPerSecond)} | ` +
    `${run.successful} | ${failedOf(run)} | ${run.retransmissions} | ${run.responseMs < 1 ? '<1' : run.responseMs.toFixed(0)} | ${percent(run.cpu)} | ${percent(run.hostShare)} |`;
  const lines = [
    '',
    '| call rate | offered/s | completed/s | vs sipp UAS | completed | failed | retransmissions | INVITE to 200, mean ms | answerer CPU (one core) | host CPU |',
    '|---|---|---|---|---|---|---|---|---|---|',
    rateRow('sipp UAC -> sipp UAS (`-sn uas -rtp_echo`), baseline', baseline, rate),
    rateRow('sipp UAC -> engine, one-step hangup plan', full, rate),
    rateRow('sipp UAC -> engine, one-step hangup plan, target rate', paced, targetRate),
    '',
    `engine calls by end reason: at ${rate}/s: ${reasons(fullReasons)}; at ${targetRate}/s: ${reasons(pacedReasons)}`,
    '',
    '| concurrent calls with media | value |',
    '|---|---|',
    `| calls up during the plateau (lowest / peak, of ${concurrent}) | ${lowest} / ${peak} |`,
    `| sipp: completed / failed | ${plateau.media.successful} / ${failedOf(plateau.media)} |`,
    `| engine CPU, idle -> plateau (${plateauSeconds.toFixed(0)} s) | ${percent(idleShare)} -> ${percent(engineShare)} of one core |`,
    `| engine CPU per call | ${(perCallCpu * 100).toFixed(2)}% of one core |`,
    `| engine RSS, before -> plateau peak | ${rssBefore.toFixed(0)} MB -> ${rssPeak.toFixed(0)} MB (${perCallMb.toFixed(2)} MB per call) |`,
    `| sipp CPU during the plateau | ${percent(sippShare)} of one core |`,
    `| host CPU busy during the plateau | ${percent(plateau.hostShare)} of ${os.cpus().length} cores |`,
    `| audio recorded by the engine | ${recorded} recordings, ${(recordedSeconds / Math.max(1, recorded)).toFixed(1)} s each on average (held ${holdSeconds} s, after the greeting and beep) |`,
    `| sipp sent (pcap of ${media.pcap.packets} packets, ${(media.pcap.ms / 1000).toFixed(2)} s, played ${media.loops}x per call) | ~${media.pcap.packets * media.loops * plateau.media.successful} RTP packets |`,
    `| RTP packets at the engine (/metrics): in / out / lost | ${rtpIn} / ${rtpOut} / ${rtpLost} |`,
    `| datagrams dropped for a full receive buffer at the plateau's end: ${dropped.rtpSockets} RTP sockets / SIP socket | ${dropped.rtp} / ${dropped.sip} |`,
    '',
    `engine calls by end reason: ${reasons(plateau.reasons)}; engine log lines (warn and above): ${engine.lines()}`,
    '',
    `target: ${targetRate} calls/s: ${full.callsPerSecond.toFixed(1)}/s at ${rate}/s offered, ` +
      `${paced.callsPerSecond.toFixed(1)}/s with ${failedOf(paced)} failed at ${targetRate}/s offered: ` +
      `${full.callsPerSecond >= targetRate && failedOf(paced) === 0 ? 'MET' : 'NOT MET'}; ` +
      `${targetConcurrent} concurrent calls with media: ${lowest} held, ${failedOf(plateau.media)} failed: ` +
      `${lowest >= targetConcurrent && failedOf(plateau.media) === 0 ? 'MET' : 'NOT MET'}`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  if (engine.lines() > 0) process.stdout.write(`last engine log lines:\n${engine.log.join('\n')}\n`);
  if (plateau.media.successful === 0) throw new Error(`no call with media completed: ${plateau.output}`);
} catch (error) {
  process.stdout.write(`calls bench failed: ${error instanceof Error ? error.message : String(error)}\n`);
  if ((engine?.log.length ?? 0) > 0) process.stdout.write(`last engine log lines:\n${engine?.log.join('\n')}\n`);
  process.exitCode = 1;
} finally {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  await engine?.stop();
  await api?.close();
  await pool.end();
  await database.close();
  await rm(dataDir, { recursive: true, force: true });
  if (workDir !== undefined) await rm(workDir, { recursive: true, force: true });
}
