import { Command } from 'commander';
import { type Layout, PRESETS } from '../../id/index.js';
import type { CliIO } from '../io.js';

/** `floe layouts [--json]`: the preset layouts with their limits. */
export function layoutsCommand(io: CliIO): Command {
  return new Command('layouts')
    .description('list the preset Snowflake layouts: bits, tick, epoch, limits and when each runs out')
    .option('--json', 'print JSON instead of a table')
    .action((opts: { json?: boolean }) => {
      const rows = Object.values(PRESETS).map(describe);
      if (opts.json) {
        io.out(`${JSON.stringify(rows, null, 2)}\n`);
        return;
      }
      const table = [
        [
          'NAME',
          'BITS ts/dc/wk/seq',
          'ORDER',
          'UNIT',
          'EPOCH',
          'MAX WORKERS',
          'IDS/S PER WORKER',
          'RUNS OUT',
        ],
        ...rows.map((r) => [
          r.name,
          r.bits,
          r.order,
          `${r.unitMs} ms`,
          r.epoch,
          grouped(r.maxWorkers),
          grouped(r.idsPerSecond),
          r.endOfLife,
        ]),
      ];
      io.out(renderTable(table));
    });
}

function describe(l: Layout) {
  return {
    name: l.name,
    bits: `${l.timestampBits}/${l.datacenterBits}/${l.workerBits}/${l.sequenceBits}`,
    timestampBits: l.timestampBits,
    datacenterBits: l.datacenterBits,
    workerBits: l.workerBits,
    sequenceBits: l.sequenceBits,
    order: l.order,
    unitMs: l.unitMs,
    epochMs: l.epochMs,
    epoch: new Date(l.epochMs).toISOString(),
    /** Generators that can run at once (datacenters x workers). */
    maxWorkers: l.maxGenerators,
    idsPerSecond: l.idsPerSecond,
    endOfLife: new Date(l.endOfLifeMs).toISOString(),
  };
}

function grouped(n: number): string {
  return n.toLocaleString('en-US', { maximumFractionDigits: 0 });
}

/** Left-aligned columns separated by two spaces. */
export function renderTable(rows: string[][]): string {
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, cell.length);
    });
  }
  return rows
    .map((row) =>
      row
        .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
        .join('  ')
        .concat('\n'),
    )
    .join('');
}
