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
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomInt, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readdir, readFile, readlink, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { loadConfig } from '../core/config.ts';
import { createApplication } from '../core/identity/applications.ts';
import { importNumbers } from '../core/numbers/numbers.ts';
import { startRoles } from '../app/roles.ts';
import { defaultKeyScopes } from '../core/scopes.ts';
import { runCli } from '../test/helpers/cli.ts';
import { freePort } from '../test/helpers/free-port.ts';
import { writeScenario } from '../test/helpers/sipp.ts';
import { scratchDatabase } from './database.ts';

const rate = Number(process.env.BENCH_CALLS_RATE ?? 200);
const total = Number(process.env.BENCH_CALLS_TOTAL ?? rate * 10);
const rateLimit = Number(process.env.BENCH_CALLS_LIMIT ?? 1000);
const concurrent = Number(process.env.BENCH_CALLS_CONCURRENT ?? 300);
const holdSeconds = Number(process.env.BENCH_CALLS_HOLD_SECONDS ?? 30);
// The ramp takes at most a third of the hold time, so the plateau (all calls up) lasts.
const rampRate = Number(process.env.BENCH_CALLS_RAMP_RATE ?? Math.max(50, Math.ceil((3 * concurrent) / holdSeconds)));
const rtpPorts = { min: 30000, max: 39999 };
const targetRate = 100;
const targetConcurrent = 300;
const targetRunSeconds = Number(process.env.BENCH_CALLS_TARGET_SECONDS ?? 10);

const audioPcap = '/usr/share/sip-tester/g711a.pcap';
const bin = fileURLToPath(new URL('../bin/switchboard.js', import.meta.url));
const clockTicks = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** CPU seconds (user + system) a process has used so far. */
async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / clockTicks;
}

/** Resident memory of a process, in MB. */
async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
  return Number(kb ?? 0) / 1024;
}

/** The host's CPU time so far: busy and total, in ticks (all cores). */
async function hostCpu(): Promise<{ busy: number; total: number }> {
  const line = (await readFile('/proc/stat', 'utf8')).split('\n')[0] ?? '';
  const values = line.trim().split(/\s+/).slice(1, 9).map(Number);
  const all = values.reduce((sum, value) => sum + value, 0);
  const idle = (values[3] ?? 0) + (values[4] ?? 0);
  return { busy: all - idle, total: all };
}

/** The UDP sockets a process holds now, by inode: local port and datagrams dropped for a full receive buffer. */
async function udpSockets(pid: number): Promise<Map<string, { port: number; drops: number }>> {
  const inodes = new Set<string>();
  for (const fd of await readdir(`/proc/${pid}/fd`)) {
    const link = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
    const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
    if (inode !== undefined) inodes.add(inode);
  }
  const sockets = new Map<string, { port: number; drops: number }>();
  for (const table of ['/proc/net/udp', '/proc/net/udp6']) {
    for (const line of (await readFile(table, 'utf8').catch(() => '')).split('\n').slice(1)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ref pointer drops
      const fields = line.trim().split(/\s+/);
      const inode = fields[9] ?? '';
      if (fields.length < 13 || !inodes.has(inode)) continue;
      sockets.set(inode, { port: parseInt(fields[1]?.split(':')[1] ?? '0', 16), drops: Number(fields[12]) });
    }
  }
  return sockets;
}

/** A classic pcap file's RTP packets: how many, and the time from the first to the last, in ms. */
async function pcapLength(file: string): Promise<{ packets: number; ms: number }> {
  const data = await readFile(file);
  const little = data.readUInt32LE(0) === 0xa1b2c3d4;
  const u32 = (offset: number) => (little ? data.readUInt32LE(offset) : data.readUInt32BE(offset));
  let packets = 0;
  let first = 0;
  let last = 0;
  for (let offset = 24; offset + 16 <= data.length; offset += 16 + u32(offset + 8)) {
    const at = u32(offset) * 1000 + u32(offset + 4) / 1000;
    if (packets === 0) first = at;
    last = at;
    packets += 1;
  }
  return { packets, ms: Math.round(last - first) };
}

interface SippStats {
  created: number;
  successful: number;
  failed: number;
  retransmissions: number;
  /** The mean time from the INVITE to its 200 (sipp's rtd), in ms. */
  responseMs: number;
  seconds: number;
  callsPerSecond: number;
}

/** The last line of a sipp statistics file (-trace_stat -stf): cumulative counts over the run's wall time. */
async function sippStats(file: string): Promise<SippStats> {
  const lines = (await readFile(file, 'utf8')).split('\n').filter((line) => line.trim() !== '');
  const names = (lines[0] ?? '').split(';');
  const values = (lines.at(-1) ?? '').split(';');
  const field = (name: string) => values[names.indexOf(name)] ?? '';
  // Times are "date<TAB>time<TAB>epoch seconds".
  const epoch = (name: string) => Number(field(name).split('\t').at(-1));
  const seconds = epoch('CurrentTime') - epoch('StartTime');
  const successful = Number(field('SuccessfulCall(C)'));
  // Durations are "hh:mm:ss:microseconds".
  const [hours, minutes, secs, micros] = field('ResponseTime1(C)').split(':').map(Number);
  const responseMs = ((hours ?? 0) * 3600 + (minutes ?? 0) * 60 + (secs ?? 0)) * 1000 + (micros ?? 0) / 1000;
  return {
    created: Number(field('TotalCallCreated')),
    successful,
    failed: Number(field('FailedCall(C)')),
    retransmissions: Number(field('Retransmissions(C)')),
    responseMs,
    seconds,
    callsPerSecond: seconds > 0 ? successful / seconds : 0,
  };
}

interface Sipp {
  child: ChildProcess;
  done: Promise<{ code: number | null; output: string }>;
}

/** Starts sipp with `args` in `dir`; `done` resolves at its exit with the tail of what it printed. */
function startSipp(args: string[], dir: string): Sipp {
  const child = spawn('sipp', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const done = new Promise<{ code: number | null; output: string }>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, output }));
  });
  return { child, done };
}

/** The UAC arguments shared by every run: this side's addresses, the load, the statistics file. */
async function uacArgs(options: { calls: number; rate: number; limit: number; statsFile: string; seconds: number }) {
  return [
    '-i',
    '127.0.0.1',
    '-p',
    String(await freePort()),
    '-mi',
    '127.0.0.1',
    '-mp',
    String(await freePort()),
    '-m',
    String(options.calls),
    '-r',
    String(options.rate),
    '-l',
    String(options.limit),
    '-timeout',
    `${options.seconds}s`,
    '-trace_stat',
    '-stf',
    options.statsFile,
    '-fd',
    '1',
    '-nostdin',
  ];
}

function percent(value: number): string {
  return `${(value * 100).toFixed(0)}%`;
}

const database = await scratchDatabase();
const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-calls-'));
const pool = new pg.Pool({ connectionString: database.url, max: 4 });
pool.on('error', () => {});
const children: ChildProcess[] = [];
let api: Awaited<ReturnType<typeof startRoles>> | undefined;
let engine: ChildProcess | undefined;
const engineLog: string[] = [];
let engineLines = 0;
let workDir: string | undefined;

try {
  // sipp sends from 127.0.0.1: the carrier, added the way an admin does, before the engine loads its list.
  const added = await runCli(database.url, ['carriers', 'add', 'sipp', '--address', '127.0.0.1']);
  if (added.code !== 0) throw new Error(`carriers add: ${added.stderr}`);

  api = await startRoles(
    loadConfig({
      ...process.env,
      DATABASE_URL: database.url,
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      SWITCHBOARD_DATA_DIR: dataDir,
    }),
    new Set(['api']),
  );
  const enginePort = await freePort();
  const sipPort = await freePort();
  // BENCH_CALLS_ENGINE_NODE_ARGS: extra node options for the engine process (e.g. --cpu-prof --cpu-prof-dir=/tmp/x).
  const nodeArgs = (process.env.BENCH_CALLS_ENGINE_NODE_ARGS ?? '').split(' ').filter((arg) => arg !== '');
  engine = spawn(process.execPath, [...nodeArgs, bin, 'engine'], {
    env: {
      ...process.env,
      DATABASE_URL: database.url,
      ENGINE_HTTP_PORT: String(enginePort),
      SIP_PORT: String(sipPort),
      RTP_PORT_MIN: String(rtpPorts.min),
      RTP_PORT_MAX: String(rtpPorts.max),
      SWITCHBOARD_DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const engineProcess = engine;
  const logLine = (chunk: Buffer) => {
    for (const line of chunk.toString().split('\n')) {
      if (line.trim() === '') continue;
      engineLines += 1;
      engineLog.push(line.slice(0, 400));
      if (engineLog.length > 20) engineLog.shift();
    }
  };
  engineProcess.stdout?.on('data', logLine);
  engineProcess.stderr?.on('data', logLine);
  for (let tries = 0; ; tries += 1) {
    if (engineProcess.exitCode !== null) throw new Error(`the engine process exited with ${engineProcess.exitCode}`);
    const ready = await fetch(`http://127.0.0.1:${enginePort}/readyz`).then(
      (response) => response.ok,
      () => false,
    );
    if (ready) break;
    if (tries > 600) throw new Error('the engine process did not become ready in 60 s');
    await sleep(100);
  }
  const enginePid = engineProcess.pid as number;
  const engineAlive = () => {
    if (engineProcess.exitCode !== null || engineProcess.signalCode !== null) {
      throw new Error(`the engine process died (${engineProcess.exitCode ?? engineProcess.signalCode})`);
    }
  };

  // An application and a workspace made the way a backend would; numbers claimed; plans published and assigned.
  const { apiKey } = await createApplication(pool, 'bench', defaultKeyScopes);
  const call = async (method: string, route: string, body: unknown, workspaceId?: string) => {
    const response = await fetch(`${api?.url}/api/v1${route}`, {
      method,
      headers: {
        authorization: `Bearer ${apiKey}`,
        'content-type': 'application/json',
        'idempotency-key': randomUUID(),
        ...(workspaceId === undefined ? {} : { 'x-service-workspace-id': workspaceId }),
      },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${route}: ${response.status} ${text}`);
    return JSON.parse(text) as { id: string };
  };
  const workspace = await call('POST', '/workspaces', {
    externalWorkspaceId: 'bench',
    name: 'Bench',
    timezone: 'Europe/Paris',
  });
  const numberRunning = async (areaCode: string, definition: unknown): Promise<string> => {
    const e164 = `+1${areaCode}${randomInt(1_000_000, 9_999_999)}`;
    await importNumbers(pool, 'sipp', [e164], ['voice']);
    const number = await call('POST', '/numbers', { e164 }, workspace.id);
    const plan = await call('POST', '/routing-plans', { name: 'Bench plan', definition, publish: true }, workspace.id);
    await call('POST', `/routing-plans/${plan.id}/assign`, { phoneNumberId: number.id }, workspace.id);
    return e164;
  };
  const hangupNumber = await numberRunning('628', { entry: 'bye', steps: { bye: { type: 'hangup', message: null } } });
  const voicemailNumber = await numberRunning('629', {
    entry: 'vm',
    steps: { vm: { type: 'voicemail', greeting: { tts: 'Hi.' } } },
  });

  /** Waits until every call to `e164` has ended; returns the calls by end reason. */
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
  const now = async () => (await pool.query<{ now: Date }>('SELECT now()')).rows[0]?.now as Date;
  const drained = async (e164: string, since: Date, deadlineMs = 60_000): Promise<Record<string, number>> => {
    for (const deadline = Date.now() + deadlineMs; ;) {
      const open = await pool.query<{ count: string }>(
        'SELECT count(*) FROM calls WHERE to_number = $1 AND ended_at IS NULL',
        [e164],
      );
      if (Number(open.rows[0]?.count) === 0 || Date.now() > deadline) break;
      await sleep(200);
    }
    const reasons = await pool.query<{ reason: string | null; count: string }>(
      `SELECT coalesce(end_reason, 'not ended') AS reason, count(*) FROM calls
        WHERE to_number = $1 AND started_at >= $2 GROUP BY 1`,
      [e164, since],
    );
    const byReason = Object.fromEntries(reasons.rows.map((row) => [row.reason ?? 'not ended', Number(row.count)]));
    return byReason;
  };

  const work = await mkdtemp(path.join(os.tmpdir(), 'sipp-bench-'));
  workDir = work;
  /** One UAC run of `calls` calls at `callRate` against `target`; its statistics. */
  const answererCpu = (pid: number | undefined) => (pid === undefined ? 0 : cpuSeconds(pid).catch(() => 0));
  /** One UAC run; with `answerer`, that process's CPU share over the run (and the host's). */
  const uacRun = async (options: {
    scenarioArgs: string[];
    calls: number;
    callRate: number;
    limit: number;
    answerer?: number;
  }) => {
    const statsFile = path.join(work, `stats-${randomUUID()}.csv`);
    const seconds = Math.ceil(options.calls / options.callRate) + 60;
    const args = [
      ...options.scenarioArgs,
      ...(await uacArgs({
        calls: options.calls,
        rate: options.callRate,
        limit: options.limit,
        statsFile,
        seconds,
      })),
    ];
    const began = { at: performance.now(), cpu: await answererCpu(options.answerer), host: await hostCpu() };
    const sipp = startSipp(args, work);
    children.push(sipp.child);
    const result = await sipp.done;
    const wall = (performance.now() - began.at) / 1000;
    const cpu = ((await answererCpu(options.answerer)) - began.cpu) / wall;
    const host = await hostCpu();
    const hostShare = (host.busy - began.host.busy) / Math.max(1, host.total - began.host.total);
    const stats = await sippStats(statsFile).catch(() => undefined);
    if (stats === undefined) throw new Error(`sipp wrote no statistics (exit ${result.code}): ${result.output}`);
    return { ...stats, cpu, hostShare, code: result.code, output: result.output };
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
  await drained(hangupNumber, since);
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
  const fullReasons = await drained(hangupNumber, since);
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
  const pacedReasons = await drained(hangupNumber, since);
  engineAlive();

  // 3. Concurrent calls with media: voicemail records what sipp plays (the pcap again and again) for the hold time.
  const pcap = await pcapLength(audioPcap);
  const holdMs = holdSeconds * 1000;
  const loops = Math.max(1, Math.floor(holdMs / pcap.ms));
  const play = `<nop><action><exec play_pcap_audio="${audioPcap}"/></action></nop><pause milliseconds="${pcap.ms}"/>`;
  const held = await writeScenario('caller-hangs-up', work, {
    MEDIA: play.repeat(loops),
    HOLD_MS: String(Math.max(0, holdMs - loops * pcap.ms)),
  });
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
  await drained(voicemailNumber, since);
  await pool.query('DELETE FROM recordings');
  const rtpBefore = await rtpPackets();
  since = await now();
  const idleCpu0 = await cpuSeconds(enginePid);
  const idleAt0 = performance.now();
  await sleep(2000);
  const idleCpu = (await cpuSeconds(enginePid)) - idleCpu0;
  const idleShare = idleCpu / ((performance.now() - idleAt0) / 1000);
  const rssBefore = await rssMb(enginePid);
  const socketsBefore = await udpSockets(enginePid);

  const statsFile = path.join(work, `stats-${randomUUID()}.csv`);
  const startedAt = performance.now();
  const sipp = startSipp(
    [
      '-sf',
      held,
      '-s',
      voicemailNumber.slice(1),
      ...(await uacArgs({
        calls: concurrent,
        rate: rampRate,
        limit: concurrent,
        statsFile,
        seconds: Math.ceil(concurrent / rampRate + holdSeconds) + 60,
      })),
      `127.0.0.1:${sipPort}`,
    ],
    work,
  );
  children.push(sipp.child);
  const sippPid = sipp.child.pid as number;
  const active = async () =>
    Number(
      (
        await pool.query<{ count: string }>(
          'SELECT count(*) FROM calls WHERE to_number = $1 AND answered_at IS NOT NULL AND ended_at IS NULL',
          [voicemailNumber],
        )
      ).rows[0]?.count,
    );
  // The plateau: from when the last call should be up (plus 2 s) to 1 s before the first should hang up.
  const plateauFrom = startedAt + (concurrent / rampRate) * 1000 + 2000;
  const plateauTo = startedAt + holdMs - 1000;
  let peak = 0;
  while (performance.now() < plateauFrom) {
    peak = Math.max(peak, await active());
    await sleep(500);
  }
  const plateauStart = {
    at: performance.now(),
    engine: await cpuSeconds(enginePid),
    sipp: await cpuSeconds(sippPid).catch(() => 0),
    host: await hostCpu(),
  };
  let lowest = Number.POSITIVE_INFINITY;
  let rssPeak = 0;
  do {
    const now = await active();
    peak = Math.max(peak, now);
    lowest = Math.min(lowest, now);
    rssPeak = Math.max(rssPeak, await rssMb(enginePid));
    await sleep(1000);
  } while (performance.now() < plateauTo);
  const plateauSeconds = (performance.now() - plateauStart.at) / 1000;
  // Drops since the run began: on the SIP socket, and on the RTP sockets (all opened during the run).
  const dropped = { sip: 0, rtp: 0, rtpSockets: 0 };
  for (const [inode, socket] of await udpSockets(enginePid)) {
    const delta = socket.drops - (socketsBefore.get(inode)?.drops ?? 0);
    if (socket.port === sipPort) dropped.sip += delta;
    else if (socket.port >= rtpPorts.min && socket.port <= rtpPorts.max) {
      dropped.rtp += delta;
      dropped.rtpSockets += 1;
    }
  }
  const engineShare = ((await cpuSeconds(enginePid)) - plateauStart.engine) / plateauSeconds;
  const sippShare = ((await cpuSeconds(sippPid).catch(() => plateauStart.sipp)) - plateauStart.sipp) / plateauSeconds;
  const hostEnd = await hostCpu();
  const hostShare = (hostEnd.busy - plateauStart.host.busy) / Math.max(1, hostEnd.total - plateauStart.host.total);
  const mediaRun = await sipp.done;
  const media = await sippStats(statsFile).catch(() => undefined);
  if (media === undefined) throw new Error(`sipp wrote no statistics (exit ${mediaRun.code}): ${mediaRun.output}`);
  const mediaReasons = await drained(voicemailNumber, since);
  engineAlive();
  const recordings = await pool.query<{ count: string; ms: string | null }>(
    "SELECT count(*), sum(duration_ms) AS ms FROM recordings WHERE kind = 'voicemail'",
  );
  const recorded = Number(recordings.rows[0]?.count);
  const recordedSeconds = Number(recordings.rows[0]?.ms ?? 0) / 1000;
  const rtpAfter = await rtpPackets();
  const rtpIn = rtpAfter.in - rtpBefore.in;
  const rtpOut = rtpAfter.out - rtpBefore.out;
  const rtpLost = rtpAfter.lost - rtpBefore.lost;
  if (lowest === Number.POSITIVE_INFINITY) lowest = peak;
  const perCallCpu = lowest > 0 ? (engineShare - idleShare) / lowest : 0;
  const perCallMb = lowest > 0 ? (rssPeak - rssBefore) / lowest : 0;

  const failedOf = (run: SippStats) => run.failed + Math.max(0, run.created - run.successful - run.failed);
  const reasons = (byReason: Record<string, number>) =>
    Object.entries(byReason)
      .map(([reason, count]) => `${reason} ${count}`)
      .join(', ');
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
    `| sipp: completed / failed | ${media.successful} / ${failedOf(media)} |`,
    `| engine CPU, idle -> plateau (${plateauSeconds.toFixed(0)} s) | ${percent(idleShare)} -> ${percent(engineShare)} of one core |`,
    `| engine CPU per call | ${(perCallCpu * 100).toFixed(2)}% of one core |`,
    `| engine RSS, before -> plateau peak | ${rssBefore.toFixed(0)} MB -> ${rssPeak.toFixed(0)} MB (${perCallMb.toFixed(2)} MB per call) |`,
    `| sipp CPU during the plateau | ${percent(sippShare)} of one core |`,
    `| host CPU busy during the plateau | ${percent(hostShare)} of ${os.cpus().length} cores |`,
    `| audio recorded by the engine | ${recorded} recordings, ${(recordedSeconds / Math.max(1, recorded)).toFixed(1)} s each on average (held ${holdSeconds} s, after the greeting and beep) |`,
    `| sipp sent (pcap of ${pcap.packets} packets, ${(pcap.ms / 1000).toFixed(2)} s, played ${loops}x per call) | ~${pcap.packets * loops * media.successful} RTP packets |`,
    `| RTP packets at the engine (/metrics): in / out / lost | ${rtpIn} / ${rtpOut} / ${rtpLost} |`,
    `| datagrams dropped for a full receive buffer at the plateau's end: ${dropped.rtpSockets} RTP sockets / SIP socket | ${dropped.rtp} / ${dropped.sip} |`,
    '',
    `engine calls by end reason: ${reasons(mediaReasons)}; engine log lines (warn and above): ${engineLines}`,
    '',
    `target: ${targetRate} calls/s: ${full.callsPerSecond.toFixed(1)}/s at ${rate}/s offered, ` +
      `${paced.callsPerSecond.toFixed(1)}/s with ${failedOf(paced)} failed at ${targetRate}/s offered: ` +
      `${full.callsPerSecond >= targetRate && failedOf(paced) === 0 ? 'MET' : 'NOT MET'}; ` +
      `${targetConcurrent} concurrent calls with media: ${lowest} held, ${failedOf(media)} failed: ` +
      `${lowest >= targetConcurrent && failedOf(media) === 0 ? 'MET' : 'NOT MET'}`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  if (engineLines > 0) process.stdout.write(`last engine log lines:\n${engineLog.join('\n')}\n`);
  if (media.successful === 0) throw new Error(`no call with media completed: ${mediaRun.output}`);
} catch (error) {
  process.stdout.write(`calls bench failed: ${error instanceof Error ? error.message : String(error)}\n`);
  if (engineLog.length > 0) process.stdout.write(`last engine log lines:\n${engineLog.join('\n')}\n`);
  process.exitCode = 1;
} finally {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  if (engine !== undefined && engine.exitCode === null && engine.signalCode === null) {
    engine.kill('SIGTERM');
    const timer = setTimeout(() => engine?.kill('SIGKILL'), 15_000);
    await once(engine, 'exit');
    clearTimeout(timer);
  }
  await api?.close();
  await pool.end();
  await database.close();
  await rm(dataDir, { recursive: true, force: true });
  if (workDir !== undefined) await rm(workDir, { recursive: true, force: true });
}
