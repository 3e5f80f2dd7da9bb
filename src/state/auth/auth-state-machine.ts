import { pack, unpack } from '../../node/envelope.js';
import type { ApplyContext, StateMachine } from '../../node/state-machine.js';
import { authError, decodeAuthCommand, parseAuthCommand } from './codec.js';
import { verifyPassword } from './password.js';
import {
  ALL_APPS,
  type AuthCommand,
  type AuthError,
  type AuthResult,
  type PasswordHash,
  PERMISSIONS,
  type Permission,
  type UserInfo,
} from './types.js';

const SNAPSHOT_VERSION = 1;
const BIT: Record<Permission, number> = { acquire: 1, renew: 2, release: 4, read: 8, admin: 16, issue: 32 };
const ADMIN = BIT.admin;

interface User {
  password: PasswordHash;
  /** pattern -> permission bits */
  grants: Map<string, number>;
  createdAtMs: number;
  updatedAtMs: number;
}

type SnapshotUser = [
  user: string,
  N: number,
  r: number,
  p: number,
  salt: Uint8Array,
  hash: Uint8Array,
  grants: (string | number)[],
  createdAtMs: number,
  updatedAtMs: number,
];

/**
 * Replicated users and permissions. Deterministic: password hashes arrive already computed;
 * times come from `ctx.leaderTimeMs`. `apply` never throws.
 */
export class AuthStateMachine implements StateMachine<AuthResult> {
  private readonly users = new Map<string, User>();
  private rev = 0;

  apply(command: Uint8Array, ctx: ApplyContext): AuthResult {
    return this.applyParsed(decodeAuthCommand(command), ctx);
  }

  /** For a composed state machine that already unpacked the entry and saw `ns: 'auth'`. */
  applyUnpacked(value: unknown, ctx: ApplyContext): AuthResult {
    return this.applyParsed(parseAuthCommand(value), ctx);
  }

  private applyParsed(cmd: AuthCommand | AuthError, ctx: ApplyContext): AuthResult {
    if ('ok' in cmd) return cmd;
    const r = this.run(cmd, ctx);
    if (r.ok) this.rev = ctx.index;
    return r;
  }

  private run(cmd: AuthCommand, ctx: ApplyContext): AuthResult {
    const existing = this.users.get(cmd.user);
    if (cmd.op !== 'userAdd' && !existing) {
      return authError('no_such_user', `user ${JSON.stringify(cmd.user)} does not exist`);
    }
    switch (cmd.op) {
      case 'userAdd': {
        if (existing) return authError('user_exists', `user ${JSON.stringify(cmd.user)} already exists`);
        const grants = new Map<string, number>();
        for (const [pattern, perms] of cmd.grants ?? [])
          grants.set(pattern, (grants.get(pattern) ?? 0) | bits(perms));
        if (this.users.size === 0 && ((grants.get(ALL_APPS) ?? 0) & ADMIN) === 0) {
          return authError(
            'would_lock_out',
            `the first user must be granted admin on '*' (otherwise nobody could manage users once auth is on)`,
          );
        }
        const u: User = {
          password: cmd.password,
          grants,
          createdAtMs: ctx.leaderTimeMs,
          updatedAtMs: ctx.leaderTimeMs,
        };
        this.users.set(cmd.user, u);
        return ok(cmd, infoOf(cmd.user, u));
      }
      case 'userDelete': {
        const u = existing!;
        if (this.users.size > 1 && isGlobalAdmin(u) && this.globalAdminCount() === 1) {
          return authError(
            'would_lock_out',
            `user ${JSON.stringify(cmd.user)} is the last admin on '*'; grant admin on '*' to another user first`,
          );
        }
        this.users.delete(cmd.user);
        return ok(cmd, undefined);
      }
      case 'userSetPassword': {
        const u = existing!;
        u.password = cmd.password;
        u.updatedAtMs = ctx.leaderTimeMs;
        return ok(cmd, infoOf(cmd.user, u));
      }
      case 'grant': {
        const u = existing!;
        u.grants.set(cmd.app, (u.grants.get(cmd.app) ?? 0) | bits(cmd.permissions));
        u.updatedAtMs = ctx.leaderTimeMs;
        return ok(cmd, infoOf(cmd.user, u));
      }
      case 'revoke': {
        const u = existing!;
        const cur = u.grants.get(cmd.app) ?? 0;
        const next = cmd.permissions ? cur & ~bits(cmd.permissions) : 0;
        const losesGlobalAdmin = cmd.app === ALL_APPS && (cur & ADMIN) !== 0 && (next & ADMIN) === 0;
        if (losesGlobalAdmin && this.globalAdminCount() === 1) {
          return authError(
            'would_lock_out',
            `user ${JSON.stringify(cmd.user)} is the last admin on '*'; grant admin on '*' to another user first`,
          );
        }
        if (next === 0) u.grants.delete(cmd.app);
        else u.grants.set(cmd.app, next);
        u.updatedAtMs = ctx.leaderTimeMs;
        return ok(cmd, infoOf(cmd.user, u));
      }
    }
  }

  private globalAdminCount(): number {
    let n = 0;
    for (const u of this.users.values()) if (isGlobalAdmin(u)) n++;
    return n;
  }

  // ---- reads -------------------------------------------------------------------------------

  /** Auth is on as soon as one user exists. */
  get authEnabled(): boolean {
    return this.users.size > 0;
  }

  /** Log index of the last successful change: servers drop cached credentials when it moves. */
  get revision(): number {
    return this.rev;
  }

  /**
   * Whether `user` holds `permission` on `app` (directly, through '*', or through `admin`).
   * Pure: says nothing about whether auth is enabled (see `permits`). `app` may be '*' to ask
   * about a cluster-wide permission (e.g. admin on '*' to manage users).
   */
  authorize(user: string, app: string, permission: Permission): boolean {
    const u = this.users.get(user);
    if (!u) return false;
    const need = BIT[permission];
    if (need === undefined) return false;
    const granted = (u.grants.get(app) ?? 0) | (app === ALL_APPS ? 0 : (u.grants.get(ALL_APPS) ?? 0));
    return (granted & (need | ADMIN)) !== 0;
  }

  /**
   * What a server should ask: open cluster (no users) → true; otherwise the authenticated user
   * (undefined when the client did not authenticate) must hold the permission.
   */
  permits(user: string | undefined, app: string, permission: Permission): boolean {
    if (!this.authEnabled) return true;
    return user !== undefined && this.authorize(user, app, permission);
  }

  /** The stored hash for verifyPassword; undefined for unknown users. */
  passwordOf(user: string): PasswordHash | undefined {
    return this.users.get(user)?.password;
  }

  /** Checks a user's password (scrypt + timingSafeEqual; unknown users cost the same and fail). */
  verify(user: string, password: string): Promise<boolean> {
    return verifyPassword(this.passwordOf(user), password);
  }

  user(name: string): UserInfo | undefined {
    const u = this.users.get(name);
    return u ? infoOf(name, u) : undefined;
  }

  userList(): UserInfo[] {
    return [...this.users.keys()].sort(cmp).map((n) => infoOf(n, this.users.get(n)!));
  }

  // ---- snapshots ---------------------------------------------------------------------------

  snapshot(): Uint8Array {
    const users: SnapshotUser[] = [];
    for (const name of [...this.users.keys()].sort(cmp)) {
      const u = this.users.get(name)!;
      const grants: (string | number)[] = [];
      for (const pattern of [...u.grants.keys()].sort(cmp)) grants.push(pattern, u.grants.get(pattern)!);
      const pw = u.password;
      users.push([name, pw.N, pw.r, pw.p, pw.salt, pw.hash, grants, u.createdAtMs, u.updatedAtMs]);
    }
    return pack({ v: SNAPSHOT_VERSION, rev: this.rev, users });
  }

  restore(data: Uint8Array): void {
    const s = unpack<{ v: number; rev: number; users: SnapshotUser[] }>(data);
    if (typeof s !== 'object' || s === null || s.v !== SNAPSHOT_VERSION) {
      throw new Error(
        `auth snapshot version ${String(s?.v)} is not supported (expected ${SNAPSHOT_VERSION})`,
      );
    }
    this.users.clear();
    this.rev = s.rev;
    for (const [name, N, r, p, salt, hash, flat, createdAtMs, updatedAtMs] of s.users) {
      const grants = new Map<string, number>();
      for (let i = 0; i < flat.length; i += 2) grants.set(flat[i] as string, flat[i + 1] as number);
      this.users.set(name, {
        password: { algorithm: 'scrypt', N, r, p, salt: new Uint8Array(salt), hash: new Uint8Array(hash) },
        grants,
        createdAtMs,
        updatedAtMs,
      });
    }
  }
}

function bits(perms: readonly Permission[]): number {
  let b = 0;
  for (const p of perms) b |= BIT[p];
  return b;
}

function isGlobalAdmin(u: User): boolean {
  return ((u.grants.get(ALL_APPS) ?? 0) & ADMIN) !== 0;
}

function infoOf(user: string, u: User): UserInfo {
  const grants: Record<string, Permission[]> = {};
  for (const pattern of [...u.grants.keys()].sort(cmp)) {
    const b = u.grants.get(pattern)!;
    grants[pattern] = PERMISSIONS.filter((p) => (b & BIT[p]) !== 0);
  }
  return { user, grants, createdAtMs: u.createdAtMs, updatedAtMs: u.updatedAtMs };
}

function ok(cmd: AuthCommand, info: UserInfo | undefined): AuthResult {
  return { ok: true, op: cmd.op, user: cmd.user, info };
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
