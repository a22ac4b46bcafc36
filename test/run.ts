/**
 * `npm test`: runs the ava suite against DATABASE_URL when it is set, and otherwise against an embedded PostgreSQL
 * started here for the run, on EMBEDDED_POSTGRES_PORT when set (each test file then makes its own database on that
 * server). A server that does not start ends the run with its reason.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { freePort } from './helpers/free-port.ts';
import os from 'node:os';
import path from 'node:path';
import { openEmbeddedDatabase } from '../core/embedded-postgres.ts';

const args = process.argv.slice(2);
const named = args.filter((arg) => !arg.startsWith('-'));

let stop = async () => {};
// Files named alone that reach no database (pure logic: steps, validation, builders) run without starting one.
const wantsDatabase = named.length === 0 || (await reachesDatabase(named));
if (wantsDatabase && (process.env.DATABASE_URL === undefined || process.env.DATABASE_URL === '')) {
  const given = process.env.EMBEDDED_POSTGRES_PORT?.trim() ?? '';
  if (given !== '' && !/^\d{1,5}$/.test(given)) {
    process.stderr.write(`npm test: EMBEDDED_POSTGRES_PORT must be a port number, got "${given}"\n`);
    process.exit(2);
  }
  const port = given === '' ? await freePort() : Number(given);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-test-'));
  // Every test file's service opens pools of its own, and files run in parallel: more than PostgreSQL's default 100.
  const embedded = await openEmbeddedDatabase(dataDir, port, () => {}, { maxConnections: 400 }).catch(
    async (error: Error) => {
      process.stderr.write(`npm test: ${error.message}\n`);
      await rm(dataDir, { recursive: true, force: true });
      process.exit(1);
    },
  );
  process.env.DATABASE_URL = embedded.url;
  process.stdout.write('tests use an embedded PostgreSQL (DATABASE_URL is not set)\n');
  stop = async () => {
    await embedded.stop();
    await rm(dataDir, { recursive: true, force: true });
  };
} else if (wantsDatabase) {
  process.stdout.write('tests use DATABASE_URL\n');
} else {
  process.stdout.write('the files named reach no database: none started\n');
}

// The webhook delivery tests' HTTPS receivers use a certificate of the test CA: the test processes (and the
// services they start) trust it the way a deployment trusts a private CA. Read at process start, so set here.
process.env.NODE_EXTRA_CA_CERTS = path.resolve('test/fixtures/tls/ca.pem');
// Test files run in parallel, each with engines of its own: SIP on ports the system picks.
process.env.SIP_PORT ??= '0';

/**
 * The files whose tests run calls in real time (sipp callers, RTP media, recordings of a given length): with no files
 * named they run after the rest, two at a time, so that the other files' load does not stretch their timings (the
 * machines have two cores).
 */
const realTime = [
  'test/engine/calls/calls.test.ts',
  'test/engine/calls/call-plans.test.ts',
  'test/engine/media/media.test.ts',
  'test/engine/media/media-spray.test.ts',
  'test/engine/sip/sip-transport.test.ts',
  'test/client/phone.test.ts',
  'test/client/phone-calls.test.ts',
  'test/client/phone-rounds.test.ts',
  'test/engine/sip/registrar.test.ts',
  'test/engine/calls/steps/ring/ring.test.ts',
  'test/engine/calls/steps/ring/sip-device.test.ts',
  'test/engine/calls/steps/queue/queue.test.ts',
  'test/engine/calls/steps/queue/queue-callback.test.ts',
  'test/engine/calls/dial-policy.test.ts',
  'test/api/slow-media.test.ts',
  'test/engine/calls/steps/queue/queue-races.test.ts',
  'test/engine/calls/hold.test.ts',
  'test/engine/calls/transfer.test.ts',
  'test/engine/calls/transfer-warm.test.ts',
  'test/engine/calls/hold-reinvite.test.ts',
  'test/engine/calls/supervise.test.ts',
  'test/engine/calls/steps/queue/queue-announcements.test.ts',
  'test/engine/verifications/verification-call.test.ts',
  'test/engine/messaging/texting.test.ts',
  'test/engine/messaging/texting-link.test.ts',
];
/**
 * The files that keep the machine's cores busy for a minute or more (an engine fuzzed with 100,000 messages; a whole
 * build and a registry install of the packed package; 1,000 WebRTC legs opened and closed): they run between the rest
 * and the real-time files, together, so that they neither starve the rest's waits for events nor stretch the calls'
 * timings.
 */
const heavy = [
  'test/engine/sip/sip-fuzz.test.ts',
  'test/app/production-build.test.ts',
  'test/engine/media/webrtc.test.ts',
  'test/engine/media/webrtc-g711.test.ts',
];

/**
 * TEST_LOAD: CPU-bound processes (0 to 8, default 0) that run beside the real-time files, as other work does on a busy
 * machine; CI sets 2, so that a test that leans on a short wall-clock window fails there, not on a user's machine.
 */
const testLoad = ((given) => {
  if (given === '') return 0;
  if (!/^[0-8]$/.test(given)) {
    process.stderr.write(`npm test: TEST_LOAD must be a number of processes from 0 to 8, got "${given}"\n`);
    process.exit(2);
  }
  return Number(given);
})(process.env.TEST_LOAD?.trim() ?? '');

/**
 * `count` processes that keep a core busy each until `stop`, or until this process is gone (they look at their parent
 * now and then, so that a run killed outright leaves nothing spinning).
 */
function busyProcesses(count: number): { stop(): void } {
  const spin =
    'const parent = process.ppid; for (let i = 1; ; i++) if (i % 1e7 === 0 && process.ppid !== parent) break;';
  const children = Array.from({ length: count }, () => spawn(process.execPath, ['-e', spin], { stdio: 'ignore' }));
  if (count > 0) process.stdout.write(`npm test: the real-time files run beside ${count} CPU-bound processes\n`);
  return { stop: () => children.forEach((child) => child.kill('SIGKILL')) };
}

/** How long one ava run may take before it is stopped: far beyond a slow machine's, so only a hang reaches it. */
const runLimitMs = 90 * 60_000;

/**
 * Runs ava in a process group of its own. When it exits, whatever its tests started and left running (an engine
 * process, a sipp, a browser) is killed with the group, so the run ends; a run that outlives `runLimitMs` (a worker
 * that hangs after ava's own timeout has named the pending tests) is stopped the same way and fails.
 */
function runAva(args: string[]): Promise<number> {
  const ava = spawn(process.execPath, [path.resolve('node_modules/ava/entrypoints/cli.mjs'), ...args], {
    stdio: 'inherit',
    env: process.env,
    detached: true,
  });
  const group = ava.pid;
  const killGroup = (signal: NodeJS.Signals) => {
    if (group === undefined) return;
    try {
      process.kill(-group, signal);
    } catch {
      // The group is gone already.
    }
  };
  // Ctrl-C or a stop of the run reaches the tests, as it would without a group of their own.
  const forward = (signal: NodeJS.Signals) => killGroup(signal);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  const limit = setTimeout(() => {
    process.stderr.write(`npm test: ava still running after ${runLimitMs / 60_000} minutes; stopped\n`);
    killGroup('SIGKILL');
  }, runLimitMs);
  return new Promise((resolve) =>
    ava.on('exit', (exitCode, signal) => {
      clearTimeout(limit);
      process.off('SIGINT', forward);
      process.off('SIGTERM', forward);
      killGroup('SIGKILL');
      resolve(exitCode ?? (signal ? 1 : 0));
    }),
  );
}

let code: number;
if (named.length > 0) {
  code = await runAva(args);
} else {
  // Test files mirror the source folders (test/api/, test/engine/, …): every *.test.ts under test/.
  const all = (await readdir('test', { recursive: true }))
    .filter((name) => name.endsWith('.test.ts'))
    .map((name) => `test/${name.split(path.sep).join('/')}`)
    .sort();
  const rest = await runAva([...args, ...all.filter((file) => !realTime.includes(file) && !heavy.includes(file))]);
  const busy = await runAva([...args, '--concurrency', '2', ...heavy]);
  const load = busyProcesses(testLoad);
  const calls = await runAva([...args, '--concurrency', '2', ...realTime]).finally(() => load.stop());
  code = [rest, busy, calls].find((exit) => exit !== 0) ?? 0;
}
await stop();
process.exit(code);

/**
 * Whether any of `files` imports, directly or through other files of the repository, the test database helper
 * (test/helpers/database.ts, the only reader of the suite's DATABASE_URL), or cannot be read.
 */
async function reachesDatabase(files: readonly string[]): Promise<boolean> {
  const helper = path.resolve('test/helpers/database.ts');
  const seen = new Set<string>();
  const waiting = files.map((file) => path.resolve(file));
  for (let file = waiting.pop(); file !== undefined; file = waiting.pop()) {
    if (file === helper) return true;
    if (seen.has(file)) continue;
    seen.add(file);
    const text = await readFile(file, 'utf8').catch(() => undefined);
    // A file that cannot be read is not known to be pure: the run gets its database.
    if (text === undefined) return true;
    for (const [, specifier] of text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
      if (specifier !== undefined) waiting.push(path.resolve(path.dirname(file), specifier));
    }
  }
  return false;
}
