/** The `switchboard` command run as a user runs it, on a given database: exit code and output. */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Node's arguments that run the `switchboard` command from the sources (app/main.ts) through tsx: `npm test` tests
 * the sources, the processes it starts included. The compiled build that bin/switchboard.js runs (dist/) is tested
 * once, installed from the package as production installs it, by test/app/production-build.test.ts.
 */
export const switchboardArgs: string[] = [
  `--import=${import.meta.resolve('tsx')}`,
  fileURLToPath(new URL('../../app/main.ts', import.meta.url)),
];

export function runCli(
  databaseUrl: string,
  args: string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...switchboardArgs, ...args], {
      env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
