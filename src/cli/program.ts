import { Command, CommanderError } from 'commander';
import { FloeIdError } from '../id/index.js';
import { auditCommand } from './commands/audit.js';
import { clusterCommand } from './commands/cluster.js';
import { decodeCommand } from './commands/decode.js';
import { devCommand } from './commands/dev.js';
import { genCommand } from './commands/gen.js';
import { layoutsCommand } from './commands/layouts.js';
import { seqCommand } from './commands/seq.js';
import { serveCommand } from './commands/serve.js';
import { userCommand } from './commands/user.js';
import { whoisCommand } from './commands/whois.js';
import { type CliIO, CommandFailedError, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UsageError } from './io.js';

/** A command factory. To add a command: write `commands/<name>.ts` exporting one, import it, list it here. */
export type CommandFactory = (io: CliIO) => Command;

export const COMMANDS: readonly CommandFactory[] = [
  decodeCommand,
  layoutsCommand,
  genCommand,
  serveCommand,
  clusterCommand,
  devCommand,
  userCommand,
  seqCommand,
  whoisCommand,
  auditCommand,
];

/** Build the `floe` program writing to `io`. Commander's own exits are turned into thrown CommanderErrors. */
export function buildProgram(io: CliIO): Command {
  const program = new Command('floe')
    .description('Floe: a highly available unique-ID service (Raft-leased Snowflake worker IDs, segments)')
    .version('0.1.0', '-V, --version')
    .showHelpAfterError('(run with --help for usage)')
    .configureOutput({ writeOut: (s) => io.out(s), writeErr: (s) => io.err(s) })
    .exitOverride();
  for (const make of COMMANDS) {
    program.addCommand(
      make(io)
        .exitOverride()
        .configureOutput({ writeOut: (s) => io.out(s), writeErr: (s) => io.err(s) })
        .showHelpAfterError('(run with --help for usage)'),
    );
  }
  return program;
}

/**
 * Run `floe` with `argv` (without node and script). Returns the exit code: 0 ok, 2 bad input (a one-line
 * `floe: error: ...` on stderr, never a stack trace), 1 anything unexpected.
 */
export async function runCli(argv: readonly string[], io: CliIO): Promise<number> {
  const program = buildProgram(io);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return EXIT_OK;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Commander has already printed its message (or the help / version text).
      const benign = ['commander.helpDisplayed', 'commander.help', 'commander.version'];
      return benign.includes(err.code) ? EXIT_OK : EXIT_USAGE;
    }
    if (err instanceof UsageError || err instanceof FloeIdError) {
      io.err(`floe: error: ${err.message}\n`);
      return EXIT_USAGE;
    }
    if (err instanceof CommandFailedError) {
      io.err(`floe: error: ${err.message}\n`);
      return EXIT_FAILURE;
    }
    const message = err instanceof Error ? err.message : String(err);
    io.err(`floe: internal error: ${message}\n`);
    if (io.env.FLOE_DEBUG && err instanceof Error && err.stack) io.err(`${err.stack}\n`);
    return EXIT_FAILURE;
  }
}
