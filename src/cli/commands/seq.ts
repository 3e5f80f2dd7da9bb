import { Command } from 'commander';
import { type Conn, call } from '../admin-http.js';
import type { CliIO } from '../io.js';
import { UsageError } from '../io.js';

/** `floe seq create|info|list|delete` — sequences live in the replicated state (docs/sequences.md). */
export function seqCommand(io: CliIO): Command {
  const seq = new Command('seq').description('manage sequences (INCR keys; kept in the replicated state)');
  const common = (c: Command) =>
    c
      .option('--endpoint <host:port>', 'any member’s HTTP address', '127.0.0.1:7380')
      .option('--user <name>', 'authenticate as (default $FLOE_USER)')
      .option('--password <pw>', 'password (default $FLOE_PASSWORD)');
  const print = (v: unknown) => io.out(`${JSON.stringify(v, null, 2)}\n`);
  const int = (name: string, v: string | undefined): number | undefined => {
    if (v === undefined) return undefined;
    if (!/^\d{1,15}$/.test(v)) throw new UsageError(`--${name} must be a non-negative integer (got "${v}")`);
    return Number(v);
  };
  const big = (name: string, v: string | undefined): string | undefined => {
    if (v === undefined) return undefined;
    if (!/^\d{1,19}$/.test(v)) throw new UsageError(`--${name} must be a non-negative integer (got "${v}")`);
    return v;
  };
  const path = (key: string) => `/v1/sequences/${encodeURIComponent(key)}`;

  common(
    seq
      .command('create')
      .argument('<key>')
      .option('--start <n>', 'first value (default 1)')
      .option('--step <n>', 'segment size (default 1000)')
      .option('--max <n>', 'last value (default 2^63-1)')
      .option('--mode <mode>', 'strict (default) or node')
      .option('--min-step <n>', 'smallest adaptive step (default: step)')
      .option('--max-step <n>', 'largest adaptive step (default: 100 x step)')
      .description('create a sequence'),
  ).action(
    async (
      key: string,
      o: Conn & {
        start?: string;
        step?: string;
        max?: string;
        mode?: string;
        minStep?: string;
        maxStep?: string;
      },
    ) => {
      if (o.mode !== undefined && o.mode !== 'strict' && o.mode !== 'node')
        throw new UsageError(`--mode must be strict or node (got "${o.mode}")`);
      print(
        await call(io, o, 'POST', '/v1/sequences', {
          key,
          start: big('start', o.start),
          max: big('max', o.max),
          step: int('step', o.step),
          minStep: int('min-step', o.minStep),
          maxStep: int('max-step', o.maxStep),
          mode: o.mode,
        }),
      );
    },
  );

  common(seq.command('info').argument('<key>').description('show a sequence and its high-water mark')).action(
    async (key: string, o: Conn) => print(await call(io, o, 'GET', path(key))),
  );

  common(seq.command('list').description('list sequences')).action(async (o: Conn) =>
    print(await call(io, o, 'GET', '/v1/sequences')),
  );

  common(
    seq
      .command('delete')
      .argument('<key>')
      .description('delete a sequence (re-creating it never repeats a value)'),
  ).action(async (key: string, o: Conn) => print(await call(io, o, 'DELETE', path(key))));

  return seq;
}
