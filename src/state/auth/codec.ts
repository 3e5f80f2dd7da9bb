import { pack, unpack } from '../../node/envelope.js';
import { APP_NAME_PATTERN } from '../leases/types.js';
import { scryptParamsProblem } from './password.js';
import {
  ALL_APPS,
  AUTH_NAMESPACE,
  type AuthCommand,
  type AuthError,
  type GrantSpec,
  type PasswordHash,
  PERMISSIONS,
  type Permission,
  SCRYPT_LIMITS,
  USER_NAME_PATTERN,
} from './types.js';

/** Wire form: a msgpack map `{ ns: 'auth', op, ...fields }` (routable by a composed state machine). */
export function encodeAuthCommand(cmd: AuthCommand): Uint8Array {
  return pack({ ns: AUTH_NAMESPACE, ...cmd });
}

export function isAuthCommand(value: unknown): boolean {
  return typeof value === 'object' && value !== null && (value as { ns?: unknown }).ns === AUTH_NAMESPACE;
}

export function authError(code: AuthError['code'], message: string): AuthError {
  return { ok: false, code, message };
}

export function decodeAuthCommand(data: Uint8Array): AuthCommand | AuthError {
  let v: unknown;
  try {
    v = unpack<unknown>(data);
  } catch {
    return authError('bad_command', 'auth command is not valid msgpack');
  }
  return parseAuthCommand(v);
}

/** Checks shape, types and ranges of an unpacked auth command. Never throws. */
export function parseAuthCommand(v: unknown): AuthCommand | AuthError {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    return authError('bad_command', 'auth command must be a map');
  }
  const c = v as Record<string, unknown>;
  if (c.ns !== AUTH_NAMESPACE)
    return authError('bad_command', `auth command must carry ns '${AUTH_NAMESPACE}'`);
  const userErr = checkUser(c.user);
  if (typeof c.op === 'string' && userErr) return userErr;
  switch (c.op) {
    case 'userAdd': {
      const pw = parsePasswordHash(c.password);
      if ('ok' in pw) return pw;
      let grants: GrantSpec[] | undefined;
      if (c.grants !== undefined && c.grants !== null) {
        if (!Array.isArray(c.grants) || c.grants.length > 256) {
          return authError(
            'invalid_argument',
            'grants must be a list of at most 256 [pattern, permissions] pairs',
          );
        }
        grants = [];
        for (const g of c.grants as unknown[]) {
          if (!Array.isArray(g) || g.length !== 2) {
            return authError('invalid_argument', 'each grant must be [pattern, permissions]');
          }
          const err = checkPattern(g[0]);
          if (err) return err;
          const perms = parsePermissions(g[1]);
          if ('ok' in perms) return perms;
          grants.push([g[0] as string, perms]);
        }
      }
      const cmd: AuthCommand = { op: 'userAdd', user: c.user as string, password: pw };
      if (grants) cmd.grants = grants;
      return cmd;
    }
    case 'userDelete':
      return { op: 'userDelete', user: c.user as string };
    case 'userSetPassword': {
      const pw = parsePasswordHash(c.password);
      if ('ok' in pw) return pw;
      return { op: 'userSetPassword', user: c.user as string, password: pw };
    }
    case 'grant': {
      const err = checkPattern(c.app);
      if (err) return err;
      const perms = parsePermissions(c.permissions);
      if ('ok' in perms) return perms;
      if (perms.length === 0) return authError('invalid_argument', 'grant needs at least one permission');
      return { op: 'grant', user: c.user as string, app: c.app as string, permissions: perms };
    }
    case 'revoke': {
      const err = checkPattern(c.app);
      if (err) return err;
      if (c.permissions === undefined || c.permissions === null) {
        return { op: 'revoke', user: c.user as string, app: c.app as string };
      }
      const perms = parsePermissions(c.permissions);
      if ('ok' in perms) return perms;
      return { op: 'revoke', user: c.user as string, app: c.app as string, permissions: perms };
    }
    default:
      return authError(
        'bad_command',
        `unknown auth op ${typeof c.op === 'string' ? JSON.stringify(c.op) : typeof c.op}; ` +
          'expected userAdd, userDelete, userSetPassword, grant or revoke',
      );
  }
}

export function checkUser(user: unknown): AuthError | undefined {
  if (typeof user !== 'string' || !USER_NAME_PATTERN.test(user)) {
    return authError(
      'invalid_argument',
      `user must be 1..64 characters from A-Z a-z 0-9 . _ @ - starting with a letter or digit, got ${
        typeof user === 'string' ? JSON.stringify(user.slice(0, 70)) : typeof user
      }`,
    );
  }
  return undefined;
}

export function checkPattern(app: unknown): AuthError | undefined {
  if (app === ALL_APPS) return undefined;
  if (typeof app !== 'string' || !APP_NAME_PATTERN.test(app)) {
    return authError(
      'invalid_argument',
      `app pattern must be '*' or an app name (1..128 characters from A-Z a-z 0-9 . _ : / -), got ${
        typeof app === 'string' ? JSON.stringify(app.slice(0, 140)) : typeof app
      }`,
    );
  }
  return undefined;
}

function parsePermissions(v: unknown): Permission[] | AuthError {
  if (!Array.isArray(v))
    return authError('invalid_argument', `permissions must be a list of ${PERMISSIONS.join(', ')}`);
  const out: Permission[] = [];
  for (const p of v) {
    if (!(PERMISSIONS as readonly unknown[]).includes(p)) {
      return authError(
        'invalid_argument',
        `unknown permission ${typeof p === 'string' ? JSON.stringify(p) : typeof p}; allowed: ${PERMISSIONS.join(', ')}`,
      );
    }
    if (!out.includes(p as Permission)) out.push(p as Permission);
  }
  return out;
}

function parsePasswordHash(v: unknown): PasswordHash | AuthError {
  if (typeof v !== 'object' || v === null) {
    return authError(
      'invalid_argument',
      'password must be a hash made by hashPassword (never the password itself)',
    );
  }
  const h = v as Record<string, unknown>;
  if (h.algorithm !== 'scrypt')
    return authError('invalid_argument', `password hash algorithm must be 'scrypt'`);
  const problem = scryptParamsProblem(h.N, h.r, h.p);
  if (problem) return authError('invalid_argument', problem);
  const L = SCRYPT_LIMITS;
  if (!(h.salt instanceof Uint8Array) || h.salt.length < L.minSaltBytes || h.salt.length > L.maxSaltBytes) {
    return authError('invalid_argument', `password salt must be ${L.minSaltBytes}..${L.maxSaltBytes} bytes`);
  }
  if (!(h.hash instanceof Uint8Array) || h.hash.length < L.minHashBytes || h.hash.length > L.maxHashBytes) {
    return authError('invalid_argument', `password hash must be ${L.minHashBytes}..${L.maxHashBytes} bytes`);
  }
  return {
    algorithm: 'scrypt',
    N: h.N as number,
    r: h.r as number,
    p: h.p as number,
    salt: new Uint8Array(h.salt),
    hash: new Uint8Array(h.hash),
  };
}
