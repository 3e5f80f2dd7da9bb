import type { LeasePermission, RespBackend, SequenceBackend, SequenceInfoReply } from '../backend.js';
import { type CommandContext, type CommandSpecInput, lower, text } from '../command.js';
import { errors, RespError } from '../errors.js';
import { R, type Reply } from '../reply.js';
import { checkNamedCluster } from './cluster-option.js';

const MAX_KEY_BYTES = 256;
const MAX_INT64 = (1n << 63n) - 1n;

/** INCR / INCRBY: inline when the backend can answer now (`incrByNow`), else through the promise. */
function incr(ctx: CommandContext, key: string, n: bigint): Reply | Promise<Reply> {
  authorize(ctx, key, 'issue');
  const b = backendOf(ctx);
  const at = ctx.session.arrivedAt;
  if (at !== undefined && b.incrByNow !== undefined) {
    const v = b.incrByNow(key, n, at);
    if (v !== undefined) return intReply(v);
  }
  return b.incrBy(key, n, { arrivedAt: at }).then(intReply);
}

/**
 * `times` copies of INCRBY key n (INCR: n = 1) read together: the replies of those the backend answers now, in order
 * (`incrRepeatedNow`); the others run one by one.
 */
function incrRepeated(ctx: CommandContext, key: string, n: bigint, times: number): Reply[] | undefined {
  authorize(ctx, key, 'issue');
  const b = backendOf(ctx);
  const at = ctx.session.arrivedAt;
  if (at === undefined || b.incrRepeatedNow === undefined) return undefined;
  return b.incrRepeatedNow(key, n, times, at).map(intReply);
}

/**
 * Sequences over RESP (docs/sequences.md): INCR, INCRBY and GET as Redis answers them, plus SEQ.*.
 * The key is argument 1, so followers answer `-MOVED` and cluster clients follow the leader.
 */
export const sequenceCommands: CommandSpecInput[] = [
  {
    name: 'incr',
    arity: 2,
    flags: ['write', 'denyoom', 'fast'],
    firstKey: 1,
    group: 'string',
    summary: 'INCR key: the next value of sequence key (strictly increasing across the cluster).',
    servedLocally: local,
    since: '0.1.0',
    // Not async: a pipelined INCR whose leadership check already ran is answered inline, without a promise (a
    // synchronous throw is an error reply all the same).
    handler: (ctx, args) => incr(ctx, keyArg(args[1]), 1n),
    repeat: (ctx, args, n) => incrRepeated(ctx, keyArg(args[1]), 1n, n),
  },
  {
    name: 'incrby',
    arity: 3,
    flags: ['write', 'denyoom', 'fast'],
    firstKey: 1,
    group: 'string',
    summary: 'INCRBY key n: reserves the next n values of sequence key and returns the last of them.',
    servedLocally: local,
    since: '0.1.0',
    handler: (ctx, args) => {
      const key = keyArg(args[1]);
      const n = int64Arg(args[2]);
      if (n <= 0n) throw new RespError('ERR increment must be a positive integer (sequences only go up)');
      return incr(ctx, key, n);
    },
    repeat: (ctx, args, times) => {
      const n = int64Arg(args[2]);
      return n > 0n ? incrRepeated(ctx, keyArg(args[1]), n, times) : undefined;
    },
  },
  {
    name: 'get',
    arity: 2,
    flags: ['readonly', 'fast'],
    firstKey: 1,
    group: 'string',
    summary: 'GET key: the last value of sequence key issued by the leader (nil when no such sequence).',
    servedLocally: local,
    since: '0.1.0',
    handler: async (ctx, args) => {
      const key = keyArg(args[1]);
      authorize(ctx, key, 'read');
      const v = await backendOf(ctx).get(key);
      return v === undefined ? R.NULL : R.bulk(String(v));
    },
  },
  {
    name: 'seq.create',
    arity: -2,
    flags: ['write', 'denyoom'],
    firstKey: 1,
    group: 'floe',
    summary:
      'SEQ.CREATE key [START n] [STEP n] [MAX n] [MODE strict|node] [MINSTEP n] [MAXSTEP n]: create a sequence (defaults: START 1, STEP 1000, MODE strict).',
    since: '0.1.0',
    handler: async (ctx, args) => {
      const key = keyArg(args[1]);
      const o = options(args, 2, ['start', 'step', 'max', 'mode', 'minstep', 'maxstep']);
      const mode = o.get('mode');
      const modeText = mode === undefined ? undefined : lower(mode);
      if (modeText !== undefined && modeText !== 'strict' && modeText !== 'node')
        throw new RespError(`ERR MODE must be strict or node, got '${text(mode).slice(0, 40)}'`);
      authorize(ctx, key, 'admin');
      const r = await backendOf(ctx).create({
        key,
        start: optBig(o.get('start')),
        max: optBig(o.get('max')),
        step: optNum(o.get('step')),
        minStep: optNum(o.get('minstep')),
        maxStep: optNum(o.get('maxstep')),
        mode: modeText as 'strict' | 'node' | undefined,
      });
      return infoRecord(r.info, [['created', r.created ? 1 : 0]]);
    },
  },
  {
    name: 'seq.info',
    arity: 2,
    flags: ['readonly'],
    firstKey: 1,
    group: 'floe',
    summary: 'SEQ.INFO key: configuration and high-water mark of a sequence (nil when none).',
    since: '0.1.0',
    handler: async (ctx, args) => {
      const key = keyArg(args[1]);
      authorize(ctx, key, 'read');
      const info = await backendOf(ctx).info(key, ctx.session.readonlyMode);
      return info === undefined ? R.NULL : infoRecord(info);
    },
  },
  {
    name: 'seq.list',
    arity: 1,
    flags: ['readonly'],
    group: 'floe',
    summary: 'SEQ.LIST: every sequence key this user may read, sorted (the first 1000).',
    since: '0.1.0',
    handler: async (ctx) => {
      const all = await backendOf(ctx).list(ctx.session.readonlyMode);
      const check = ctx.server.backend.authorize;
      const visible = all.filter(
        (s) => !check || check.call(ctx.server.backend, ctx.session.user, s.key, 'read'),
      );
      return R.bulks(visible.map((s) => s.key));
    },
  },
  {
    name: 'seq.delete',
    arity: 2,
    flags: ['write'],
    firstKey: 1,
    group: 'floe',
    summary: 'SEQ.DELETE key: delete a sequence (1, or 0 when none); re-creating it never repeats a value.',
    since: '0.1.0',
    handler: async (ctx, args) => {
      const key = keyArg(args[1]);
      authorize(ctx, key, 'admin');
      return R.int((await backendOf(ctx).delete(key)) ? 1 : 0);
    },
  },
  {
    name: 'seq.alloc',
    arity: -3,
    flags: ['write', 'denyoom'],
    firstKey: 1,
    group: 'floe',
    summary:
      'SEQ.ALLOC key n [CLUSTER uuid]: a segment of n values for the caller; replies [start, end) (end exclusive). CLUSTER refuses the call on a node of another cluster.',
    since: '0.1.0',
    handler: async (ctx, args) => {
      const key = keyArg(args[1]);
      const n = int64Arg(args[2]);
      if (n <= 0n || n > 2_147_483_647n) throw new RespError('ERR count must be in [1, 2147483647]');
      // Options repeat with the last value winning, as everywhere (review of the CLUSTER option, 4).
      let cluster: Buffer | undefined;
      for (let i = 3; i < args.length; i += 2) {
        if (lower(args[i]) !== 'cluster' || i + 1 >= args.length) throw errors.syntax();
        cluster = args[i + 1];
      }
      checkNamedCluster(ctx, cluster);
      authorize(ctx, key, 'issue');
      const r = await backendOf(ctx).alloc(key, Number(n));
      return R.array([R.int(r.start), R.int(r.end)]);
    },
  },
];

const intReply = (v: bigint): Reply => R.int(v);

/** `node`-mode sequences are served by every member (no MOVED). */
function local(backend: RespBackend, key: Buffer): boolean {
  return backend.sequences?.servesLocally(key.toString('utf8')) ?? false;
}

function backendOf(ctx: CommandContext): SequenceBackend {
  const b = ctx.server.backend.sequences;
  if (!b) throw new RespError('ERR sequences are not served by this server');
  return b;
}

function keyArg(b: Buffer | undefined): string {
  const key = text(b);
  if (key.length === 0) throw new RespError('ERR key must not be empty');
  if ((b?.length ?? 0) > MAX_KEY_BYTES) throw new RespError(`ERR key is longer than ${MAX_KEY_BYTES} bytes`);
  return key;
}

/** A signed 64-bit integer as Redis parses one; else `-ERR value is not an integer or out of range`. */
function int64Arg(b: Buffer | undefined): bigint {
  const s = b === undefined ? '' : b.toString('latin1');
  if (!/^-?(?:0|[1-9][0-9]{0,18})$/.test(s)) throw errors.notInteger();
  const v = BigInt(s);
  if (v > MAX_INT64 || v < -MAX_INT64 - 1n) throw errors.notInteger();
  return v;
}

function optBig(b: Buffer | undefined): bigint | undefined {
  return b === undefined ? undefined : int64Arg(b);
}

function optNum(b: Buffer | undefined): number | undefined {
  if (b === undefined) return undefined;
  const v = int64Arg(b);
  if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < 0n) throw errors.notInteger();
  return Number(v);
}

function options(args: Buffer[], from: number, known: string[]): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (let i = from; i < args.length; i += 2) {
    const name = lower(args[i]);
    if (!known.includes(name) || i + 1 >= args.length) throw errors.syntax();
    out.set(name, args[i + 1]!);
  }
  return out;
}

function authorize(ctx: CommandContext, key: string, perm: LeasePermission): void {
  const check = ctx.server.backend.authorize;
  if (check && !check.call(ctx.server.backend, ctx.session.user, key, perm)) {
    throw new RespError(`NOPERM this user has no permissions to ${perm} sequence '${key.slice(0, 64)}'`);
  }
}

function infoRecord(s: SequenceInfoReply, extra: [string, number][] = []): Reply {
  return R.record([
    ['key', s.key],
    ['mode', s.mode],
    ['start', s.start],
    ['max', s.max],
    ['step', s.step],
    ['min_step', s.minStep],
    ['max_step', s.maxStep],
    ['next', s.next],
    ...extra,
  ]);
}
