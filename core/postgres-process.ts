/**
 * Runs the embedded PostgreSQL's programs (`initdb`, `postgres`) as our own child processes, so that every way they
 * can fail to start (a missing or unreachable program, a port in use, an initdb that fails, a server that exits before
 * it is ready) is an `EmbeddedPostgresError` that says why, never an unhandled 'error' event.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';

/** A failure to start the embedded PostgreSQL: the message says what failed and, where we know it, what to do. */
export class EmbeddedPostgresError extends Error {}

/** The system account PostgreSQL runs as when we are root (PostgreSQL refuses to run as root). */
export interface Account {
  name: string;
  uid: number;
  gid: number;
}

export interface RunOptions {
  /**
   * The program's working folder, entered before the switch to `account`: a folder that account could not reach by
   * its path (inside a folder only root can enter) can still be its working folder.
   */
  cwd: string;
  /** Run as this account; undefined: as the current user. */
  account?: Account | undefined;
  /** Each line the program writes. */
  log: (line: string) => void;
}

/** How many of the last output lines an error quotes. */
const quotedLines = 12;

/**
 * Only what the programs need: the locale (initdb picks the cluster's from it), the time zone and PATH. The service's
 * own settings, secrets among them, stay out of the environment of processes that run as another user.
 */
function programEnvironment(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (name === 'PATH' || name === 'TZ' || name === 'LANG' || name.startsWith('LC_')) env[name] = value;
  }
  // English messages: the server's "ready" line is recognised by its text.
  env.LC_MESSAGES = 'C';
  return env;
}

function who(account: Account | undefined): string {
  return account === undefined ? 'the current user' : `user ${account.name}`;
}

/** Why a program could not be started at all (spawn's 'error' event), in words. */
function spawnFailure(program: string, options: RunOptions, error: NodeJS.ErrnoException): EmbeddedPostgresError {
  const reason =
    error.code === 'ENOENT'
      ? existsSync(program)
        ? `the working folder ${options.cwd} of ${program} does not exist`
        : `${program} does not exist`
      : error.code === 'EACCES'
        ? `${who(options.account)} may not run ${program} (a folder on its path is closed to it, or it is not executable)`
        : `${program} could not be run as ${who(options.account)}: ${error.message}`;
  return new EmbeddedPostgresError(reason, { cause: error });
}

/**
 * Spawns the program, or rejects with why it could not be: spawn throws at once on some failures (a uid it cannot
 * switch to) and reports others later as an 'error' event, which the callers handle.
 */
function launch(
  program: string,
  args: string[],
  options: RunOptions,
  reject: (error: EmbeddedPostgresError) => void,
): ChildProcess | undefined {
  try {
    return spawn(program, args, {
      cwd: options.cwd,
      env: programEnvironment(),
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(options.account === undefined ? {} : { uid: options.account.uid, gid: options.account.gid }),
    });
  } catch (error) {
    reject(spawnFailure(program, options, error as NodeJS.ErrnoException));
    return undefined;
  }
}

/** Passes each output line to `options.log` and to `onLine`, and keeps the last ones for an error to quote. */
function watchOutput(child: ChildProcess, options: RunOptions, onLine: (line: string) => void = () => {}): string[] {
  const tail: string[] = [];
  for (const stream of [child.stdout, child.stderr]) {
    if (stream === null) continue;
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
      options.log(line);
      tail.push(line);
      if (tail.length > quotedLines) tail.shift();
      onLine(line);
    });
  }
  return tail;
}

function quote(tail: string[]): string {
  return tail.length === 0 ? '(no output)' : tail.join('\n');
}

/** Runs a program to its end; resolves with its output when it exits 0. */
export function runProgram(program: string, args: string[], options: RunOptions): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = launch(program, args, options, reject);
    if (child === undefined) return;
    const tail = watchOutput(child, options);
    // 'close' follows 'error' too: the first of the two settles.
    child.once('error', (error) => reject(spawnFailure(program, options, error)));
    child.once('close', (code, signal) => {
      if (code === 0) resolve(tail.join('\n'));
      else {
        const how = signal === null ? `exit code ${code}` : `signal ${signal}`;
        reject(new EmbeddedPostgresError(`${program} failed (${how}):\n${quote(tail)}`));
      }
    });
  });
}

export interface RunningServer {
  /** Fast shutdown (SIGINT: open sessions end, a checkpoint is written); resolves once the server has exited. */
  stop(): Promise<void>;
}

const readyLine = 'database system is ready to accept connections';

/**
 * Starts `postgres` and resolves once it accepts connections. A server that exits first rejects with the lines it
 * wrote, and with what to do when its port is taken.
 */
export function startServer(
  program: string,
  args: string[],
  port: number,
  options: RunOptions,
): Promise<RunningServer> {
  return new Promise((resolve, reject) => {
    const child = launch(program, args, options, reject);
    if (child === undefined) return;
    let ready = false;
    const exited = new Promise<void>((settle) => child.once('close', () => settle()));
    const server: RunningServer = {
      async stop() {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
        await exited;
      },
    };
    const tail = watchOutput(child, options, (line) => {
      if (!ready && line.includes(readyLine)) {
        ready = true;
        resolve(server);
      }
    });
    child.on('error', (error) => {
      if (ready) options.log(`the embedded PostgreSQL: ${error.message}`);
      else reject(spawnFailure(program, options, error));
    });
    child.once('close', (code, signal) => {
      const how = signal === null ? `exit code ${code}` : `signal ${signal}`;
      if (ready) {
        options.log(`the embedded PostgreSQL exited (${how})`);
        return;
      }
      const output = quote(tail);
      const advice = output.includes('Address already in use')
        ? `\nport ${port} is in use: set EMBEDDED_POSTGRES_PORT to a free port`
        : '';
      reject(new EmbeddedPostgresError(`the server exited before it was ready (${how}):\n${output}${advice}`));
    });
  });
}
