import { Command } from 'commander';
import { getLayout, ShortCodec, Snowflake, systemClock, toHex } from '../../id/index.js';
import type { CliIO } from '../io.js';
import { parseIntOption, UsageError } from '../io.js';

interface GenOptions {
  count: string;
  layout: string;
  worker: string;
  datacenter: string;
  format: string;
  secret?: string;
  json?: boolean;
}

export const MAX_GEN_COUNT = 10_000_000;
const FORMATS = ['dec', 'hex', 'short'] as const;

/**
 * `floe gen [--count N] [--layout NAME] [--worker W] [--datacenter D] [--format dec|hex|short] [--json]`.
 * For trying layouts and formats: the worker ID is whatever you pass, not a lease, so two processes given the same
 * worker can produce the same ID. Services get their worker IDs from the cluster.
 */
export function genCommand(io: CliIO): Command {
  return new Command('gen')
    .description('generate IDs locally (the worker ID is not leased: for trying things out)')
    .option('--count <n>', `how many IDs, 1..${MAX_GEN_COUNT}`, '1')
    .option('--layout <name>', 'layout (see `floe layouts`)', 'floe')
    .option('--worker <w>', 'worker ID', '0')
    .option('--datacenter <d>', 'datacenter ID', '0')
    .option('--format <format>', 'dec, hex or short', 'dec')
    .option(
      '--secret <secret>',
      'key for --format short (default: $FLOE_SHORT_CODE_SECRET; none: plain sqids)',
    )
    .option('--json', 'print one JSON object')
    .action((opts: GenOptions) => {
      const layout = getLayout(opts.layout);
      const count = parseIntOption('--count', opts.count, 1, MAX_GEN_COUNT);
      const worker = parseIntOption('--worker', opts.worker, 0, layout.maxWorker);
      const datacenter = parseIntOption('--datacenter', opts.datacenter, 0, layout.maxDatacenter);
      const format = opts.format as (typeof FORMATS)[number];
      if (!FORMATS.includes(format)) {
        throw new UsageError(
          `--format must be one of ${FORMATS.join(', ')}, got ${JSON.stringify(opts.format)}`,
        );
      }
      const generator = new Snowflake({ layout, worker, datacenter, clock: systemClock });
      const ids = generator.nextBatch(count);
      const secret = opts.secret ?? io.env.FLOE_SHORT_CODE_SECRET;
      const codec = format === 'short' ? new ShortCodec(secret ? { secret } : {}) : undefined;
      const show = (id: bigint): string =>
        format === 'hex' ? toHex(id) : codec ? codec.encode(id) : id.toString();
      if (opts.json) {
        const list: string[] = [];
        for (const id of ids) list.push(show(id));
        io.out(`${JSON.stringify({ layout: layout.name, worker, datacenter, format, ids: list })}\n`);
        return;
      }
      // Write in chunks: one string per million IDs would be large, one write per ID slow.
      const chunk: string[] = [];
      for (const id of ids) {
        chunk.push(show(id));
        if (chunk.length === 4096) {
          io.out(`${chunk.join('\n')}\n`);
          chunk.length = 0;
        }
      }
      if (chunk.length > 0) io.out(`${chunk.join('\n')}\n`);
    });
}
