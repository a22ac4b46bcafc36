#!/usr/bin/env node
// The `switchboard` command. The sources are TypeScript, run through tsx's loader (a runtime dependency).
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../core/cli.ts');
const code = await main(process.argv.slice(2));
if (code !== 0) process.exit(code);
