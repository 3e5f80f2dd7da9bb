import { respLineOf } from '../errors/table.js';
import { BackendError } from './backend.js';
import { type CommandContext, type CommandSpec, fullName, lower, type ServerState } from './command.js';
import { keyHashSlot } from './crc16.js';
import { errors, RespError } from './errors.js';
import { parseHostPort } from './node-id.js';
import { R, type Reply } from './reply.js';
import { addrOf } from './topology.js';

/** What a RESP2 client in subscribed mode may still send (Redis's list). RESP3 clients may send anything. */
const PUBSUB_CONTEXT_COMMANDS = new Set([
  'subscribe',
  'ssubscribe',
  'psubscribe',
  'unsubscribe',
  'sunsubscribe',
  'punsubscribe',
  'ping',
  'quit',
  'reset',
]);

function arityOk(spec: CommandSpec, argc: number): boolean {
  return spec.arity >= 0 ? argc === spec.arity : argc >= -spec.arity;
}

/**
 * Run one command: look it up, check arity, authentication, the pub/sub context and cluster ownership (MOVED),
 * then call its handler. Never throws and never rejects: every failure becomes an error reply.
 */
export function dispatch(ctx: CommandContext, args: Buffer[]): Reply | Promise<Reply> {
  const { session, server } = ctx;
  const name = lower(args[0]);
  let spec = server.table.get(name);
  if (!spec) return fail(server, errors.unknownCommand(args[0]!.toString('utf8'), args.slice(1)));
  if (!arityOk(spec, args.length)) return fail(server, errors.wrongArity(spec.name));
  // A container with its own handler (COMMAND) runs it when no subcommand is given.
  if (spec.subcommands && (args.length >= 2 || !spec.handler)) {
    const sub = spec.subcommands.get(lower(args[1]));
    if (!sub) return fail(server, errors.unknownSubcommand(args[1]!.toString('utf8'), spec.name));
    if (!arityOk(sub, args.length)) return fail(server, errors.wrongArity(fullName(sub)));
    spec = sub;
  }
  session.lastCommand = fullName(spec);
  if (!session.authenticated && !spec.flags.includes('no_auth') && server.backend.authRequired()) {
    return fail(server, errors.noAuth());
  }
  if (
    session.proto === 2 &&
    (session.channels.size > 0 || session.patterns.size > 0) &&
    !PUBSUB_CONTEXT_COMMANDS.has(name)
  ) {
    return fail(
      server,
      new RespError(
        `ERR Can't execute '${fullName(spec)}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context`,
      ),
    );
  }
  const key = spec.firstKey > 0 ? args[spec.firstKey] : undefined;
  if (key !== undefined && server.backend.role() !== 'leader' && !spec.servedLocally?.(server.backend, key)) {
    const write = spec.flags.includes('write');
    if (write || !session.readonlyMode) return fail(server, redirect(server, key, undefined));
  }
  try {
    const r = spec.handler!(ctx, args);
    if (r instanceof Promise) return r.catch((err: unknown) => fail(server, toRespError(server, err, key)));
    return r;
  } catch (err) {
    return fail(server, toRespError(server, err, key));
  }
}

/**
 * `n` copies of a command that `dispatch` just answered without an error, received right behind it byte for byte
 * (`RequestParser.repeatsOfLast`): the replies of the first k ≤ n of them from the command's `repeat`, in order, or
 * none when it has no `repeat` or cannot (the caller dispatches the rest one by one, which answers or refuses each).
 */
export function dispatchRepeats(ctx: CommandContext, args: Buffer[], n: number): Reply[] {
  const spec = ctx.server.table.get(lower(args[0]));
  if (spec?.repeat === undefined || spec.subcommands !== undefined) return [];
  try {
    const r = spec.repeat(ctx, args, n);
    return r !== undefined && r.length <= n ? r : [];
  } catch {
    return [];
  }
}

function fail(server: ServerState, err: RespError): Reply {
  server.counters.errorReplies++;
  return R.error(err.line);
}

/** `-MOVED <slot of key> <leader>`, or `-CLUSTERDOWN` when no leader (with an address) is known. */
export function redirect(server: ServerState, key: Buffer, hintAddr: string | undefined): RespError {
  const leader = server.topology().leader;
  const addr = parseHostPort(hintAddr) ? hintAddr : leader && !leader.isSelf ? addrOf(leader) : undefined;
  if (!addr) return errors.clusterDown();
  return errors.moved(keyHashSlot(key), addr);
}

/** Map what a handler or the backend threw to the error reply (see `backend.ts` for the rules). */
export function toRespError(server: ServerState, err: unknown, key: Buffer | undefined): RespError {
  if (err instanceof RespError) return err;
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof BackendError) {
    if (err.code === 'NOTLEADER') return key ? redirect(server, key, undefined) : errors.clusterDown();
    return new RespError(`${err.code} ${message}`);
  }
  const name = err instanceof Error ? err.name : '';
  // Every reply line comes from the error table (src/server/errors/table.ts), as the HTTP server's statuses do.
  switch (name) {
    case 'NotLeaderError': {
      const hint = (err as { leader?: { respAddr?: string } }).leader?.respAddr;
      return key ? redirect(server, key, hint) : errors.clusterDown();
    }
    case 'OverloadedError':
      return new RespError(respLineOf('overloaded', message));
    case 'ReadTimeoutError':
      return new RespError(respLineOf('timeout', message));
    // A write the node cannot tell about (it may still be applied): the stable prefix is
    // `TRYAGAIN outcome unknown:`, then the reason. Retry only idempotently (same REQID / token).
    case 'ProposalOutcomeUnknownError':
    case 'ProposalTimeoutError': {
      const reason = (err as { reason?: unknown }).reason;
      return new RespError(respLineOf('outcome_unknown', typeof reason === 'string' ? reason : 'timeout'));
    }
    // Definitely not applied (another entry committed at its index): retrying is always safe.
    case 'ProposalNotCommittedError':
      return new RespError(respLineOf('not_committed'));
    case 'NodeStoppedError':
      return new RespError(respLineOf('stopped', message));
    // The core refused to append it: certainly not applied.
    case 'ProposalDroppedError': {
      const reason = (err as { reason?: unknown }).reason;
      if (reason === 'transferring')
        return new RespError(respLineOf('not_committed', '(leadership transfer in progress)'));
      if (reason === 'tooMuchUncommitted')
        return new RespError(respLineOf('overloaded', 'overloaded: too much uncommitted log'));
      if (reason === 'confChangePending') return new RespError(respLineOf('conf_change_pending'));
      break;
    }
  }
  server.logger.warn({ err }, 'RESP command failed with an unclassified error');
  return new RespError(`ERR ${message}`);
}
