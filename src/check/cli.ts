// Entry point: tsx src/check/cli.ts --model kv|counter|unique-ids|increasing-ids FILES...
// (see check-command.ts for options and exit status).

import { runCheckCommand } from './check-command.js';

process.exitCode = await runCheckCommand(process.argv.slice(2), process.stdout, process.stderr);
