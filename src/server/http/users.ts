// Users and their grants (docs/auth.md): an encapsulated plugin under /v1/users. Admin on '*'
// manages users; a user may change its own password. Nothing invalid reaches the log: the schema
// checks types, then the same complete check apply runs (decodeAuthCommand) before proposing.
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { NotLeaderError } from '../../node/errors.js';
import {
  decodeAuthCommand,
  encodeAuthCommand,
  type GrantSpec,
  PERMISSIONS,
  type Permission,
  userAddCommand,
  userSetPasswordCommand,
} from '../../state/auth/index.js';
import type { FloeServices } from '../floe-services.js';
import type { RouteHelpers } from './auth.js';
import { bool, errors, nameParam, obj, str, WRITE_ERRORS } from './schemas.js';

export interface UsersPluginOptions {
  services: FloeServices;
  helpers: RouteHelpers;
}

// ---- schemas --------------------------------------------------------------------------------

const permission = { type: 'string', enum: [...PERMISSIONS] } as const;
const permissionList = { type: 'array', items: permission, maxItems: PERMISSIONS.length * 4 } as const;
const userParams = obj({ user: nameParam('the user name') }, ['user']);
const ok = obj({ ok: bool });
const userErrors = errors(400, 401, 403, 404, 409, ...WRITE_ERRORS);

const listSchema = {
  tags: ['users'],
  summary: 'The users and their grants (needs admin on *)',
  response: {
    200: obj({
      authEnabled: bool,
      users: { type: 'array', items: obj({ user: str, grants: obj({}) }) },
    }),
    ...errors(401, 403),
  },
} as const;

const addSchema = {
  tags: ['users'],
  summary: 'Add a user (needs admin on *); the first user turns authentication on',
  body: obj(
    {
      user: str,
      password: str,
      grants: {
        type: 'object',
        description: 'permissions per app pattern: {"orders": ["acquire", "renew"]}',
        additionalProperties: { type: 'array', items: permission },
      },
    },
    ['user', 'password'],
  ),
  response: { 200: ok, ...userErrors },
} as const;

const passwordSchema = {
  tags: ['users'],
  summary: "Change a user's password (admin on *, or the user itself)",
  params: userParams,
  body: obj({ password: str }, ['password']),
  response: { 200: ok, ...userErrors },
} as const;

const deleteSchema = {
  tags: ['users'],
  summary: 'Delete a user (needs admin on *)',
  params: userParams,
  response: { 200: ok, ...userErrors },
} as const;

const grantSchema = {
  tags: ['users'],
  summary: 'Grant permissions on an app pattern (needs admin on *)',
  params: userParams,
  body: obj({ app: str, permissions: permissionList }, ['app', 'permissions']),
  response: { 200: ok, ...userErrors },
} as const;

const revokeSchema = {
  tags: ['users'],
  summary: 'Revoke permissions (all of them on the app when `permissions` is absent)',
  params: userParams,
  body: obj({ app: str, permissions: permissionList }, ['app']),
  response: { 200: ok, ...userErrors },
} as const;

// ---- routes ---------------------------------------------------------------------------------

export const usersPlugin: FastifyPluginAsync<UsersPluginOptions> = async (app, { services: s, helpers }) => {
  const { auth, node } = s;
  const { fail, requires } = helpers;
  const authFail = (reply: FastifyReply, r: { ok: false; code: string; message: string }) =>
    reply
      .code(
        r.code === 'no_such_user' ? 404 : r.code === 'user_exists' || r.code === 'would_lock_out' ? 409 : 400,
      )
      .send({ error: r.code, message: r.message });
  // Users live where the store keeps them: the Raft log, or etcd (served by the etcd store's active node).
  const users = s.users ?? {
    propose: (cmd: Uint8Array) => node.propose(cmd),
    linearizableRead: () => node.linearizableRead(),
    isLeader: () => node.isLeader,
    notLeaderError: () => new NotLeaderError(node.id, node.leaderHint()),
  };
  /**
   * A user that does not exist, as the leader knows: its state holds every change acknowledged to a
   * client, so refusing here instead of at apply keeps the entry out of the log (issue 15 item 2).
   * Followers propose nothing (they redirect), so they do not check.
   */
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
  // Admin on '*', checked before the schema (403 whatever the body).
  const admin = requires('admin', () => '*');

  app.get('/v1/users', { schema: listSchema, preValidation: admin }, async () => {
    await users.linearizableRead().catch(() => {});
    return { authEnabled: auth.authEnabled, users: auth.userList() };
  });

  const userAndPassword = 'user and password must be strings';
  app.post<{ Body: { user: string; password: string; grants?: Record<string, Permission[]> } }>(
    '/v1/users',
    {
      schema: addSchema,
      preValidation: admin,
      config: {
        badInput: {
          code: 'invalid_argument',
          messages: {
            user: userAndPassword,
            password: userAndPassword,
            grants: (_req, path) =>
              path.length > 1
                ? `permissions for ${path[1]} must be a list of ${PERMISSIONS.join(', ')}`
                : 'grants must be {"app": ["acquire", ...]}',
          },
        },
      },
    },
    async (req, reply) => {
      const { user, password } = req.body;
      const grants: GrantSpec[] = Object.entries(req.body.grants ?? {});
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

  app.put<{ Params: { user: string }; Body: { password: string } }>(
    '/v1/users/:user/password',
    {
      schema: passwordSchema,
      // The user itself, or admin on '*'.
      preValidation: requires('admin', (req) =>
        req.floeUser === (req.params as { user: string }).user ? undefined : '*',
      ),
      config: { badInput: { code: 'invalid_argument', messages: { password: 'password must be a string' } } },
    },
    async (req, reply) => {
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

  app.delete<{ Params: { user: string } }>(
    '/v1/users/:user',
    { schema: deleteSchema, preValidation: admin },
    async (req, reply) => {
      return propose(reply, encodeAuthCommand({ op: 'userDelete', user: req.params.user }), req.url);
    },
  );

  const grantMessage = `body must be {"app": string, "permissions": [...]} with permissions from ${PERMISSIONS.join(', ')}`;
  app.post<{ Params: { user: string }; Body: { app: string; permissions: Permission[] } }>(
    '/v1/users/:user/grants',
    {
      schema: grantSchema,
      preValidation: admin,
      config: {
        badInput: { code: 'invalid_argument', messages: { app: grantMessage, permissions: grantMessage } },
      },
    },
    async (req, reply) => {
      const { app: appName, permissions } = req.body;
      return propose(
        reply,
        encodeAuthCommand({ op: 'grant', user: req.params.user, app: appName, permissions }),
        req.url,
      );
    },
  );

  // Absent permissions revoke everything on the app; anything else must be a list (a number or
  // null revoked everything before).
  const revokeMessage = `body must be {"app": string, "permissions"?: [...]} with permissions from ${PERMISSIONS.join(', ')}`;
  app.post<{ Params: { user: string }; Body: { app: string; permissions?: Permission[] } }>(
    '/v1/users/:user/revoke',
    {
      schema: revokeSchema,
      preValidation: admin,
      config: {
        badInput: { code: 'invalid_argument', messages: { app: revokeMessage, permissions: revokeMessage } },
      },
    },
    async (req, reply) => {
      const { app: appName, permissions } = req.body;
      return propose(
        reply,
        encodeAuthCommand({ op: 'revoke', user: req.params.user, app: appName, permissions }),
        req.url,
      );
    },
  );
};
