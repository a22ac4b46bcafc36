// `npm run prepare`: builds the receiver helper (package export `switchboard/webhooks`) into dist/client.
// TypeScript is a development dependency: an install without it (npm ci --omit=dev) skips the build instead of failing.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
let tsc;
try {
  tsc = require.resolve('typescript/bin/tsc');
} catch {
  process.stdout.write('switchboard: TypeScript is not installed; the switchboard/webhooks helper is not built\n');
  process.exit(0);
}
const result = spawnSync(process.execPath, [tsc, '-p', new URL('./tsconfig.json', import.meta.url).pathname], {
  stdio: 'inherit',
});
process.exit(result.status ?? 1);
