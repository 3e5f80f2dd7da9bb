import { DEFAULT_LAYOUT_NAME, decode, FloeIdError, getLayout, type Layout } from '../../../id/index.js';
import type { LeasePermission, SnowflakeBackend } from '../backend.js';
import { type CommandContext, type CommandSpecInput, integerArg, lower, text } from '../command.js';
import { errors, RespError } from '../errors.js';
import { R } from '../reply.js';
import { checkNamedCluster } from './cluster-option.js';

/**
 * SNOWFLAKE.DECODE: pure, answered by any node. SNOWFLAKE.NEXT: every node serves IDs from its own
 * leased worker ID (no MOVED). SNOWFLAKE.CREATE / SNOWFLAKE.INFO: the per-key layout, on the leader.
 */
export const snowflakeCommands: CommandSpecInput[] = [
  {
    name: 'snowflake.next',
    arity: -2,
    flags: ['write', 'fast'],
    firstKey: 1,
    group: 'floe',
    summary:
      'SNOWFLAKE.NEXT key [COUNT n] [CLUSTER uuid]: the next ID (or n IDs, an array) of key from this node’s leased worker ID. CLUSTER refuses the call on a node of another cluster.',
    since: '0.1.0',
    servedLocally: () => true,
    handler: async (ctx, args) => {
      const key = text(args[1]);
      let count: number | undefined;
      let cluster: Buffer | undefined;
      for (let i = 2; i < args.length; i += 2) {
        const name = lower(args[i]);
        if (i + 1 >= args.length) throw errors.syntax();
        if (name === 'count') {
          count = integerArg(args[i + 1]);
          if (count < 1 || count > 100_000) throw new RespError('ERR COUNT must be in [1, 100000]');
        } else if (name === 'cluster') cluster = args[i + 1];
        else throw errors.syntax();
      }
      checkNamedCluster(ctx, cluster);
      authorizeKey(ctx, key, 'issue');
      const ids = await snowflakesOf(ctx).next(key, count ?? 1);
      // COUNT asks for an array, even of one ID.
      return count !== undefined ? R.array(ids.map((id) => R.int(id))) : R.int(ids[0]!);
    },
  },
  {
    name: 'snowflake.create',
    arity: -2,
    flags: ['write'],
    firstKey: 1,
    group: 'floe',
    summary:
      'SNOWFLAKE.CREATE key [LAYOUT floe|twitter|sonyflake|baidu] [TTL ms]: IDs of key use this layout.',
    since: '0.1.0',
    handler: async (ctx, args) => {
      const key = text(args[1]);
      let layout: string | undefined;
      let ttlMs: number | undefined;
      for (let i = 2; i < args.length; i += 2) {
        const opt = lower(args[i]);
        if (i + 1 >= args.length) throw errors.syntax();
        if (opt === 'layout') layout = text(args[i + 1]);
        else if (opt === 'ttl') ttlMs = integerArg(args[i + 1]);
        else throw errors.syntax();
      }
      authorizeKey(ctx, key, 'admin');
      const r = await snowflakesOf(ctx).create(key, layout, ttlMs);
      return R.record([
        ['key', r.info.key],
        ['layout', r.info.layout],
        ['ttl_ms', r.info.ttlMs],
        ['created', r.created ? 1 : 0],
      ]);
    },
  },
  {
    name: 'snowflake.info',
    arity: 2,
    flags: ['readonly'],
    firstKey: 1,
    group: 'floe',
    summary: 'SNOWFLAKE.INFO key: the layout and lease TTL of key (nil when none).',
    since: '0.1.0',
    servedLocally: () => true,
    handler: async (ctx, args) => {
      const key = text(args[1]);
      authorizeKey(ctx, key, 'read');
      const info = snowflakesOf(ctx).info(key);
      return info
        ? R.record([
            ['key', info.key],
            ['layout', info.layout],
            ['ttl_ms', info.ttlMs],
          ])
        : R.NULL;
    },
  },
  {
    name: 'snowflake.decode',
    arity: -2,
    flags: ['readonly', 'fast', 'stale', 'loading'],
    group: 'floe',
    summary:
      'SNOWFLAKE.DECODE id [LAYOUT floe|twitter|sonyflake|baidu]: the parts of an ID (decimal or 0x hex).',
    since: '0.1.0',
    handler: (_ctx, args) => {
      let layout: Layout;
      try {
        layout = getLayout(DEFAULT_LAYOUT_NAME);
        for (let i = 2; i < args.length; i += 2) {
          if (lower(args[i]) !== 'layout' || i + 1 >= args.length) throw errors.syntax();
          layout = getLayout(text(args[i + 1]));
        }
        const id = text(args[1]);
        const parts = decode(id, layout);
        return R.record([
          ['id', id],
          ['layout', layout.name],
          ['timestamp_ms', parts.timestamp],
          ['time', parts.time.toISOString()],
          ['datacenter_id', parts.datacenter],
          ['worker_id', parts.worker],
          ['sequence', parts.sequence],
        ]);
      } catch (err) {
        if (err instanceof FloeIdError) throw new RespError(`ERR ${err.message}`);
        throw err;
      }
    },
  },
];

function snowflakesOf(ctx: CommandContext): SnowflakeBackend {
  const b = ctx.server.backend.snowflakes;
  if (!b) throw new RespError('ERR server-side Snowflake is not served by this server');
  return b;
}

function authorizeKey(ctx: CommandContext, key: string, perm: LeasePermission): void {
  const check = ctx.server.backend.authorize;
  if (check && !check.call(ctx.server.backend, ctx.session.user, key, perm))
    throw new RespError(`NOPERM this user has no permissions to ${perm} snowflake key '${key.slice(0, 64)}'`);
}
