/**
 * The process of the `switchboard` command. bin/switchboard.js runs its compiled form (dist/app/main.js, `npm run
 * build`); the tests run it from the sources through tsx (test/helpers/cli.ts).
 */
import { main } from './cli.ts';

const code = await main(process.argv.slice(2));
if (code !== 0) process.exit(code);
