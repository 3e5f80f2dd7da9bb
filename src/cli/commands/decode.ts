import { Command } from 'commander';
import { decode, getLayout, ShortCodec, toHex, toId } from '../../id/index.js';
import type { CliIO } from '../io.js';
import { UsageError } from '../io.js';

interface DecodeOptions {
  layout: string;
  json?: boolean;
  short?: boolean;
  secret?: string;
}

/** `floe decode <id> [--layout NAME] [--json] [--short [--secret S]]`: print an ID's parts. */
export function decodeCommand(io: CliIO): Command {
  return new Command('decode')
    .description('split an ID into its time, datacenter, worker and sequence')
    .argument('<id>', 'the ID, in decimal or 0x hex (or a short code with --short)')
    .option('--layout <name>', 'layout the ID was made with (see `floe layouts`)', 'floe')
    .option('--json', 'print JSON')
    .option('--short', 'the argument is a short code from `floe gen --format short`')
    .option('--secret <secret>', 'secret the short code was made with (default: $FLOE_SHORT_CODE_SECRET)')
    .action((text: string, opts: DecodeOptions) => {
      const layout = getLayout(opts.layout);
      let id: bigint;
      if (opts.short) {
        const secret = opts.secret ?? io.env.FLOE_SHORT_CODE_SECRET;
        id = new ShortCodec(secret ? { secret } : {}).decode(text.trim());
      } else {
        if (!/^\s*(?:[0-9]+|0x[0-9a-fA-F]+)\s*$/.test(text)) {
          throw new UsageError(`id must be a decimal or 0x-hex integer, got ${JSON.stringify(text)}`);
        }
        id = toId(text);
      }
      const parts = decode(id, layout);
      const result = {
        id: id.toString(),
        hex: toHex(id),
        layout: layout.name,
        time: parts.time.toISOString(),
        timestamp: parts.timestamp,
        datacenter: parts.datacenter,
        worker: parts.worker,
        sequence: parts.sequence,
      };
      if (opts.json) {
        io.out(`${JSON.stringify(result)}\n`);
        return;
      }
      const width = Math.max(...Object.keys(result).map((k) => k.length)) + 2;
      io.out(
        Object.entries(result)
          .map(([k, v]) => `${k.padEnd(width)}${v}\n`)
          .join(''),
      );
    });
}
