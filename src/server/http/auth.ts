// Who is calling, and may they: the hooks every route runs behind. They sit on the root app (not
// in a plugin) because they guard everything, unknown paths and the dashboard included:
// - onRequest: `Authorization: Basic ...` (the standard scheme; use TLS), or a member proving the
//   cluster secret (x-floe-member, member-auth.ts). With no users in the replicated state,
//   everything is open.
// - preValidation: the admin surface (key-value, counters, membership, leader transfer) needs
//   admin on '*'; leases, users, sequences and Snowflake keys check their own per-app / per-key
//   permissions in their own preValidation hook (`requires`). Both run before the route's schema:
//   a caller without the permission gets 403 whatever it sent.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Permission } from '../../state/auth/index.js';
import { basicCredentials, type FloeServices } from '../floe-services.js';
import { MEMBER_HEADER, verifyMemberHeader } from '../member-auth.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated user (undefined while auth is disabled). */
    floeUser?: string;
    /** A cluster member calling as itself (x-floe-member, see member-auth.ts). */
    floeMember?: number;
  }
}

/** What the route plugins use to check permissions and answer errors. */
export interface RouteHelpers {
  /** Checks a permission and, when it is missing, replies 403. */
  allowed(req: FastifyRequest, reply: FastifyReply, resource: string, perm: Permission): boolean;
  /** Checks a permission without replying. */
  may(req: FastifyRequest, resource: string, perm: Permission): boolean;
  /** The node runtime's errors (sendHttpError). */
  fail(r: FastifyReply, e: unknown, path: string): FastifyReply;
  /**
   * A route's preValidation hook: 403 unless the caller has `perm` on the resource `resourceOf`
   * names (before the schema runs). When it names none (a body key that is not a string), the
   * schema answers first.
   */
  requires(
    perm: Permission,
    resourceOf: (req: FastifyRequest) => string | undefined,
  ): (req: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply | undefined>;
}

/** What a member calling as itself may do: hold leases (server-side Snowflake), nothing else. */
const MEMBER_PERMISSIONS: ReadonlySet<Permission> = new Set(['acquire', 'renew', 'release', 'read']);

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

/** Paths whose routes check their own per-app / per-key permissions. */
function checksOwnPermissions(path: string): boolean {
  return (
    path.startsWith('/v1/apps/') ||
    path.startsWith('/v1/users') ||
    path.startsWith('/v1/ids/') ||
    path === '/v1/sequences' ||
    path.startsWith('/v1/sequences/') ||
    path.startsWith('/api/segment/') ||
    path === '/v1/snowflakes' ||
    path.startsWith('/v1/snowflakes/') ||
    path.startsWith('/api/snowflake/')
  );
}

/** Adds the authentication and admin hooks to the root app; returns the permission helpers. */
export function registerAuth(
  app: FastifyInstance,
  s: FloeServices,
  fail: (r: FastifyReply, e: unknown, path: string) => FastifyReply,
): RouteHelpers {
  const { auth } = s;
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

  // The admin surface (key-value, counters, membership) needs admin on '*' once auth is on.
  app.addHook('preValidation', async (req, reply) => {
    const path = req.url.split('?')[0] ?? '';
    if (!auth.authEnabled || isOpen(path) || checksOwnPermissions(path)) return;
    if (req.floeMember !== undefined || !auth.permits(req.floeUser, '*', 'admin')) {
      return reply
        .code(403)
        .send({ error: 'forbidden', message: `user ${req.floeUser} lacks admin permission on *` });
    }
  });

  const allowed = (req: FastifyRequest, reply: FastifyReply, resource: string, perm: Permission): boolean => {
    if (
      req.floeMember !== undefined ? MEMBER_PERMISSIONS.has(perm) : auth.permits(req.floeUser, resource, perm)
    )
      return true;
    void reply.code(403).send({
      error: 'forbidden',
      message: `user ${req.floeUser ?? '(none)'} lacks ${perm} permission on app ${resource}`,
    });
    return false;
  };
  return {
    allowed,
    may: (req, resource, perm) => req.floeMember === undefined && auth.permits(req.floeUser, resource, perm),
    fail,
    requires: (perm, resourceOf) => async (req, reply) => {
      const resource = resourceOf(req);
      if (resource !== undefined && !allowed(req, reply, resource, perm)) return reply;
      return undefined;
    },
  };
}
