import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { FloeIdError, getLayout, type Layout } from '../id/index.js';
import { checkHealthUrl } from '../lease/health-prober.js';
import { NotLeaderError } from '../node/errors.js';
import {
  decodeAuthCommand,
  encodeAuthCommand,
  type GrantSpec,
  PERMISSIONS,
  type Permission,
  userAddCommand,
  userSetPasswordCommand,
} from '../state/auth/index.js';
import { StoreUnavailableError } from '../store/errors.js';
import {
  basicCredentials,
  type FloeServices,
  LEASE_ERROR_STATUS,
  LeaseRefusedError,
  unwrap,
} from './floe-services.js';
import { registerSequenceApi } from './http-sequences.js';
import { registerSnowflakeApi } from './http-snowflakes.js';
import { type LeasePrecheck, precheckLease } from './lease-precheck.js';
import { MEMBER_HEADER, verifyMemberHeader } from './member-auth.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated user (undefined while auth is disabled). */
    floeUser?: string;
    /** A cluster member calling as itself (x-floe-member, see member-auth.ts). */
    floeMember?: number;
  }
}

/** What a member calling as itself may do: hold leases (server-side Snowflake), nothing else. */
const MEMBER_PERMISSIONS: ReadonlySet<Permission> = new Set(['acquire', 'renew', 'release', 'read']);

/** A flat list of known permission names (no nesting: checked before anything is encoded). */
function isPermissionList(v: unknown): v is Permission[] {
  return (
    Array.isArray(v) &&
    v.length <= PERMISSIONS.length * 4 &&
    v.every((p) => typeof p === 'string' && (PERMISSIONS as readonly string[]).includes(p))
  );
}

/** Paths anyone may read, with or without auth: probes and the cluster view. */
const OPEN_PATHS = new Set(['/healthz', '/readyz', '/metrics', '/v1/cluster']);
/** Members publishing their addresses prove the cluster secret instead (HMAC in the body). */
const MEMBER_ADDRESSES = /^\/v1\/members\/\d+\/addresses$/;

/** Followers allocating node-mode segments through the leader prove the cluster secret too. */
const MEMBER_SEQUENCE_ALLOC = '/v1/internal/sequences/alloc';

function isOpen(url: string): boolean {
  const path = url.split('?')[0] ?? '';
  return OPEN_PATHS.has(path) || MEMBER_ADDRESSES.test(path) || path === MEMBER_SEQUENCE_ALLOC;
}

/**
 * HTTP authentication (`Authorization: Basic ...`, the standard scheme; use TLS in front) and
 * the lease and user endpoints. With no users in the replicated state, everything is open.
 */
export function registerFloeApi(
  app: FastifyInstance,
  s: FloeServices,
  fail: (r: FastifyReply, e: unknown, path: string) => FastifyReply,
): void {
  const { auth, node } = s;
  const leases = s.store ?? s.leases;
  const verified = new Map<string, { user: string; revision: number }>();

  app.addHook('onRequest', async (req, reply) => {
    if (!auth.authEnabled || isOpen(req.url)) return;
    const member = req.headers[MEMBER_HEADER];
    if (typeof member === 'string' && s.memberSecret) {
      const id = verifyMemberHeader(s.memberSecret, member, req.method, req.url.split('?')[0] ?? '');
      if (id === undefined)
        return reply.code(401).send({ error: 'unauthorized', message: `invalid ${MEMBER_HEADER} header` });
      req.floeMember = id;
      return;
    }
    const header = req.headers.authorization;
    const cached = header ? verified.get(header) : undefined;
    if (cached && cached.revision === auth.revision) {
      req.floeUser = cached.user;
      return;
    }
    const creds = basicCredentials(header);
    if (creds && s.passwords) {
      const r = await s.passwords.verify(creds.user, creds.password, req.ip);
      if (!r.ok && r.reason === 'backoff')
        return reply
          .code(429)
          .header('retry-after', String(Math.ceil(r.retryAfterMs / 1000)))
          .send({
            error: 'too_many_failures',
            message: `too many failed authentication attempts from this client or for this user; retry in ${Math.ceil(r.retryAfterMs / 1000)} s`,
          });
      if (!r.ok && r.reason === 'busy')
        return reply
          .code(429)
          .header('retry-after', '1')
          .send({ error: 'auth_busy', message: 'too many password checks queued; retry shortly' });
      if (r.ok) {
        req.floeUser = creds.user;
        return;
      }
    }
    if (!creds || s.passwords || !(await auth.verify(creds.user, creds.password))) {
      return reply.code(401).header('www-authenticate', 'Basic realm="floe"').send({
        error: 'unauthorized',
        message: 'authentication required: Authorization: Basic base64(user:password)',
      });
    }
    if (verified.size > 10_000) verified.clear(); // bounded cache
    verified.set(header!, { user: creds.user, revision: auth.revision });
    req.floeUser = creds.user;
  });

  const allowed = (req: FastifyRequest, reply: FastifyReply, appName: string, perm: Permission): boolean => {
    if (
      req.floeMember !== undefined ? MEMBER_PERMISSIONS.has(perm) : auth.permits(req.floeUser, appName, perm)
    )
      return true;
    void reply.code(403).send({
      error: 'forbidden',
      message: `user ${req.floeUser ?? '(none)'} lacks ${perm} permission on app ${appName}`,
    });
    return false;
  };

  const helpers = {
    allowed,
    may: (req: FastifyRequest, resource: string, perm: Permission) =>
      req.floeMember === undefined && auth.permits(req.floeUser, resource, perm),
    fail,
  };
  if (s.sequences) registerSequenceApi(app, s.sequences, helpers);
  if (s.snowflakes) registerSnowflakeApi(app, s.snowflakes, helpers);

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

  const int = (v: unknown): number | undefined =>
    typeof v === 'number' && Number.isSafeInteger(v)
      ? v
      : typeof v === 'string' && /^\d{1,16}$/.test(v)
        ? Number(v)
        : undefined;

  // Absent stays absent; anything that is not an integer becomes -1, which the lease state refuses
  // with an error naming the field and its range.
  const optInt = (v: unknown): number | undefined => (v === undefined ? undefined : (int(v) ?? -1));

  /** Parses workerId and token of a renew/release, or replies 400. */
  const workerAndToken = (
    req: FastifyRequest<{ Params: WorkerParams; Body: { token?: unknown } }>,
    reply: FastifyReply,
  ): { workerId: number; token: number } | undefined => {
    const workerId = int(req.params.workerId);
    const token = int(req.body?.token);
    if (workerId !== undefined && token !== undefined) return { workerId, token };
    void reply.code(400).send({ error: 'invalid_argument', message: 'workerId and token must be integers' });
    return undefined;
  };

  // The admin surface (key-value, counters, membership) needs admin on '*' once auth is on.
  app.addHook('preHandler', async (req, reply) => {
    const path = req.url.split('?')[0] ?? '';
    // Leases, users and sequences check their own per-app / per-key permissions.
    if (
      !auth.authEnabled ||
      isOpen(path) ||
      path.startsWith('/v1/apps/') ||
      path.startsWith('/v1/users') ||
      path.startsWith('/v1/ids/') ||
      path === '/v1/sequences' ||
      path.startsWith('/v1/sequences/') ||
      path.startsWith('/api/segment/') ||
      path === '/v1/snowflakes' ||
      path.startsWith('/v1/snowflakes/') ||
      path.startsWith('/api/snowflake/')
    )
      return;
    if (req.floeMember !== undefined || !auth.permits(req.floeUser, '*', 'admin')) {
      return reply
        .code(403)
        .send({ error: 'forbidden', message: `user ${req.floeUser} lacks admin permission on *` });
    }
  });

  // ---- worker-ID leases ---------------------------------------------------------------------
  type AppParams = { app: string };
  type WorkerParams = { app: string; workerId: string };

  app.post<{
    Params: AppParams;
    Body: {
      nodeId?: unknown;
      ttlMs?: unknown;
      requestId?: unknown;
      boundMs?: unknown;
      incarnation?: unknown;
      layout?: unknown;
      healthUrl?: unknown;
    };
  }>('/v1/apps/:app/workers/acquire', async (req, reply) => {
    if (!allowed(req, reply, req.params.app, 'acquire')) return reply;
    const b = req.body ?? {};
    if (typeof b.nodeId !== 'string')
      return reply.code(400).send({ error: 'invalid_argument', message: 'nodeId must be a string' });
    if (b.incarnation !== undefined && typeof b.incarnation !== 'string')
      return reply
        .code(400)
        .send({ error: 'invalid_argument', message: 'incarnation must be a string of 1..128 characters' });
    if (b.layout !== undefined && typeof b.layout !== 'string')
      return reply.code(400).send({
        error: 'invalid_argument',
        message: 'layout must be a layout fingerprint string of 1..128 characters (see docs/leases.md)',
      });
    const badUrl = b.healthUrl === undefined ? undefined : checkHealthUrl(b.healthUrl);
    if (badUrl) return reply.code(400).send({ error: 'invalid_argument', message: badUrl });
    if (b.requestId !== undefined && typeof b.requestId !== 'string')
      return reply
        .code(400)
        .send({ error: 'invalid_argument', message: 'requestId must be a string of 1..128 characters' });
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
          requestId: typeof b.requestId === 'string' ? b.requestId : undefined,
          boundMs: optInt(b.boundMs),
          incarnation: b.incarnation,
          ...(b.layout === undefined ? {} : { layout: b.layout }),
          ...(typeof b.healthUrl === 'string' ? { healthUrl: b.healthUrl } : {}),
        }),
      );
    } catch (err) {
      return leaseFail(reply, err, req.url);
    }
  });

  app.post<{ Params: WorkerParams; Body: { token?: unknown; boundMs?: unknown; healthUrl?: unknown } }>(
    '/v1/apps/:app/workers/:workerId/renew',
    async (req, reply) => {
      if (!allowed(req, reply, req.params.app, 'renew')) return reply;
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
            boundMs: optInt(req.body?.boundMs),
            ...(typeof healthUrl === 'string' ? { healthUrl } : {}),
          }),
        );
      } catch (err) {
        return leaseFail(reply, err, req.url);
      }
    },
  );

  app.post<{ Params: WorkerParams; Body: { token?: unknown; lastTimestampMs?: unknown } }>(
    '/v1/apps/:app/workers/:workerId/release',
    async (req, reply) => {
      if (!allowed(req, reply, req.params.app, 'release')) return reply;
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

  // Who issued this ID? (docs/whois.md). Needs read on the app given, or on '*' without one.
  app.get<{ Params: { id: string }; Querystring: { layout?: string; app?: string } }>(
    '/v1/ids/:id',
    async (req, reply) => {
      const { layout: layoutName = 'floe', app: appName } = req.query;
      if (!allowed(req, reply, appName ?? '*', 'read')) return reply;
      let layout: Layout;
      let id: bigint;
      try {
        layout = getLayout(layoutName);
        if (!/^(?:\d{1,20}|0x[0-9a-fA-F]{1,16})$/.test(req.params.id)) throw new Error('bad id');
        id = BigInt(req.params.id);
        if (id < 0n || id >= 2n ** 63n) throw new Error('bad id');
      } catch (err) {
        const message =
          err instanceof Error && err.message === 'bad id'
            ? `id must be a decimal or 0x-hex integer in [0, 2^63), got ${JSON.stringify(req.params.id.slice(0, 40))}`
            : (err as Error).message;
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

  app.get<{ Params: AppParams }>('/v1/apps/:app/workers', async (req, reply) => {
    if (!allowed(req, reply, req.params.app, 'read')) return reply;
    try {
      return { app: req.params.app, leases: await leases.list(req.params.app) };
    } catch (err) {
      return leaseFail(reply, err, req.url);
    }
  });

  app.get<{ Params: WorkerParams }>('/v1/apps/:app/workers/:workerId', async (req, reply) => {
    if (!allowed(req, reply, req.params.app, 'read')) return reply;
    const workerId = int(req.params.workerId);
    if (workerId === undefined)
      return reply.code(400).send({ error: 'invalid_argument', message: 'workerId must be an integer' });
    try {
      const w = await leases.get(req.params.app, workerId);
      if (!w)
        return reply
          .code(404)
          .send({ error: 'not_found', message: `worker ${workerId} of ${req.params.app} was never leased` });
      return w;
    } catch (err) {
      return leaseFail(reply, err, req.url);
    }
  });

  app.put<{ Params: AppParams; Body: { bits?: unknown; datacenterBits?: unknown } }>(
    '/v1/apps/:app/pool',
    async (req, reply) => {
      if (!allowed(req, reply, req.params.app, 'admin')) return reply;
      const bits = int(req.body?.bits);
      const dc = req.body?.datacenterBits === undefined ? 0 : int(req.body.datacenterBits);
      if (bits === undefined || dc === undefined)
        return reply
          .code(400)
          .send({ error: 'invalid_argument', message: 'bits and datacenterBits must be integers' });
      if (precheckFails(reply, { op: 'configurePool', app: req.params.app, bits, datacenterBits: dc }))
        return reply;
      try {
        return unwrap(await leases.configurePool(req.params.app, bits, dc));
      } catch (err) {
        return leaseFail(reply, err, req.url);
      }
    },
  );

  // ---- users ---------------------------------------------------------------------------------
  const authFail = (reply: FastifyReply, r: { ok: false; code: string; message: string }) =>
    reply
      .code(
        r.code === 'no_such_user' ? 404 : r.code === 'user_exists' || r.code === 'would_lock_out' ? 409 : 400,
      )
      .send({
        error: r.code,
        message: r.message,
      });
  /**
   * A user that does not exist, as the leader knows: its state holds every change acknowledged to a
   * client, so refusing here instead of at apply keeps the entry out of the log (issue 15 item 2).
   * Followers propose nothing (they redirect), so they do not check.
   */
  // Users live where the store keeps them: the Raft log, or etcd (served by the etcd store's active node).
  const users = s.users ?? {
    propose: (cmd: Uint8Array) => node.propose(cmd),
    linearizableRead: () => node.linearizableRead(),
    isLeader: () => node.isLeader,
    notLeaderError: () => new NotLeaderError(node.id, node.leaderHint()),
  };
  const missingUser = (user: string): boolean => users.isLeader() && auth.passwordOf(user) === undefined;
  const noSuchUser = (reply: FastifyReply, user: string) =>
    authFail(reply, {
      ok: false,
      code: 'no_such_user',
      message: `user ${JSON.stringify(user)} does not exist`,
    });
  const propose = async (reply: FastifyReply, cmd: Uint8Array, path: string) => {
    // Nothing invalid reaches the log: the same complete check apply runs, before proposing.
    const checked = decodeAuthCommand(cmd);
    if ('ok' in checked) return authFail(reply, checked);
    if (checked.op !== 'userAdd' && missingUser(checked.user)) return noSuchUser(reply, checked.user);
    try {
      const r = (await users.propose(cmd)) as { ok: boolean; code?: string; message?: string };
      if (!r.ok) return authFail(reply, r as { ok: false; code: string; message: string });
      return r;
    } catch (err) {
      return fail(reply, err, path);
    }
  };
  const isAdmin = (req: FastifyRequest, reply: FastifyReply) => allowed(req, reply, '*', 'admin');
  const parseGrants = (v: unknown): GrantSpec[] | string => {
    if (v === undefined) return [];
    if (typeof v !== 'object' || v === null || Array.isArray(v))
      return 'grants must be {"app": ["acquire", ...]}';
    const out: GrantSpec[] = [];
    for (const [pattern, perms] of Object.entries(v)) {
      if (!Array.isArray(perms) || !perms.every((p) => (PERMISSIONS as readonly string[]).includes(p)))
        return `permissions for ${pattern} must be a list of ${PERMISSIONS.join(', ')}`;
      out.push([pattern, perms as Permission[]]);
    }
    return out;
  };

  app.get('/v1/users', async (req, reply) => {
    if (!isAdmin(req, reply)) return reply;
    await users.linearizableRead().catch(() => {});
    return { authEnabled: auth.authEnabled, users: auth.userList() };
  });

  app.post<{ Body: { user?: unknown; password?: unknown; grants?: unknown } }>(
    '/v1/users',
    async (req, reply) => {
      if (!isAdmin(req, reply)) return reply;
      const { user, password } = req.body ?? {};
      const grants = parseGrants(req.body?.grants);
      if (typeof user !== 'string' || typeof password !== 'string')
        return reply
          .code(400)
          .send({ error: 'invalid_argument', message: 'user and password must be strings' });
      if (typeof grants === 'string')
        return reply.code(400).send({ error: 'invalid_argument', message: grants });
      if (!users.isLeader()) return fail(reply, users.notLeaderError(), req.url);
      let cmd: Uint8Array;
      try {
        cmd = await userAddCommand(user, password, grants);
      } catch (err) {
        return reply.code(400).send({ error: 'invalid_argument', message: (err as Error).message });
      }
      return propose(reply, cmd, req.url);
    },
  );

  app.put<{ Params: { user: string }; Body: { password?: unknown } }>(
    '/v1/users/:user/password',
    async (req, reply) => {
      const self = req.floeUser === req.params.user;
      if (!self && !isAdmin(req, reply)) return reply;
      if (typeof req.body?.password !== 'string')
        return reply.code(400).send({ error: 'invalid_argument', message: 'password must be a string' });
      if (!users.isLeader()) return fail(reply, users.notLeaderError(), req.url);
      // Before hashing: a missing user costs no scrypt run and no log entry.
      if (missingUser(req.params.user)) return noSuchUser(reply, req.params.user);
      let cmd: Uint8Array;
      try {
        cmd = await userSetPasswordCommand(req.params.user, req.body.password);
      } catch (err) {
        return reply.code(400).send({ error: 'invalid_argument', message: (err as Error).message });
      }
      return propose(reply, cmd, req.url);
    },
  );

  app.delete<{ Params: { user: string } }>('/v1/users/:user', async (req, reply) => {
    if (!isAdmin(req, reply)) return reply;
    return propose(reply, encodeAuthCommand({ op: 'userDelete', user: req.params.user }), req.url);
  });

  app.post<{ Params: { user: string }; Body: { app?: unknown; permissions?: unknown } }>(
    '/v1/users/:user/grants',
    async (req, reply) => {
      if (!isAdmin(req, reply)) return reply;
      const { app: appName, permissions } = req.body ?? {};
      if (typeof appName !== 'string' || !isPermissionList(permissions))
        return reply.code(400).send({
          error: 'invalid_argument',
          message: `body must be {"app": string, "permissions": [...]} with permissions from ${PERMISSIONS.join(', ')}`,
        });
      return propose(
        reply,
        encodeAuthCommand({
          op: 'grant',
          user: req.params.user,
          app: appName,
          permissions: permissions as Permission[],
        }),
        req.url,
      );
    },
  );

  app.post<{ Params: { user: string }; Body: { app?: unknown; permissions?: unknown } }>(
    '/v1/users/:user/revoke',
    async (req, reply) => {
      if (!isAdmin(req, reply)) return reply;
      const { app: appName, permissions } = req.body ?? {};
      // Absent permissions revoke everything on the app; anything else must be a list (a number or
      // null revoked everything before).
      if (typeof appName !== 'string' || (permissions !== undefined && !isPermissionList(permissions)))
        return reply.code(400).send({
          error: 'invalid_argument',
          message: `body must be {"app": string, "permissions"?: [...]} with permissions from ${PERMISSIONS.join(', ')}`,
        });
      return propose(
        reply,
        encodeAuthCommand({
          op: 'revoke',
          user: req.params.user,
          app: appName,
          permissions: permissions as Permission[] | undefined,
        }),
        req.url,
      );
    },
  );
}
