// The `check` command line, separate from cli.ts so tests can run it in-process.
//
//   tsx src/check/cli.ts --model kv|counter|unique-ids|increasing-ids [--timeout-ms N] FILES...
//
// Exit status: 0 linearizable, 1 not (or IDs violated), 2 unknown (budget spent), 3 bad usage or input.

import { parseArgs } from 'node:util';
import { HistoryFormatError, type RecordDecoder, readHistoryFiles, toOperations } from './history-file.js';
import { type CheckResult, checkHistory } from './linearizability.js';
import type { Model } from './model.js';
import { counterModel, decodeCounterRecord } from './models/counter.js';
import { decodeRegisterRecord, kvModel } from './models/register.js';
import { checkUniqueIds, decodeIdRecord, formatUniqueIdResult } from './models/unique-id.js';
import { formatCheckResult } from './report.js';

export const EXIT_OK = 0;
export const EXIT_ILLEGAL = 1;
export const EXIT_UNKNOWN = 2;
export const EXIT_USAGE = 3;

const MODELS = ['kv', 'counter', 'unique-ids', 'increasing-ids'] as const;

const USAGE = `usage: check --model ${MODELS.join('|')} [--timeout-ms N] FILE...
  Merges JSON-lines history files (one per recording process) and checks them.
  kv: read/write/cas registers per key; counter: incr/get per key;
  unique-ids: no ID issued twice per key; increasing-ids: also greater than every ID
  returned before the call was made.
  exit: 0 ok, 1 violated, 2 unknown (time budget spent), 3 bad usage or input`;

export interface Output {
  write(s: string): unknown;
}

export async function runCheckCommand(argv: readonly string[], out: Output, err: Output): Promise<number> {
  let args: ReturnType<typeof parse>;
  try {
    args = parse(argv);
  } catch (e) {
    err.write(`${(e as Error).message}\n${USAGE}\n`);
    return EXIT_USAGE;
  }
  if (args.values.help) {
    out.write(`${USAGE}\n`);
    return EXIT_OK;
  }
  const model = args.values.model;
  if (!MODELS.includes(model as (typeof MODELS)[number])) {
    err.write(
      `--model must be one of ${MODELS.join(', ')}, got ${JSON.stringify(model ?? null)}\n${USAGE}\n`,
    );
    return EXIT_USAGE;
  }
  const timeoutMs = args.values['timeout-ms'] === undefined ? 60_000 : Number(args.values['timeout-ms']);
  if (!(timeoutMs > 0)) {
    err.write(`--timeout-ms must be a positive number of milliseconds, got ${args.values['timeout-ms']}\n`);
    return EXIT_USAGE;
  }
  if (args.positionals.length === 0) {
    err.write(`no history files given\n${USAGE}\n`);
    return EXIT_USAGE;
  }

  try {
    const { records, tornTail } = await readHistoryFiles(args.positionals);
    if (tornTail) err.write('warning: ignored a torn last line (a writer died mid-line)\n');
    if (model === 'unique-ids' || model === 'increasing-ids') {
      const ops = toOperations(records, decodeIdRecord);
      const r = checkUniqueIds(ops, { mode: model === 'unique-ids' ? 'distinct' : 'increasing' });
      out.write(`${formatUniqueIdResult(r)}\n`);
      return r.result === 'ok' ? EXIT_OK : EXIT_ILLEGAL;
    }
    const r =
      model === 'kv'
        ? check(kvModel(), decodeRegisterRecord, records, timeoutMs)
        : check(counterModel(), decodeCounterRecord, records, timeoutMs);
    out.write(`${formatCheckResult(r)}\n`);
    return r.result === 'ok' ? EXIT_OK : r.result === 'illegal' ? EXIT_ILLEGAL : EXIT_UNKNOWN;
  } catch (e) {
    if (e instanceof HistoryFormatError || e instanceof RangeError || (e as NodeJS.ErrnoException).code) {
      err.write(`error: ${(e as Error).message}\n`);
      return EXIT_USAGE;
    }
    throw e;
  }
}

function check<S, I, O>(
  model: Model<S, I, O>,
  decode: RecordDecoder<I, O>,
  records: Parameters<typeof toOperations>[0],
  timeoutMs: number,
): CheckResult<unknown, unknown> {
  return checkHistory(model, toOperations(records, decode), { timeoutMs }) as CheckResult<unknown, unknown>;
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      model: { type: 'string', short: 'm' },
      'timeout-ms': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}
