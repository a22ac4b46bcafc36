/**
 * The churn check of both WebRTC stacks' tests: runs test/helpers/webrtc-churn.ts in a child process and checks that
 * it ended cleanly with memory and threads flat between its checkpoint and its end.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import type { ExecutionContext } from 'ava';

/** Runs test/helpers/webrtc-churn.ts with endpoints of `stack`: 1,000 legs, no crash, memory and threads flat. */
export async function churn(t: ExecutionContext, stack: 'libwebrtc' | 'g711'): Promise<void> {
  const legs = 1000;
  const child = spawn(process.execPath, ['--expose-gc', '--import=tsx', path.resolve('test/helpers/webrtc-churn.ts')], {
    env: { ...process.env, LEGS: String(legs), CONCURRENCY: '8', CHECKPOINT: '100', STACK: stack },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
    child.on('exit', (exitCode, exitSignal) => resolve([exitCode, exitSignal])),
  );
  t.log(stdout.trim());
  t.is(signal, null, `the churn process died of ${signal}: ${stderr}`);
  t.is(code, 0, stderr);
  const lines = stdout
    .trim()
    .split('\n')
    .map(
      (line) =>
        JSON.parse(line) as {
          legs: number;
          seconds: number;
          heapUsed: number;
          external: number;
          rss: number;
          threads: number;
          errors: number;
        },
    );
  const early = lines[0];
  const end = lines.at(-1);
  if (early === undefined || end === undefined || lines.length < 2) {
    t.fail(`no measurements: ${stdout}`);
    return;
  }
  const mb = (bytes: number) => (bytes / 1048576).toFixed(1);
  t.log(
    `${end.legs} legs in ${end.seconds} s; after ${early.legs} -> ${end.legs}: heap+external ${mb(early.heapUsed + early.external)} -> ${mb(end.heapUsed + end.external)} MB, RSS ${mb(early.rss)} -> ${mb(end.rss)} MB, threads ${early.threads} -> ${end.threads}`,
  );
  t.is(end.legs, legs);
  t.is(end.errors, 0);
  t.true(end.threads <= early.threads + 2, `threads ${early.threads} -> ${end.threads}`);
  t.true(
    end.heapUsed + end.external <= early.heapUsed + early.external + 4 * 1048576,
    'heap + external within 4 MB of the checkpoint',
  );
  // The binding's native memory (RSS) settles slowly; 80 MB over 900 legs is 90 KB a leg, a leak well above
  // what test/helpers/webrtc-churn.ts measures (see docs/phones.md, "Legs").
  t.true(end.rss <= early.rss + 80 * 1048576, `RSS ${mb(early.rss)} -> ${mb(end.rss)} MB`);
}
