import { performance } from 'node:perf_hooks';
import type { CommandContext, CommandSpec } from './resp/command.js';
import type { Reply } from './resp/reply.js';

/**
 * Called after every RESP command that reached its handler: full name (`worker.acquire`, `client|setname`); `count`
 * (default one) for copies answered together (`CommandSpec.repeat`), each taking `seconds`.
 */
export type RespCommandObserver = (command: string, seconds: number, ok: boolean, count?: number) => void;

/**
 * A copy of a command table whose handlers report each run to `observe` (duration until the reply is
 * ready; ok unless the reply is an error or the handler threw). The original specs are not changed.
 * Commands refused before their handler (unknown, arity, NOAUTH, MOVED) are not observed: the
 * server's error-reply counter has them.
 */
export function instrumentCommandTable(
  table: ReadonlyMap<string, CommandSpec>,
  observe: RespCommandObserver,
): ReadonlyMap<string, CommandSpec> {
  const out = new Map<string, CommandSpec>();
  for (const [name, spec] of table) out.set(name, instrumentSpec(spec, observe));
  return out;
}

function instrumentSpec(spec: CommandSpec, observe: RespCommandObserver): CommandSpec {
  const copy: CommandSpec = { ...spec };
  if (spec.subcommands) {
    const subs = new Map<string, CommandSpec>();
    for (const [n, s] of spec.subcommands) subs.set(n, instrumentSpec(s, observe));
    copy.subcommands = subs;
  }
  const handler = spec.handler;
  if (handler) {
    const label = spec.container ? `${spec.container}|${spec.name}` : spec.name;
    copy.handler = (ctx: CommandContext, args: Buffer[]) => {
      const t0 = performance.now();
      let r: Reply | Promise<Reply>;
      try {
        r = handler(ctx, args);
      } catch (err) {
        observe(label, (performance.now() - t0) / 1000, false);
        throw err;
      }
      if (r instanceof Promise) {
        return r.then(
          (reply) => {
            observe(label, (performance.now() - t0) / 1000, reply.kind !== 'error');
            return reply;
          },
          (err: unknown) => {
            observe(label, (performance.now() - t0) / 1000, false);
            throw err;
          },
        );
      }
      observe(label, (performance.now() - t0) / 1000, r.kind !== 'error');
      return r;
    };
  }
  const repeat = spec.repeat;
  if (repeat) {
    const label = spec.container ? `${spec.container}|${spec.name}` : spec.name;
    // Copies answered together: each is counted, with an equal share of the time.
    copy.repeat = (ctx: CommandContext, args: Buffer[], n: number) => {
      const t0 = performance.now();
      const replies = repeat(ctx, args, n);
      if (replies === undefined || replies.length === 0) return replies;
      const each = (performance.now() - t0) / 1000 / replies.length;
      let errors = 0;
      for (const reply of replies) if (reply.kind === 'error') errors++;
      if (errors < replies.length) observe(label, each, true, replies.length - errors);
      if (errors > 0) observe(label, each, false, errors);
      return replies;
    };
  }
  return copy;
}
