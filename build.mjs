// `npm run build`: compiles the service (app, api, core, engine, operator; tsconfig.build.json) into dist/, which is what
// bin/switchboard.js runs, and the receiver helper into dist/client (client/tsconfig.json; `npm run build:client`
// builds that one alone).
// `tsc --build` is incremental: with nothing changed it returns in about a second, so `npm start` runs it every
// time and never starts stale code. Its state files (*.tsbuildinfo) live in dist/: deleting dist/ forces a whole build.
// TypeScript is a development dependency: an install without it (npm ci --omit=dev) skips the build instead of failing.
import { spawnSync } from 'node:child_process';
import { cpSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const root = (relative) => fileURLToPath(new URL(relative, import.meta.url));
let tsc;
try {
  tsc = require.resolve('typescript/bin/tsc');
} catch {
  process.stdout.write('switchboard: TypeScript is not installed; dist/ is not built\n');
  process.exit(0);
}
const projects = [root('tsconfig.build.json'), root('client/tsconfig.json')];
const result = spawnSync(process.execPath, [tsc, '--build', ...projects], { stdio: 'inherit' });
if (result.status !== 0) process.exit(result.status ?? 1);
// Files the compiled modules read beside themselves: core/database.ts finds the migrations next to it.
rmSync(root('dist/core/migrations'), { recursive: true, force: true });
cpSync(root('core/migrations'), root('dist/core/migrations'), { recursive: true });
