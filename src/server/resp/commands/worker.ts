import { getLayout, layoutFingerprint, PRESET_NAMES } from '../../../id/index.js';
import type { LeasePermission, LeaseReply } from '../backend.js';
import { type CommandContext, type CommandSpecInput, integerArg, lower, text, tokenArg } from '../command.js';
import { errors, RespError } from '../errors.js';
import { type FieldValue, R, type Reply } from '../reply.js';
import { checkNamedCluster } from './cluster-option.js';

/**
 * Worker-ID leases, delegated to the backend. The app name is the key (argument 1): on a follower the writes
 * are answered `-MOVED <slot(app)> <leader>` before the backend is called, so cluster clients follow the leader.
 * Every one takes `CLUSTER uuid`, checked before anything is done (cluster-option.ts), and every lease record ends
 * with the cluster that answers it (`cluster`, once this node knows it).
 */
export const workerCommands: CommandSpecInput[] = [
  {
    name: 'worker.acquire',
    arity: -3,
    flags: ['write', 'denyoom'],
    firstKey: 1,
    group: 'floe',
    summary:
      'WORKER.ACQUIRE app nodeId [TTL ms] [REQID id] [INCARNATION id] [LAYOUT name|fingerprint] [BOUND ms] [CLUSTER uuid]: lease a worker ID of app to instance nodeId (REQID makes retries by the same INCARNATION idempotent; LAYOUT is checked against the layout pinned for app; BOUND promises the highest timestamp used before the first renewal; CLUSTER refuses the call on a node of another cluster).',
    since: '0.1.0',
    handler: async (ctx, args) => {
      const app = appArg(args[1]);
      const nodeId = text(args[2]);
      if (nodeId.length === 0) throw new RespError('ERR nodeId must not be empty');
      const opts = parseOptions(args, 3, ['ttl', 'reqid', 'incarnation', 'layout', 'bound', 'cluster']);
      const ttlMs = positiveMs(opts.get('ttl'), 'TTL');
      const reqid = opts.get('reqid');
      const requestId = reqid === undefined ? undefined : text(reqid);
      const inc = opts.get('incarnation');
      const incarnation = inc === undefined ? undefined : text(inc);
      const layoutArg = opts.get('layout');
      const layout = layoutArg === undefined ? undefined : layoutOption(text(layoutArg));
      const boundMs = nonNegativeMs(opts.get('bound'), 'BOUND');
      checkNamedCluster(ctx, opts.get('cluster'));
      authorize(ctx, app, 'acquire');
      return answer(
        ctx,
        await ctx.server.backend.workerAcquire({
          app,
          nodeId,
          ttlMs,
          requestId,
          incarnation,
          ...(layout === undefined ? {} : { layout }),
          ...(boundMs === undefined ? {} : { boundMs }),
          user: ctx.session.user,
        }),
      );
    },
  },
  {
    name: 'worker.renew',
    arity: -4,
    flags: ['write', 'fast'],
    firstKey: 1,
    group: 'floe',
    summary:
      'WORKER.RENEW app workerId token [BOUND ms] [CLUSTER uuid]: extend a lease held with fencing token.',
    since: '0.1.0',
    handler: async (ctx, args) => {
      const app = appArg(args[1]);
      const workerId = workerIdArg(args[2]);
      const token = tokenArg(args[3]);
      const opts = parseOptions(args, 4, ['bound', 'cluster']);
      const boundMs = nonNegativeMs(opts.get('bound'), 'BOUND');
      checkNamedCluster(ctx, opts.get('cluster'));
      authorize(ctx, app, 'renew');
      return answer(
        ctx,
        await ctx.server.backend.workerRenew({ app, workerId, token, boundMs, user: ctx.session.user }),
      );
    },
  },
  {
    name: 'worker.release',
    arity: -4,
    flags: ['write', 'fast'],
    firstKey: 1,
    group: 'floe',
    summary: 'WORKER.RELEASE app workerId token [LAST ms] [CLUSTER uuid]: give a lease back; OK.',
    since: '0.1.0',
    handler: async (ctx, args) => {
      const app = appArg(args[1]);
      const workerId = workerIdArg(args[2]);
      const token = tokenArg(args[3]);
      const opts = parseOptions(args, 4, ['last', 'cluster']);
      const lastMs = nonNegativeMs(opts.get('last'), 'LAST');
      checkNamedCluster(ctx, opts.get('cluster'));
      authorize(ctx, app, 'release');
      await ctx.server.backend.workerRelease({ app, workerId, token, lastMs, user: ctx.session.user });
      return R.OK;
    },
  },
  {
    name: 'worker.list',
    arity: -2,
    flags: ['readonly'],
    firstKey: 1,
    group: 'floe',
    summary: 'WORKER.LIST app [CLUSTER uuid]: every current lease of app, by worker ID.',
    since: '0.1.0',
    handler: async (ctx, args) => {
      const app = appArg(args[1]);
      checkNamedCluster(ctx, parseOptions(args, 2, ['cluster']).get('cluster'));
      authorize(ctx, app, 'read');
      const leases = await ctx.server.backend.workerList({ app, user: ctx.session.user });
      const cluster = ctx.server.backend.clusterUid?.();
      return R.array(leases.map((l) => leaseRecord(l, cluster)));
    },
  },
];

/** A lease record naming the cluster that answers it, once this node knows it (read after the backend answered). */
function answer(ctx: CommandContext, l: LeaseReply): Reply {
  return leaseRecord(l, ctx.server.backend.clusterUid?.());
}

/**
 * A lease as a record: worker_id, datacenter_id, token, expires_at_ms, high_water_ms, ttl_ms, app, node_id, extras,
 * then `cluster` when given.
 */
export function leaseRecord(l: LeaseReply, cluster?: string): Reply {
  const fields: [string, FieldValue][] = [
    ['worker_id', l.workerId],
    ['datacenter_id', l.datacenterId],
    ['token', l.token],
    ['expires_at_ms', l.expiresAtMs],
    ['high_water_ms', l.highWaterMs],
    ['ttl_ms', l.ttlMs],
    ['app', l.app],
    ['node_id', l.nodeId],
  ];
  if (l.extra) for (const [k, v] of Object.entries(l.extra)) fields.push([k, v]);
  if (cluster !== undefined) fields.push(['cluster', cluster]);
  return R.record(fields);
}

/** A preset name (`floe`, `twitter`, ...) as its fingerprint; anything else is taken as a fingerprint already. */
function layoutOption(v: string): string {
  if (v.length === 0) throw new RespError('ERR invalid LAYOUT: must name a preset or a layout fingerprint');
  const preset = (PRESET_NAMES as readonly string[]).includes(v.toLowerCase());
  return preset ? layoutFingerprint(getLayout(v)) : v;
}

function appArg(b: Buffer | undefined): string {
  const app = text(b);
  if (app.length === 0) throw new RespError('ERR app name must not be empty');
  return app;
}

function workerIdArg(b: Buffer | undefined): number {
  const v = integerArg(b);
  if (v < 0) throw errors.notInteger();
  return v;
}

/** `NAME value` pairs after the positional arguments; a repeated option takes its last value (as Redis's SET). */
function parseOptions(args: Buffer[], from: number, known: string[]): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (let i = from; i < args.length; i += 2) {
    const name = lower(args[i]);
    if (!known.includes(name) || i + 1 >= args.length) throw errors.syntax();
    out.set(name, args[i + 1]!);
  }
  return out;
}

function positiveMs(b: Buffer | undefined, option: string): number | undefined {
  if (b === undefined) return undefined;
  const v = integerArg(b);
  if (v <= 0) throw new RespError(`ERR invalid ${option} ${v}: must be a positive number of milliseconds`);
  return v;
}

function nonNegativeMs(b: Buffer | undefined, option: string): number | undefined {
  if (b === undefined) return undefined;
  const v = integerArg(b);
  if (v < 0) throw new RespError(`ERR invalid ${option} ${v}: must be a non-negative number of milliseconds`);
  return v;
}

function authorize(ctx: CommandContext, app: string, perm: LeasePermission): void {
  const check = ctx.server.backend.authorize;
  if (check && !check.call(ctx.server.backend, ctx.session.user, app, perm)) {
    throw new RespError(`NOPERM this user has no permissions to ${perm} leases of app '${app}'`);
  }
}
