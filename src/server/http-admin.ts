import { createHmac, timingSafeEqual } from 'node:crypto';
import type { TlsOptions } from 'node:tls';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { hostPortProblem } from '../net/host-port.js';
import { NotLeaderError } from '../node/errors.js';
import type { FloeNode } from '../node/node.js';
import { allocProof, REMOTE_ALLOC_PATH } from '../sequences/remote-alloc.js';
import { encodeKvCommand, type KvResult, type KvStateMachine } from '../state/kv-state-machine.js';
import {
  encodeSequenceCommand,
  parseSequenceCommand,
  SEQUENCE_NAMESPACE,
  type SequenceResult,
} from '../state/sequences/index.js';
import { clusterView } from './dashboard/cluster-view.js';
import { type DashboardOptions, type DashboardSources, registerDashboard } from './dashboard/index.js';
import type { FloeServices } from './floe-services.js';
import { registerFloeApi } from './http-api.js';
import { type ErrorBody, sendHttpError } from './http-errors.js';
import { hardenHttp, MAX_PARAM_LENGTH, strictPositiveInt } from './http-hardening.js';
import {
  type HttpLimits,
  httpClientErrorHandler,
  limitedServerFactory,
  resolveHttpLimits,
} from './http-limits.js';
import { NodeMetrics } from './metrics.js';
import { mergeDefined, serveLimits } from './serve-limits.js';

/** Refused connections are worth a warning on stderr even when the request logger is off. */
const limitLogger = {
  warn(obj: object, msg: string): void {
    process.stderr.write(`${JSON.stringify({ level: 40, time: Date.now(), ...obj, msg })}\n`);
  },
};

export interface HttpAdminOptions {
  node: FloeNode<unknown>;
  kv: KvStateMachine;
  host: string;
  port: number;
  /** Leases, users and auth: when given, the lease/user API and authentication are served too. */
  services?: FloeServices;
  /** The cluster secret: members prove it (HMAC) when they publish their client addresses. */
  clusterSecret?: string;
  /** Request bodies larger than this are refused with 413. Default `limits.bodyLimitBytes` (128 KiB). */
  bodyLimit?: number;
  /** Timeouts and connection limits (see http-limits.ts); default: `floe serve`'s flags, then built-in defaults. */
  limits?: Partial<HttpLimits>;
  logger?: boolean;
  /**
   * HTTPS: certificate, key, CA and client-certificate policy as `tls.createServer` takes them
   * (docs/tls.md). Default: plain HTTP. Reload with `app.server.setSecureContext(...)`.
   */
  tls?: TlsOptions;
  /**
   * The node's metrics (docs/metrics.md): `floe serve` passes one that also reads storage, transport,
   * lease and sequence state and the RESP server. Default: Raft, HTTP and the given services only.
   */
  metrics?: NodeMetrics;
  /** Without `metrics`: register process and Node.js runtime metrics too. Default true. */
  defaultMetrics?: boolean;
  /**
   * The live dashboard at `/` (docs/dashboard.md); `false` leaves it out. `fetchMember` reads another
   * member's `/v1/cluster` (default: plain `fetch` over http://; pass one that speaks the cluster's TLS).
   */
  dashboard?: false | (DashboardOptions & Pick<DashboardSources, 'fetchMember' | 'scheme' | 'memberFetch'>);
}

export type { ErrorBody };
export { clusterView };

/**
 * The HTTP listener every node runs: cluster status, health, Prometheus metrics, membership
 * management and a small linearizable key-value/counter API.
 *
 * Writes (and linearizable reads) sent to a follower are answered `307 Temporary Redirect` with
 * `Location` pointing at the leader's HTTP address (method and body are preserved by clients that
 * follow 307), and a JSON body naming the leader; with no known leader the reply is 503.
 */
export async function startHttpAdmin(opts: HttpAdminOptions): Promise<FastifyInstance> {
  const app = await buildHttpAdmin(opts);
  return listenHttpAdmin(app, opts);
}

/** What `buildHttpAdmin` takes: everything but where to listen. */
export type HttpAdminBuildOptions = Omit<HttpAdminOptions, 'host' | 'port'>;

/** Listens on `host:port`; on failure (e.g. EADDRINUSE) the app is closed and the error thrown. */
export async function listenHttpAdmin(
  app: FastifyInstance,
  where: { host: string; port: number },
): Promise<FastifyInstance> {
  try {
    await app.listen({ host: where.host, port: where.port });
  } catch (err) {
    await app.close();
    throw err;
  }
  return app;
}

/**
 * Builds the HTTP app with every route, hook, metric and the dashboard, without listening: tests call
 * `app.inject()`, `listenHttpAdmin` (or `startHttpAdmin`) puts it on a port. Pass
 * `defaultMetrics: false` where many apps share one process (no process/runtime collectors).
 */
export async function buildHttpAdmin(opts: HttpAdminBuildOptions): Promise<FastifyInstance> {
  const { node, kv } = opts;
  const limits = resolveHttpLimits(mergeDefined(serveLimits().http, opts.limits));
  const app = Fastify({
    logger: opts.logger ?? false,
    bodyLimit: opts.bodyLimit ?? limits.bodyLimitBytes,
    serverFactory: limitedServerFactory(limits, limitLogger, opts.tls),
    clientErrorHandler: httpClientErrorHandler(limits),
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
  });
  hardenHttp(app);
  const metrics =
    opts.metrics ??
    new NodeMetrics({
      node,
      defaultMetrics: opts.defaultMetrics,
      leaseService: opts.services?.leases,
      sequenceService: opts.services?.sequences,
      snowflakes: opts.services?.snowflakes,
    });
  metrics.attachHttp(app);
  const registry = metrics.registry;
  if (opts.dashboard !== false) {
    registerDashboard(
      app,
      {
        node,
        metrics,
        leaseState: metrics.sources.leases,
        leaseService: opts.services?.leases,
        sequenceState: metrics.sources.sequences,
        fetchMember: opts.dashboard?.fetchMember,
        scheme: opts.dashboard?.scheme ?? (opts.tls ? 'https' : 'http'),
        memberFetch: opts.dashboard?.memberFetch,
      },
      opts.dashboard,
    );
  }

  const fail = sendHttpError;

  const kvReply = (reply: FastifyReply, r: KvResult): FastifyReply => {
    if (r.ok) return reply.send(r);
    const code = r.error === 'compare failed' ? 409 : 400;
    return reply
      .code(code)
      .send({ error: code === 409 ? 'compare_failed' : 'bad_request', message: r.error, value: r.value });
  };

  if (opts.services) registerFloeApi(app, opts.services, fail);

  app.get('/healthz', async (_req, reply) => {
    const st = node.stopped;
    if (st) return reply.code(503).send({ ok: false, reason: st });
    return { ok: true };
  });

  app.get('/readyz', async (_req, reply) => {
    const s = node.status();
    const ready = !s.stopped && s.lead !== 0 && s.appliedIndex >= s.commit;
    if (!ready)
      return reply.code(503).send({ ready: false, lead: s.lead, commit: s.commit, applied: s.appliedIndex });
    return { ready: true, lead: s.lead, commit: s.commit, applied: s.appliedIndex };
  });

  app.get('/metrics', async (_req, reply) => {
    reply.header('content-type', registry.contentType);
    return registry.metrics();
  });

  app.get('/v1/cluster', async () => clusterView(node));

  // A follower allocates a segment of a node-mode sequence through the leader. Members only: the
  // request carries an HMAC of the command under the cluster secret (allocProof).
  app.post<{ Body: Record<string, unknown> }>(REMOTE_ALLOC_PATH, async (req, reply) => {
    const b = req.body ?? {};
    const cmd = parseSequenceCommand({ ...b, ns: SEQUENCE_NAMESPACE, op: 'alloc', proof: undefined });
    // The documented {error, message} shape; `ok` and `code` stay for the followers that read them.
    if ('ok' in cmd) return reply.code(400).send({ error: cmd.code, ...cmd });
    if (cmd.op !== 'alloc') return reply.code(400).send({ error: 'bad_command', message: 'alloc expected' });
    const expected = opts.clusterSecret ? allocProof(opts.clusterSecret, cmd) : undefined;
    if (!expected || typeof b.proof !== 'string' || !safeEqual(b.proof, expected))
      return reply
        .code(403)
        .send({ error: 'forbidden', message: 'segment allocation needs the cluster secret' });
    if (!node.isLeader) return fail(reply, new NotLeaderError(node.id, node.leaderHint()), req.url);
    try {
      const r = (await node.propose(encodeSequenceCommand(cmd))) as SequenceResult;
      if (r.ok) return r;
      return reply
        .code(r.code === 'not_found' ? 404 : r.code === 'exhausted' ? 409 : 400)
        .send({ error: r.code, ...r });
    } catch (err) {
      return fail(reply, err, req.url);
    }
  });

  // A follower asks the leader to record its client addresses in the log. Only members may: the
  // request carries an HMAC of its fields under the cluster secret (see addressProof).
  app.post<{ Params: { id: string }; Body: { httpAddr?: unknown; respAddr?: unknown; proof?: unknown } }>(
    '/v1/members/:id/addresses',
    async (req, reply) => {
      const id = strictPositiveInt(req.params.id) ?? -1;
      const { httpAddr, respAddr, proof } = req.body ?? {};
      if (
        !Number.isSafeInteger(id) ||
        id <= 0 ||
        typeof httpAddr !== 'string' ||
        typeof respAddr !== 'string'
      )
        return reply
          .code(400)
          .send({ error: 'bad_request', message: 'need member id, httpAddr and respAddr' });
      const expected = opts.clusterSecret
        ? addressProof(opts.clusterSecret, id, httpAddr, respAddr)
        : undefined;
      if (!expected || typeof proof !== 'string' || !safeEqual(proof, expected))
        return reply
          .code(403)
          .send({ error: 'forbidden', message: 'address publication needs the cluster secret' });
      if (!node.isLeader) return fail(reply, new NotLeaderError(node.id, node.leaderHint()), req.url);
      try {
        await node.publishAddresses(id, httpAddr, respAddr);
        return { ok: true };
      } catch (err) {
        return fail(reply, err, req.url);
      }
    },
  );

  app.post<{ Body: { id?: unknown; peerAddr?: unknown; httpAddr?: unknown } }>(
    '/v1/members',
    async (req, reply) => {
      const { id, peerAddr, httpAddr } = req.body ?? {};
      if (!Number.isSafeInteger(id) || (id as number) <= 0)
        return reply.code(400).send({ error: 'bad_request', message: 'id must be a positive integer' });
      const bad =
        hostPortProblem(peerAddr, 'peerAddr') ??
        (httpAddr == null ? undefined : hostPortProblem(httpAddr, 'httpAddr'));
      if (bad) return reply.code(400).send({ error: 'bad_request', message: bad });
      try {
        await node.addMember({
          id: id as number,
          peerAddr: peerAddr as string,
          httpAddr: typeof httpAddr === 'string' ? httpAddr : undefined,
        });
        return clusterView(node);
      } catch (err) {
        return fail(reply, err, req.url);
      }
    },
  );

  app.delete<{ Params: { id: string } }>('/v1/members/:id', async (req, reply) => {
    const id = strictPositiveInt(req.params.id) ?? -1;
    if (id <= 0)
      return reply.code(400).send({ error: 'bad_request', message: 'member id must be a positive integer' });
    try {
      await node.removeMember(id);
      return clusterView(node);
    } catch (err) {
      return fail(reply, err, req.url);
    }
  });

  app.post<{ Body: { to?: unknown } }>('/v1/leader/transfer', async (req, reply) => {
    const to = req.body?.to;
    if (!Number.isSafeInteger(to) || (to as number) <= 0)
      return reply.code(400).send({ error: 'bad_request', message: 'to must be a member id' });
    try {
      await node.transferLeadership(to as number);
      return clusterView(node);
    } catch (err) {
      return fail(reply, err, req.url);
    }
  });

  // ---- key-value and counters ---------------------------------------------------------------
  const keyOk = (key: string) => key.length > 0 && Buffer.byteLength(key) <= 1024;

  app.put<{ Params: { key: string }; Body: { value?: unknown } }>('/v1/kv/:key', async (req, reply) => {
    const value = req.body?.value;
    if (!keyOk(req.params.key))
      return reply.code(400).send({ error: 'bad_request', message: 'key must be 1..1024 bytes' });
    if (typeof value !== 'string')
      return reply.code(400).send({ error: 'bad_request', message: 'body must be {"value": string}' });
    try {
      return kvReply(
        reply,
        (await node.propose(encodeKvCommand({ op: 'put', key: req.params.key, value }))) as KvResult,
      );
    } catch (err) {
      return fail(reply, err, req.url);
    }
  });

  app.post<{ Params: { key: string }; Body: { expect?: unknown; value?: unknown } }>(
    '/v1/kv/:key/cas',
    async (req, reply) => {
      const { expect, value } = req.body ?? {};
      if (!keyOk(req.params.key))
        return reply.code(400).send({ error: 'bad_request', message: 'key must be 1..1024 bytes' });
      if (typeof value !== 'string' || (expect !== null && typeof expect !== 'string'))
        return reply
          .code(400)
          .send({ error: 'bad_request', message: 'body must be {"expect": string|null, "value": string}' });
      try {
        return kvReply(
          reply,
          (await node.propose(
            encodeKvCommand({ op: 'cas', key: req.params.key, expect, value }),
          )) as KvResult,
        );
      } catch (err) {
        return fail(reply, err, req.url);
      }
    },
  );

  app.get<{ Params: { key: string }; Querystring: { consistency?: string } }>(
    '/v1/kv/:key',
    async (req, reply) => {
      try {
        if (req.query.consistency !== 'serializable') await node.linearizableRead();
        return { key: req.params.key, value: kv.get(req.params.key), applied: node.status().appliedIndex };
      } catch (err) {
        return fail(reply, err, req.url);
      }
    },
  );

  app.post<{ Params: { key: string }; Body: { by?: unknown } }>(
    '/v1/counters/:key/incr',
    async (req, reply) => {
      const by = req.body?.by ?? 1;
      if (!keyOk(req.params.key))
        return reply.code(400).send({ error: 'bad_request', message: 'key must be 1..1024 bytes' });
      if (
        !(typeof by === 'number' && Number.isSafeInteger(by)) &&
        !(typeof by === 'string' && /^-?\d{1,19}$/.test(by))
      )
        return reply.code(400).send({ error: 'bad_request', message: 'by must be an integer' });
      // Out of int64 is refused here, not at apply (nothing invalid reaches the log).
      const big = BigInt(by);
      if (big > 2n ** 63n - 1n || big < -(2n ** 63n))
        return reply
          .code(400)
          .send({ error: 'bad_request', message: 'by must be an integer in [-2^63, 2^63-1]' });
      try {
        return kvReply(
          reply,
          (await node.propose(
            encodeKvCommand({ op: 'incr', key: req.params.key, by: String(by) }),
          )) as KvResult,
        );
      } catch (err) {
        return fail(reply, err, req.url);
      }
    },
  );

  app.get<{ Params: { key: string } }>('/v1/counters/:key', async (req, reply) => {
    try {
      await node.linearizableRead();
      return { key: req.params.key, value: kv.counter(req.params.key) };
    } catch (err) {
      return fail(reply, err, req.url);
    }
  });

  return app;
}

/** HMAC-SHA256 over a member's id and client addresses, keyed with the cluster secret. */
export function addressProof(secret: string, id: number, httpAddr: string, respAddr: string): string {
  return createHmac('sha256', secret).update(`floe-publish\n${id}\n${httpAddr}\n${respAddr}`).digest('hex');
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
