#!/usr/bin/env node
// The `switchboard` command: the compiled build in dist/ (`npm run build`; `npm start` and `npm pack` build first).
// Production runs JavaScript only: TypeScript and tsx are development dependencies.
import { existsSync } from 'node:fs';

const entry = new URL('../dist/app/main.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write(
    'switchboard: dist/ holds no build: run `npm run build` (TypeScript is a development dependency)\n',
  );
  process.exit(1);
}
await import(entry.href);
