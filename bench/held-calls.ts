/**
 * Concurrent calls held with media, measured at their plateau (bench/calls.ts, bench/phones.ts): the engine process
 * idle first (CPU for 2 s, RSS, its UDP sockets), then one sipp UAC starts `count` calls at `rampRate` calls/s,
 * each held for the scenario's time; the plateau runs from when every call is up (counted in the calls table) to
 * 1 s before the first should hang up; over it, the engine's CPU (utime + stime of /proc/<pid>/stat, as a share of
 * one core), its peak RSS (/proc/<pid>/status), sipp's CPU and the host's. Then the run's statistics and the calls
 * by end reason once every call ended.
 */
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type pg from 'pg';
import {
  cpuSeconds,
  databaseNow,
  drained,
  type EngineProcess,
  hostCpu,
  hostShare,
  rssMb,
  rtpPorts,
  sleep,
  udpSockets,
} from './engine-process.ts';
import { type SippStats, sippStats, startSipp, uacArgs } from './sipp-runs.ts';

export interface HeldCalls {
  /** Calls up during the plateau: the fewest and the most seen. */
  lowest: number;
  peak: number;
  plateauSeconds: number;
  /** Engine CPU as a share of one core: idle before the run, and over the plateau. */
  idleShare: number;
  engineShare: number;
  /** (plateau - idle) / lowest. */
  perCallCpu: number;
  rssBefore: number;
  rssPeak: number;
  /** (peak - before) / lowest, MB. */
  perCallMb: number;
  sippShare: number;
  /** The CPU share (of one core) over the plateau of each process of `watch`. */
  watched: Record<string, number>;
  hostShare: number;
  /** Datagrams dropped for a full receive buffer since the run began: SIP socket, RTP sockets (and how many). */
  dropped: { sip: number; rtp: number; rtpSockets: number };
  media: SippStats;
  code: number | null;
  output: string;
  /** The run's calls by end reason. */
  reasons: Record<string, number>;
  /** When the run began, on the database's clock. */
  since: Date;
}

export async function holdCalls(options: {
  pool: pg.Pool;
  engine: EngineProcess;
  /** Where sipp runs and writes its files. */
  work: string;
  /** sipp processes are added here (to be stopped on failure). */
  children: ChildProcess[];
  /** The scenario and what is dialled: e.g. ['-sf', file, '-s', number]. */
  scenarioArgs: string[];
  /** The numbers called (their calls are counted and awaited). */
  numbers: readonly string[];
  count: number;
  rampRate: number;
  holdSeconds: number;
  /** The column that says a call is up: answered (any plan) or connected (bridged to a far end or a device). */
  up: 'answered_at' | 'connected_at';
  /** Other processes whose CPU is read over the plateau, by name. */
  watch?: Record<string, number>;
}): Promise<HeldCalls> {
  const { pool, engine, count, rampRate } = options;
  const since = await databaseNow(pool);
  const idleCpu0 = await cpuSeconds(engine.pid);
  const idleAt0 = performance.now();
  await sleep(2000);
  const idleShare = ((await cpuSeconds(engine.pid)) - idleCpu0) / ((performance.now() - idleAt0) / 1000);
  const rssBefore = await rssMb(engine.pid);
  const socketsBefore = await udpSockets(engine.pid);

  const holdMs = options.holdSeconds * 1000;
  const statsFile = path.join(options.work, `stats-${randomUUID()}.csv`);
  const startedAt = performance.now();
  const sipp = startSipp(
    [
      ...options.scenarioArgs,
      ...(await uacArgs({
        calls: count,
        rate: rampRate,
        limit: count,
        statsFile,
        seconds: Math.ceil(count / rampRate + options.holdSeconds) + 60,
      })),
      `127.0.0.1:${engine.sipPort}`,
    ],
    options.work,
  );
  options.children.push(sipp.child);
  const sippPid = sipp.child.pid as number;
  const active = async () =>
    Number(
      (
        await pool.query<{ count: string }>(
          `SELECT count(*) FROM calls WHERE to_number = ANY($1) AND started_at >= $2 AND ${options.up} IS NOT NULL
              AND ended_at IS NULL`,
          [options.numbers, since],
        )
      ).rows[0]?.count,
    );
  // The plateau: from when every call is up (not before the ramp's end plus 2 s, and at the latest 10 s after the
  // ramp's end) to 1 s before the first should hang up.
  const rampEnd = startedAt + (count / rampRate) * 1000;
  const plateauTo = startedAt + holdMs - 1000;
  let peak = 0;
  for (;;) {
    const now = await active();
    peak = Math.max(peak, now);
    const at = performance.now();
    if ((at >= rampEnd + 2000 && now >= count) || at >= Math.min(rampEnd + 10_000, plateauTo - 1000)) break;
    await sleep(250);
  }
  const plateauStart = {
    at: performance.now(),
    engine: await cpuSeconds(engine.pid),
    sipp: await cpuSeconds(sippPid).catch(() => 0),
    host: await hostCpu(),
    watched: await cpuOf(options.watch ?? {}),
  };
  let lowest = Number.POSITIVE_INFINITY;
  let rssPeak = 0;
  do {
    const now = await active();
    peak = Math.max(peak, now);
    lowest = Math.min(lowest, now);
    rssPeak = Math.max(rssPeak, await rssMb(engine.pid));
    await sleep(1000);
  } while (performance.now() < plateauTo);
  const plateauSeconds = (performance.now() - plateauStart.at) / 1000;
  const dropped = { sip: 0, rtp: 0, rtpSockets: 0 };
  for (const [inode, socket] of await udpSockets(engine.pid)) {
    const delta = socket.drops - (socketsBefore.get(inode)?.drops ?? 0);
    if (socket.port === engine.sipPort) dropped.sip += delta;
    else if (socket.port >= rtpPorts.min && socket.port <= rtpPorts.max) {
      dropped.rtp += delta;
      dropped.rtpSockets += 1;
    }
  }
  const engineShare = ((await cpuSeconds(engine.pid)) - plateauStart.engine) / plateauSeconds;
  const sippShare = ((await cpuSeconds(sippPid).catch(() => plateauStart.sipp)) - plateauStart.sipp) / plateauSeconds;
  const host = hostShare(plateauStart.host, await hostCpu());
  const watchedEnd = await cpuOf(options.watch ?? {});
  const watched = Object.fromEntries(
    Object.entries(watchedEnd).map(([name, cpu]) => [
      name,
      (cpu - (plateauStart.watched[name] ?? cpu)) / plateauSeconds,
    ]),
  );
  const run = await sipp.done;
  const media = await sippStats(statsFile).catch(() => undefined);
  if (media === undefined) throw new Error(`sipp wrote no statistics (exit ${run.code}): ${run.output}`);
  const byReason = await drained(pool, options.numbers, since);
  engine.alive();
  if (lowest === Number.POSITIVE_INFINITY) lowest = peak;
  return {
    lowest,
    peak,
    plateauSeconds,
    idleShare,
    engineShare,
    perCallCpu: lowest > 0 ? (engineShare - idleShare) / lowest : 0,
    rssBefore,
    rssPeak,
    perCallMb: lowest > 0 ? (rssPeak - rssBefore) / lowest : 0,
    sippShare,
    watched,
    hostShare: host,
    dropped,
    media,
    code: run.code,
    output: run.output,
    reasons: byReason,
    since,
  };
}

/** CPU seconds so far of each named process (0 for one that is gone). */
async function cpuOf(pids: Record<string, number>): Promise<Record<string, number>> {
  const entries = await Promise.all(
    Object.entries(pids).map(async ([name, pid]) => [name, await cpuSeconds(pid).catch(() => 0)] as const),
  );
  return Object.fromEntries(entries);
}
