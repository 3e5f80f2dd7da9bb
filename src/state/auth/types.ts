/**
 * Users, password hashes and per-app permissions, replicated through the log.
 *
 * Rules (every violation is an `invalid_argument` result naming the field and the allowed range):
 * - user: 1..64 characters from `A-Z a-z 0-9 . _ @ -`, starting with a letter or digit.
 * - app pattern: an app name (see src/state/leases/types.ts) or `*` for every app.
 * - permissions: `acquire`, `renew`, `release`, `read`, `admin`; `admin` implies all the others.
 *   Managing users (userAdd/userDelete/userSetPassword/grant/revoke) needs `admin` on `*`.
 * - password hash: scrypt with N a power of two in 2^10..2^20, r 1..32, p 1..16,
 *   128·N·r <= 256 MiB, salt 16..64 bytes, hash 32..64 bytes. Hashing is done before proposing
 *   (`hashPassword`), so applying a command never runs scrypt and never reads randomness.
 * - Lock-out protection: the first user must get `admin` on `*`; the last user with `admin` on `*`
 *   cannot lose that permission, and cannot be deleted while other users exist (deleting the only
 *   user is allowed: the cluster is then open again).
 *
 * Auth is enabled as soon as one user exists. A cluster without users is open: servers must say
 * so loudly in their logs at start-up and on every status page.
 */

export const AUTH_NAMESPACE = 'auth';

// 'issue': take values of a sequence (INCR, INCRBY, SEQ.ALLOC). A grant's pattern names apps and
// sequence keys alike; 'read' and 'admin' apply to both.
export const PERMISSIONS = ['acquire', 'renew', 'release', 'read', 'admin', 'issue'] as const;
export type Permission = (typeof PERMISSIONS)[number];

/** The pattern that matches every app. */
export const ALL_APPS = '*';

export const USER_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;
export const MIN_PASSWORD_LENGTH = 8;
export const MAX_PASSWORD_LENGTH = 1024;

export const SCRYPT_LIMITS = {
  minLogN: 10,
  maxLogN: 20,
  maxR: 32,
  maxP: 16,
  maxMemoryBytes: 256 * 1024 * 1024,
  minSaltBytes: 16,
  maxSaltBytes: 64,
  minHashBytes: 32,
  maxHashBytes: 64,
} as const;

/** A password as the replicated state keeps it: never the password itself. */
export interface PasswordHash {
  algorithm: 'scrypt';
  N: number;
  r: number;
  p: number;
  salt: Uint8Array;
  hash: Uint8Array;
}

/** One grant: a set of permissions on an app pattern. */
export type GrantSpec = [pattern: string, permissions: Permission[]];

export type AuthCommand =
  | { op: 'userAdd'; user: string; password: PasswordHash; grants?: GrantSpec[] }
  | { op: 'userDelete'; user: string }
  | { op: 'userSetPassword'; user: string; password: PasswordHash }
  | { op: 'grant'; user: string; app: string; permissions: Permission[] }
  /** Without `permissions`, removes every permission on that pattern. */
  | { op: 'revoke'; user: string; app: string; permissions?: Permission[] };

export type AuthErrorCode =
  | 'bad_command'
  | 'invalid_argument'
  | 'user_exists'
  | 'no_such_user'
  /** The change would leave users behind with nobody able to manage them. */
  | 'would_lock_out';

export interface AuthError {
  ok: false;
  code: AuthErrorCode;
  message: string;
}

/** A user as reads show it: no password material. */
export interface UserInfo {
  user: string;
  /** Pattern -> permissions, patterns in code-unit order. */
  grants: Record<string, Permission[]>;
  createdAtMs: number;
  updatedAtMs: number;
}

export interface AuthOk {
  ok: true;
  op: AuthCommand['op'];
  user: string;
  /** The user after the change; undefined after userDelete. */
  info: UserInfo | undefined;
}

export type AuthResult = AuthOk | AuthError;
