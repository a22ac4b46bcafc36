/**
 * What the call benches (bench/calls.ts, bench/phones.ts) share around the engine: the engine role started in a
 * process of its own the way users start it (`switchboard engine`, from the build), what /proc says of a process
 * (CPU seconds, RSS, its UDP sockets and their drops) and of the host, the REST API calls that set a workspace up
 * (numbers claimed, plans published and assigned), and the wait for a set of calls to end.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomInt, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { readdir, readFile, readlink } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { startRoles } from '../app/roles.ts';
import { loadConfig } from '../core/config.ts';
import { importNumbers } from '../core/numbers/numbers.ts';
import { freePort } from '../test/helpers/free-port.ts';

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function percent(value: number): string {
  return `${(value * 100).toFixed(0)}%`;
}

/** The value at percentile `p` of `values` (nearest rank). */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;
}

const clockTicks = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU seconds (user + system) a process has used so far. */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / clockTicks;
}

/** Resident memory of a process, in MB. */
export async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
  return Number(kb ?? 0) / 1024;
}

/**
 * The engine's event-loop delay since the last call (prom-client's default gauges, read from its /metrics, which
 * resets their histogram): mean, p99 and max in ms. A first call starts the window.
 */
export async function eventLoopDelay(httpPort: number): Promise<{ meanMs: number; p99Ms: number; maxMs: number }> {
  const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
  const gauge = (name: string) =>
    Number(new RegExp(`^switchboard_nodejs_eventloop_lag_${name}_seconds (\\S+)$`, 'm').exec(text)?.[1] ?? NaN) * 1000;
  return { meanMs: gauge('mean'), p99Ms: gauge('p99'), maxMs: gauge('max') };
}

/** The host's CPU time so far: busy and total, in ticks (all cores). */
export async function hostCpu(): Promise<{ busy: number; total: number }> {
  const line = (await readFile('/proc/stat', 'utf8')).split('\n')[0] ?? '';
  const values = line.trim().split(/\s+/).slice(1, 9).map(Number);
  const all = values.reduce((sum, value) => sum + value, 0);
  const idle = (values[3] ?? 0) + (values[4] ?? 0);
  return { busy: all - idle, total: all };
}

/** The host's busy share between two `hostCpu` readings (of all cores). */
export function hostShare(from: { busy: number; total: number }, to: { busy: number; total: number }): number {
  return (to.busy - from.busy) / Math.max(1, to.total - from.total);
}

/** The UDP sockets a process holds now, by inode: local port and datagrams dropped for a full receive buffer. */
export async function udpSockets(pid: number): Promise<Map<string, { port: number; drops: number }>> {
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

/** The API role in this process, on the bench's database and data directory (the engine runs apart: `startEngine`). */
export function startApi(databaseUrl: string, dataDir: string) {
  return startRoles(
    loadConfig({
      ...process.env,
      DATABASE_URL: databaseUrl,
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      SWITCHBOARD_DATA_DIR: dataDir,
    }),
    new Set(['api']),
  );
}

export interface EngineProcess {
  child: ChildProcess;
  pid: number;
  sipPort: number;
  /** Its HTTP port (/readyz, /metrics). */
  httpPort: number;
  /** The last 20 lines it logged (warn and above), and how many it logged in all. */
  log: string[];
  lines(): number;
  /** Throws when the process died. */
  alive(): void;
  /** SIGTERM, then SIGKILL after 15 s. */
  stop(): Promise<void>;
}

export const rtpPorts = { min: 30000, max: 39999 };
const bin = fileURLToPath(new URL('../bin/switchboard.js', import.meta.url));

/** `switchboard engine` (the build) on `databaseUrl`, started and ready; `nodeArgs` go to node (e.g. --cpu-prof). */
export async function startEngine(options: {
  databaseUrl: string;
  dataDir: string;
  nodeArgs?: string[];
}): Promise<EngineProcess> {
  const httpPort = await freePort();
  const sipPort = await freePort();
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), bin, 'engine'], {
    env: {
      ...process.env,
      DATABASE_URL: options.databaseUrl,
      ENGINE_HTTP_PORT: String(httpPort),
      SIP_PORT: String(sipPort),
      RTP_PORT_MIN: String(rtpPorts.min),
      RTP_PORT_MAX: String(rtpPorts.max),
      SWITCHBOARD_DATA_DIR: options.dataDir,
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log: string[] = [];
  let lines = 0;
  const logLine = (chunk: Buffer) => {
    for (const line of chunk.toString().split('\n')) {
      if (line.trim() === '') continue;
      lines += 1;
      log.push(line.slice(0, 400));
      if (log.length > 20) log.shift();
    }
  };
  child.stdout?.on('data', logLine);
  child.stderr?.on('data', logLine);
  const exited = () => child.exitCode !== null || child.signalCode !== null;
  const engine: EngineProcess = {
    child,
    pid: child.pid as number,
    sipPort,
    httpPort,
    log,
    lines: () => lines,
    alive() {
      if (exited()) throw new Error(`the engine process died (${child.exitCode ?? child.signalCode})`);
    },
    async stop() {
      if (exited()) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await once(child, 'exit');
      clearTimeout(timer);
    },
  };
  for (let tries = 0; ; tries += 1) {
    if (exited()) throw new Error(`the engine process exited with ${child.exitCode}: ${log.join('\n')}`);
    const ready = await fetch(`http://127.0.0.1:${httpPort}/readyz`).then(
      (response) => response.ok,
      () => false,
    );
    if (ready) break;
    if (tries > 600) {
      await engine.stop();
      throw new Error('the engine process did not become ready in 60 s');
    }
    await sleep(100);
  }
  return engine;
}

/** A REST call with a credential (for a key, in a workspace when `workspaceId` is given); throws unless it succeeded. */
export type ApiCall = <T = { id: string }>(
  method: string,
  route: string,
  body: unknown,
  workspaceId?: string,
) => Promise<T>;

/** REST calls to `apiUrl` with the bearer credential `credential` (an application key or a token). */
export function apiCaller(apiUrl: string, credential: string): ApiCall {
  return async <T>(method: string, route: string, body: unknown, workspaceId?: string) => {
    const response = await fetch(`${apiUrl}/api/v1${route}`, {
      method,
      headers: {
        authorization: `Bearer ${credential}`,
        'content-type': 'application/json',
        'idempotency-key': randomUUID(),
        ...(workspaceId === undefined ? {} : { 'x-service-workspace-id': workspaceId }),
      },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${route}: ${response.status} ${text}`);
    return JSON.parse(text) as T;
  };
}

/** A number of `carrier`'s inventory in area `areaCode`, claimed by the workspace, running `definition`. */
export async function numberRunning(
  pool: pg.Pool,
  call: ApiCall,
  workspaceId: string,
  areaCode: string,
  definition: unknown,
  carrier = 'sipp',
): Promise<string> {
  const e164 = `+1${areaCode}${randomInt(1_000_000, 9_999_999)}`;
  await importNumbers(pool, carrier, [e164], ['voice']);
  const number = await call('POST', '/numbers', { e164 }, workspaceId);
  const plan = await call('POST', '/routing-plans', { name: 'Bench plan', definition, publish: true }, workspaceId);
  await call('POST', `/routing-plans/${plan.id}/assign`, { phoneNumberId: number.id }, workspaceId);
  return e164;
}

/** The database's clock now. */
export async function databaseNow(pool: pg.Pool): Promise<Date> {
  return (await pool.query<{ now: Date }>('SELECT clock_timestamp() AS now')).rows[0]?.now as Date;
}

/** Waits (at most `deadlineMs`) until every call to `numbers` has ended; the calls since `since` by end reason. */
export async function drained(
  pool: pg.Pool,
  numbers: readonly string[],
  since: Date,
  deadlineMs = 60_000,
): Promise<Record<string, number>> {
  for (const deadline = Date.now() + deadlineMs; ;) {
    const open = await pool.query<{ count: string }>(
      'SELECT count(*) FROM calls WHERE to_number = ANY($1) AND ended_at IS NULL',
      [numbers],
    );
    if (Number(open.rows[0]?.count) === 0 || Date.now() > deadline) break;
    await sleep(200);
  }
  const reasons = await pool.query<{ reason: string; count: string }>(
    `SELECT coalesce(end_reason, 'not ended') AS reason, count(*) FROM calls
      WHERE to_number = ANY($1) AND started_at >= $2 GROUP BY 1`,
    [numbers, since],
  );
  return Object.fromEntries(reasons.rows.map((row) => [row.reason, Number(row.count)]));
}

/** "completed 100, plan_hangup 2" */
export function reasons(byReason: Record<string, number>): string {
  return Object.entries(byReason)
    .map(([reason, count]) => `${reason} ${count}`)
    .join(', ');
}
