// Worker-ID leases (docs/leases.md), pool configuration and "who issued this ID" (docs/whois.md):
// an encapsulated plugin under /v1/apps and /v1/ids. Each route checks its own permission on the
// app. Nothing the lease state would refuse is proposed: the schema checks types, then the lease
// state's own check (precheckLease) runs before anything reaches the log.
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { FloeIdError, getLayout, type Layout } from '../../id/index.js';
import { checkHealthUrl } from '../../lease/health-prober.js';
import { StoreUnavailableError } from '../../store/errors.js';
import { type FloeServices, LEASE_ERROR_STATUS, LeaseRefusedError, unwrap } from '../floe-services.js';
import { type LeasePrecheck, precheckLease } from '../lease-precheck.js';
import type { RouteHelpers } from './auth.js';
import { errors, int, intOrString, nameParam, obj, str, WRITE_ERRORS } from './schemas.js';

export interface LeasesPluginOptions {
  services: FloeServices;
  helpers: RouteHelpers;
}

// ---- schemas --------------------------------------------------------------------------------

/** A worker-ID lease (shared schema `Lease`, added to the root app by http/index.ts). */
export const leaseSchema = obj(
  {
    ok: { type: 'boolean' },
    app: str,
    workerId: { type: 'integer', description: 'pool-wide worker ID (what renew/release name)' },
    datacenterId: int,
    localWorkerId: int,
    datacenterBits: int,
    workerBits: int,
    token: {
      type: 'integer',
      description: 'fencing token, the log index of the grant; strictly increasing per worker ID',
    },
    nodeId: str,
    ttlMs: int,
    grantedAtMs: int,
    expiresAtMs: { type: 'integer', description: 'informational (leader wall clock)' },
    highWaterMs: { type: 'integer', description: 'issue only timestamps strictly above this' },
    boundMs: { type: 'integer', description: 'the highest timestamp this holder has promised' },
    requestId: { type: 'string', description: "acquire only: the request's requestId, echoed" },
    incarnation: { type: 'string', description: "acquire only: the incarnation ('' when none was given)" },
    retried: { type: 'boolean' },
  },
  [],
  'A worker-ID lease',
);
export const LEASE_SCHEMA_ID = 'Lease';
const lease = { $ref: `${LEASE_SCHEMA_ID}#` } as const;

const appParams = obj({ app: nameParam('the application (pool) name') }, ['app']);
const workerParams = obj(
  {
    app: nameParam('the application (pool) name'),
    workerId: { type: 'string', pattern: '^\\d{1,16}$', description: 'pool-wide worker ID' },
  },
  ['app', 'workerId'],
);
const token = intOrString('the fencing token of the lease');
const leaseErrors = errors(400, 401, 403, 409, 410, ...WRITE_ERRORS);

/** The lease state's message for a field that is not an integer (what it said before schemas). */
function rangeMessage(r: LeasePrecheck): string {
  return precheckLease(r)?.message ?? 'invalid argument';
}
const base = { app: 'a', nodeId: 'n', workerId: 0, token: 1 } as const;

const acquireSchema = {
  tags: ['leases'],
  summary: 'Lease a worker ID (needs acquire on the app)',
  params: appParams,
  body: obj(
    {
      nodeId: { type: 'string', description: 'who holds the lease (host name, pod name, ...)' },
      incarnation: { type: 'string', description: 'this process run; a retry with another one is refused' },
      layout: { type: 'string', description: 'layout fingerprint the app is pinned to (docs/leases.md)' },
      healthUrl: { type: 'string', description: 'http(s) URL the leader probes (docs/leases.md)' },
      requestId: { type: 'string', description: 'makes a retried acquire return the same lease' },
      ttlMs: intOrString('lease time to live in ms'),
      boundMs: intOrString('the highest timestamp this holder may issue before renewing'),
    },
    ['nodeId'],
  ),
  response: { 200: lease, ...leaseErrors },
} as const;

const renewSchema = {
  tags: ['leases'],
  summary: 'Renew a lease (needs renew on the app)',
  params: workerParams,
  body: obj(
    {
      token,
      boundMs: intOrString('the highest timestamp this holder may issue before the next renew'),
      healthUrl: { type: 'string', description: 'a new health URL for the leader to probe' },
    },
    ['token'],
  ),
  response: { 200: lease, ...leaseErrors },
} as const;

const releaseSchema = {
  tags: ['leases'],
  summary: 'Release a lease (needs release on the app)',
  params: workerParams,
  body: obj({ token, lastTimestampMs: intOrString('the last timestamp this holder issued') }, ['token']),
  response: { 200: obj({ ok: { type: 'boolean' } }), ...leaseErrors },
} as const;

const whoisSchema = {
  tags: ['leases'],
  summary: 'Who issued this ID (docs/whois.md); needs read on the app, or on * without one',
  params: obj(
    {
      id: {
        type: 'string',
        pattern: '^(?:\\d{1,20}|0x[0-9a-fA-F]{1,16})$',
        description: 'the ID, decimal or 0x-hex, in [0, 2^63)',
      },
    },
    ['id'],
  ),
  querystring: obj({
    layout: { type: 'string', description: "the ID's layout preset (default floe)" },
    app: { type: 'string', description: 'the app whose leases to search' },
  }),
  response: {
    200: obj({}, [], 'the holder of the worker ID at the time of the ID'),
    ...errors(400, 403, 503),
  },
} as const;

const listSchema = {
  tags: ['leases'],
  summary: 'The leases of an app (needs read)',
  params: appParams,
  response: {
    200: obj({ app: str, leases: { type: 'array', items: lease } }),
    ...errors(403, 503, 504),
  },
} as const;

const getSchema = {
  tags: ['leases'],
  summary: 'One worker ID of an app (needs read)',
  params: workerParams,
  response: { 200: lease, ...errors(400, 403, 404, 503, 504) },
} as const;

const poolSchema = {
  tags: ['leases'],
  summary: "Configure an app's pool size (needs admin on the app)",
  params: appParams,
  body: obj(
    {
      bits: intOrString('worker ID bits of the pool'),
      datacenterBits: intOrString('of which datacenter bits (default 0)'),
    },
    ['bits'],
  ),
  response: { 200: obj({ ok: { type: 'boolean' } }), ...errors(400, 403, 409, ...WRITE_ERRORS) },
} as const;

// ---- routes ---------------------------------------------------------------------------------

export const leasesPlugin: FastifyPluginAsync<LeasesPluginOptions> = async (
  app,
  { services: s, helpers },
) => {
  const { fail, requires } = helpers;
  const appOf = (req: FastifyRequest) => (req.params as { app: string }).app;
  const leases = s.store ?? s.leases;

  const leaseFail = (reply: FastifyReply, err: unknown, path: string): FastifyReply => {
    if (err instanceof LeaseRefusedError) {
      return reply
        .code(LEASE_ERROR_STATUS[err.refusal.code] ?? 400)
        .send({ error: err.refusal.code, message: err.message });
    }
    if (err instanceof StoreUnavailableError)
      return reply
        .code(503)
        .header('retry-after', '1')
        .send({ error: 'store_unavailable', message: err.message });
    return fail(reply, err, path);
  };

  /** Nothing the lease state would refuse is proposed: its own check runs first (400 naming the field). */
  const precheckFails = (reply: FastifyReply, r: LeasePrecheck): boolean => {
    const bad = precheckLease(r);
    if (!bad) return false;
    void reply.code(LEASE_ERROR_STATUS[bad.code] ?? 400).send({ error: bad.code, message: bad.message });
    return true;
  };

  const toInt = (v: unknown): number | undefined =>
    typeof v === 'number' && Number.isSafeInteger(v)
      ? v
      : typeof v === 'string' && /^\d{1,16}$/.test(v)
        ? Number(v)
        : undefined;

  // Absent stays absent; anything that is not a safe integer becomes -1, which the lease state
  // refuses with an error naming the field and its range.
  const optInt = (v: unknown): number | undefined => (v === undefined ? undefined : (toInt(v) ?? -1));

  /** Parses workerId and token of a renew/release, or replies 400. */
  const workerAndToken = (
    req: FastifyRequest<{ Params: WorkerParams; Body: { token?: unknown } }>,
    reply: FastifyReply,
  ): { workerId: number; token: number } | undefined => {
    const workerId = toInt(req.params.workerId);
    const token = toInt(req.body?.token);
    if (workerId !== undefined && token !== undefined) return { workerId, token };
    void reply.code(400).send({ error: 'invalid_argument', message: 'workerId and token must be integers' });
    return undefined;
  };

  type AppParams = { app: string };
  type WorkerParams = { app: string; workerId: string };
  const workerAndTokenMessage = 'workerId and token must be integers';

  app.post<{
    Params: AppParams;
    Body: {
      nodeId: string;
      ttlMs?: unknown;
      requestId?: string;
      boundMs?: unknown;
      incarnation?: string;
      layout?: string;
      healthUrl?: string;
    };
  }>(
    '/v1/apps/:app/workers/acquire',
    {
      schema: acquireSchema,
      preValidation: requires('acquire', appOf),
      config: {
        badInput: {
          code: 'invalid_argument',
          messages: {
            nodeId: 'nodeId must be a string',
            incarnation: 'incarnation must be a string of 1..128 characters',
            layout: 'layout must be a layout fingerprint string of 1..128 characters (see docs/leases.md)',
            healthUrl: (req) =>
              checkHealthUrl((req.body as { healthUrl?: unknown }).healthUrl) ?? 'bad healthUrl',
            requestId: 'requestId must be a string of 1..128 characters',
            ttlMs: rangeMessage({ op: 'acquire', ...base, ttlMs: -1 }),
            boundMs: rangeMessage({ op: 'acquire', ...base, boundMs: -1 }),
          },
        },
      },
    },
    async (req, reply) => {
      const b = req.body;
      const badUrl = b.healthUrl === undefined ? undefined : checkHealthUrl(b.healthUrl);
      if (badUrl) return reply.code(400).send({ error: 'invalid_argument', message: badUrl });
      if (
        precheckFails(reply, {
          op: 'acquire',
          app: req.params.app,
          nodeId: b.nodeId,
          ttlMs: optInt(b.ttlMs),
          requestId: b.requestId,
          boundMs: optInt(b.boundMs),
          incarnation: b.incarnation,
          layout: b.layout,
        })
      )
        return reply;
      try {
        return unwrap(
          await leases.acquire({
            app: req.params.app,
            nodeId: b.nodeId,
            ttlMs: optInt(b.ttlMs),
            requestId: b.requestId,
            boundMs: optInt(b.boundMs),
            incarnation: b.incarnation,
            ...(b.layout === undefined ? {} : { layout: b.layout }),
            ...(b.healthUrl === undefined ? {} : { healthUrl: b.healthUrl }),
          }),
        );
      } catch (err) {
        return leaseFail(reply, err, req.url);
      }
    },
  );

  app.post<{ Params: WorkerParams; Body: { token?: unknown; boundMs?: unknown; healthUrl?: string } }>(
    '/v1/apps/:app/workers/:workerId/renew',
    {
      schema: renewSchema,
      preValidation: requires('renew', appOf),
      config: {
        badInput: {
          code: 'invalid_argument',
          messages: {
            workerId: workerAndTokenMessage,
            token: workerAndTokenMessage,
            boundMs: rangeMessage({ op: 'renew', ...base, boundMs: -1 }),
            healthUrl: (req) =>
              checkHealthUrl((req.body as { healthUrl?: unknown }).healthUrl) ?? 'bad healthUrl',
          },
        },
      },
    },
    async (req, reply) => {
      const ids = workerAndToken(req, reply);
      if (!ids) return reply;
      const boundMs = optInt(req.body?.boundMs);
      if (precheckFails(reply, { op: 'renew', app: req.params.app, ...ids, boundMs })) return reply;
      const healthUrl = req.body?.healthUrl;
      const badUrl = healthUrl === undefined ? undefined : checkHealthUrl(healthUrl);
      if (badUrl) return reply.code(400).send({ error: 'invalid_argument', message: badUrl });
      try {
        return unwrap(
          await leases.renew({
            app: req.params.app,
            ...ids,
            boundMs,
            ...(healthUrl === undefined ? {} : { healthUrl }),
          }),
        );
      } catch (err) {
        return leaseFail(reply, err, req.url);
      }
    },
  );

  app.post<{ Params: WorkerParams; Body: { token?: unknown; lastTimestampMs?: unknown } }>(
    '/v1/apps/:app/workers/:workerId/release',
    {
      schema: releaseSchema,
      preValidation: requires('release', appOf),
      config: {
        badInput: {
          code: 'invalid_argument',
          messages: {
            workerId: workerAndTokenMessage,
            token: workerAndTokenMessage,
            lastTimestampMs: rangeMessage({ op: 'release', ...base, lastTimestampMs: -1 }),
          },
        },
      },
    },
    async (req, reply) => {
      const ids = workerAndToken(req, reply);
      if (!ids) return reply;
      const lastTimestampMs = optInt(req.body?.lastTimestampMs);
      if (precheckFails(reply, { op: 'release', app: req.params.app, ...ids, lastTimestampMs })) return reply;
      try {
        return unwrap(await leases.release({ app: req.params.app, ...ids, lastTimestampMs }));
      } catch (err) {
        return leaseFail(reply, err, req.url);
      }
    },
  );

  const badId = (id: string) =>
    `id must be a decimal or 0x-hex integer in [0, 2^63), got ${JSON.stringify(id.slice(0, 40))}`;

  // Who issued this ID? (docs/whois.md). Needs read on the app given, or on '*' without one.
  app.get<{ Params: { id: string }; Querystring: { layout?: string; app?: string } }>(
    '/v1/ids/:id',
    {
      schema: whoisSchema,
      // Read on the app given, or on '*' without one.
      preValidation: requires('read', (req) => {
        const a = (req.query as { app?: unknown }).app;
        return a === undefined ? '*' : typeof a === 'string' ? a : undefined;
      }),
      config: {
        badInput: {
          code: 'invalid_argument',
          messages: { id: (req) => badId(String((req.params as { id?: unknown }).id ?? '')) },
        },
      },
    },
    async (req, reply) => {
      const { layout: layoutName = 'floe', app: appName } = req.query;
      let layout: Layout;
      let id: bigint;
      try {
        layout = getLayout(layoutName);
        id = BigInt(req.params.id);
        if (id < 0n || id >= 2n ** 63n) throw new Error('bad id');
      } catch (err) {
        const message =
          err instanceof Error && err.message === 'bad id' ? badId(req.params.id) : (err as Error).message;
        return reply.code(400).send({ error: 'invalid_argument', message });
      }
      try {
        return await leases.whois(id, layout, appName);
      } catch (err) {
        if (err instanceof FloeIdError)
          return reply.code(400).send({ error: 'invalid_argument', message: err.message });
        return fail(reply, err, req.url);
      }
    },
  );

  app.get<{ Params: AppParams }>(
    '/v1/apps/:app/workers',
    { schema: listSchema, preValidation: requires('read', appOf) },
    async (req, reply) => {
      try {
        return { app: req.params.app, leases: await leases.list(req.params.app) };
      } catch (err) {
        return leaseFail(reply, err, req.url);
      }
    },
  );

  app.get<{ Params: WorkerParams }>(
    '/v1/apps/:app/workers/:workerId',
    {
      schema: getSchema,
      preValidation: requires('read', appOf),
      config: {
        badInput: { code: 'invalid_argument', messages: { workerId: 'workerId must be an integer' } },
      },
    },
    async (req, reply) => {
      const workerId = toInt(req.params.workerId);
      if (workerId === undefined)
        return reply.code(400).send({ error: 'invalid_argument', message: 'workerId must be an integer' });
      try {
        const w = await leases.get(req.params.app, workerId);
        if (!w)
          return reply.code(404).send({
            error: 'not_found',
            message: `worker ${workerId} of ${req.params.app} was never leased`,
          });
        return w;
      } catch (err) {
        return leaseFail(reply, err, req.url);
      }
    },
  );

  const bitsMessage = 'bits and datacenterBits must be integers';
  app.put<{ Params: AppParams; Body: { bits?: unknown; datacenterBits?: unknown } }>(
    '/v1/apps/:app/pool',
    {
      schema: poolSchema,
      preValidation: requires('admin', appOf),
      config: {
        badInput: { code: 'invalid_argument', messages: { bits: bitsMessage, datacenterBits: bitsMessage } },
      },
    },
    async (req, reply) => {
      const bits = toInt(req.body?.bits);
      const dc = req.body?.datacenterBits === undefined ? 0 : toInt(req.body.datacenterBits);
      if (bits === undefined || dc === undefined)
        return reply.code(400).send({ error: 'invalid_argument', message: bitsMessage });
      if (precheckFails(reply, { op: 'configurePool', app: req.params.app, bits, datacenterBits: dc }))
        return reply;
      try {
        return unwrap(await leases.configurePool(req.params.app, bits, dc));
      } catch (err) {
        return leaseFail(reply, err, req.url);
      }
    },
  );
};
