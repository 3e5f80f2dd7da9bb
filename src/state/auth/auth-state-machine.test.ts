import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { pack } from '../../node/envelope.js';
import type { ApplyContext } from '../../node/state-machine.js';
import { AuthStateMachine } from './auth-state-machine.js';
import { encodeAuthCommand, isAuthCommand } from './codec.js';
import { userAddCommand } from './commands.js';
import { hashPassword, PasswordPolicyError, verifyPassword } from './password.js';
import {
  type AuthCommand,
  type AuthResult,
  type PasswordHash,
  PERMISSIONS,
  type Permission,
} from './types.js';

const FAST = { N: 1024 }; // cheap scrypt for tests; production default is 2^15

let hashA: PasswordHash;
let hashB: PasswordHash;
beforeAll(async () => {
  hashA = await hashPassword('correct horse battery', FAST);
  hashB = await hashPassword('another secret', FAST);
});

class Log {
  index = 0;
  readonly sm = new AuthStateMachine();
  ctx(): ApplyContext {
    this.index++;
    return { index: this.index, term: 1, leaderTimeMs: 1_700_000_000_000 + this.index };
  }
  run(cmd: AuthCommand): AuthResult {
    return this.sm.apply(encodeAuthCommand(cmd), this.ctx());
  }
}

function withAdmin(): Log {
  const log = new Log();
  const r = log.run({ op: 'userAdd', user: 'root', password: hashA, grants: [['*', ['admin']]] });
  expect(r.ok).toBe(true);
  return log;
}

describe('passwords', () => {
  it('verifies the right password and rejects a wrong one or an unknown user', async () => {
    expect(await verifyPassword(hashA, 'correct horse battery')).toBe(true);
    expect(await verifyPassword(hashA, 'correct horse batterY')).toBe(false);
    expect(await verifyPassword(undefined, 'correct horse battery')).toBe(false);
    expect(await verifyPassword(hashA, 'x'.repeat(5000))).toBe(false);
  });

  it('salts every hash and stores no password', async () => {
    const again = await hashPassword('correct horse battery', FAST);
    expect(Buffer.from(again.salt).equals(Buffer.from(hashA.salt))).toBe(false);
    expect(Buffer.from(again.hash).equals(Buffer.from(hashA.hash))).toBe(false);
    expect(again).toMatchObject({ algorithm: 'scrypt', N: 1024, r: 8, p: 1 });
    const cmd = await userAddCommand('alice', 'correct horse battery', [['*', ['admin']]], FAST);
    expect(Buffer.from(cmd).includes('correct horse battery')).toBe(false);
  });

  it('refuses passwords and costs out of range', async () => {
    await expect(hashPassword('short')).rejects.toThrow(PasswordPolicyError);
    await expect(hashPassword('short')).rejects.toThrow(
      'password must be a string of 8..1024 characters, got 5',
    );
    await expect(hashPassword('long enough', { N: 1000 })).rejects.toThrow(
      'scrypt N must be a power of two in 1024..1048576, got 1000',
    );
    await expect(hashPassword('long enough', { N: 2 ** 20, r: 8 })).rejects.toThrow(/exceeds 268435456/);
  });

  it('verifies through the state machine', async () => {
    const log = withAdmin();
    expect(await log.sm.verify('root', 'correct horse battery')).toBe(true);
    expect(await log.sm.verify('root', 'another secret')).toBe(false);
    log.run({ op: 'userSetPassword', user: 'root', password: hashB });
    expect(await log.sm.verify('root', 'another secret')).toBe(true);
    expect(await log.sm.verify('root', 'correct horse battery')).toBe(false);
  });
});

describe('permissions', () => {
  it('follows the permission matrix per app', () => {
    const log = withAdmin();
    log.run({ op: 'userAdd', user: 'svc', password: hashB, grants: [['orders', ['acquire', 'renew']]] });
    log.run({ op: 'grant', user: 'svc', app: 'orders', permissions: ['release'] });
    log.run({ op: 'grant', user: 'svc', app: 'payments', permissions: ['read'] });
    log.run({ op: 'grant', user: 'svc', app: 'invoice-no', permissions: ['issue'] });
    const expected: Record<string, Record<Permission, boolean>> = {
      orders: { acquire: true, renew: true, release: true, read: false, admin: false, issue: false },
      payments: { acquire: false, renew: false, release: false, read: true, admin: false, issue: false },
      'invoice-no': { acquire: false, renew: false, release: false, read: false, admin: false, issue: true },
      users: { acquire: false, renew: false, release: false, read: false, admin: false, issue: false },
    };
    for (const [app, row] of Object.entries(expected)) {
      for (const perm of PERMISSIONS)
        expect([app, perm, log.sm.authorize('svc', app, perm)]).toEqual([app, perm, row[perm]]);
    }
    expect(log.sm.authorize('nobody', 'orders', 'read')).toBe(false);
    expect(log.sm.user('svc')?.grants).toEqual({
      orders: ['acquire', 'renew', 'release'],
      payments: ['read'],
      'invoice-no': ['issue'],
    });
  });

  it('lets admin imply every permission, on its app only', () => {
    const log = withAdmin();
    log.run({ op: 'userAdd', user: 'ops', password: hashB, grants: [['orders', ['admin']]] });
    for (const perm of PERMISSIONS) {
      expect(log.sm.authorize('ops', 'orders', perm)).toBe(true);
      expect(log.sm.authorize('ops', 'payments', perm)).toBe(false);
      expect(log.sm.authorize('root', 'anything', perm)).toBe(true);
    }
    // Managing users needs admin on '*'.
    expect(log.sm.authorize('ops', '*', 'admin')).toBe(false);
    expect(log.sm.authorize('root', '*', 'admin')).toBe(true);
  });

  it("matches every app with the '*' pattern", () => {
    const log = withAdmin();
    log.run({ op: 'userAdd', user: 'reader', password: hashB, grants: [['*', ['read']]] });
    expect(log.sm.authorize('reader', 'orders', 'read')).toBe(true);
    expect(log.sm.authorize('reader', 'any.other-app', 'read')).toBe(true);
    expect(log.sm.authorize('reader', 'orders', 'acquire')).toBe(false);
  });

  it('revokes some or all permissions on a pattern', () => {
    const log = withAdmin();
    log.run({
      op: 'userAdd',
      user: 'svc',
      password: hashB,
      grants: [['orders', ['acquire', 'renew', 'read']]],
    });
    log.run({ op: 'revoke', user: 'svc', app: 'orders', permissions: ['renew'] });
    expect(log.sm.user('svc')?.grants).toEqual({ orders: ['acquire', 'read'] });
    log.run({ op: 'revoke', user: 'svc', app: 'orders' });
    expect(log.sm.user('svc')?.grants).toEqual({});
  });

  it('is open without users and closed once one exists', () => {
    const log = new Log();
    expect(log.sm.authEnabled).toBe(false);
    expect(log.sm.permits(undefined, 'orders', 'acquire')).toBe(true);
    log.run({ op: 'userAdd', user: 'root', password: hashA, grants: [['*', ['admin']]] });
    expect(log.sm.authEnabled).toBe(true);
    expect(log.sm.permits(undefined, 'orders', 'acquire')).toBe(false);
    expect(log.sm.permits('root', 'orders', 'acquire')).toBe(true);
    expect(log.sm.revision).toBe(1);
  });
});

describe('user management', () => {
  it('refuses changes that would lock everybody out', () => {
    const log = new Log();
    const first = log.run({ op: 'userAdd', user: 'svc', password: hashA, grants: [['orders', ['acquire']]] });
    expect(first).toMatchObject({ ok: false, code: 'would_lock_out' });
    log.run({ op: 'userAdd', user: 'root', password: hashA, grants: [['*', ['admin']]] });
    log.run({ op: 'userAdd', user: 'svc', password: hashB, grants: [['orders', ['acquire']]] });
    expect(log.run({ op: 'userDelete', user: 'root' })).toMatchObject({ ok: false, code: 'would_lock_out' });
    expect(log.run({ op: 'revoke', user: 'root', app: '*', permissions: ['admin'] })).toMatchObject({
      code: 'would_lock_out',
    });
    log.run({ op: 'grant', user: 'svc', app: '*', permissions: ['admin'] });
    expect(log.run({ op: 'userDelete', user: 'root' })).toMatchObject({ ok: true });
    // The only user may be deleted: the cluster is open again.
    expect(log.run({ op: 'userDelete', user: 'svc' })).toMatchObject({ ok: true });
    expect(log.sm.authEnabled).toBe(false);
  });

  it('answers clear errors for duplicates, unknown users and bad fields', () => {
    const log = withAdmin();
    expect(log.run({ op: 'userAdd', user: 'root', password: hashB })).toMatchObject({ code: 'user_exists' });
    expect(log.run({ op: 'userDelete', user: 'ghost' })).toMatchObject({
      code: 'no_such_user',
      message: 'user "ghost" does not exist',
    });
    const ctx = log.ctx();
    expect(
      log.sm.apply(pack({ ns: 'auth', op: 'grant', user: 'root', app: 'a b', permissions: ['read'] }), ctx),
    ).toMatchObject({ code: 'invalid_argument', message: expect.stringMatching(/^app pattern must be/) });
    expect(
      log.sm.apply(pack({ ns: 'auth', op: 'grant', user: 'root', app: 'a', permissions: ['write'] }), ctx),
    ).toMatchObject({
      message: 'unknown permission "write"; allowed: acquire, renew, release, read, admin, issue',
    });
    expect(
      log.sm.apply(pack({ ns: 'auth', op: 'userAdd', user: 'x', password: 'plain-text!' }), ctx),
    ).toMatchObject({
      code: 'invalid_argument',
      message: 'password must be a hash made by hashPassword (never the password itself)',
    });
    expect(log.sm.apply(pack({ ns: 'auth', op: 'userDelete', user: '' }), ctx)).toMatchObject({
      message: expect.stringMatching(/^user must be 1..64 characters/),
    });
    expect(log.sm.apply(new Uint8Array([0xc1]), ctx)).toMatchObject({ code: 'bad_command' });
    expect(isAuthCommand({ ns: 'auth' })).toBe(true);
  });

  it('restores from a snapshot to an identical state', async () => {
    const log = withAdmin();
    log.run({
      op: 'userAdd',
      user: 'svc',
      password: hashB,
      grants: [
        ['orders', ['acquire']],
        ['*', ['read']],
      ],
    });
    const copy = new AuthStateMachine();
    copy.restore(log.sm.snapshot());
    expect(copy.snapshot()).toEqual(log.sm.snapshot());
    expect(copy.userList()).toEqual(log.sm.userList());
    expect(copy.revision).toBe(log.sm.revision);
    expect(await copy.verify('svc', 'another secret')).toBe(true);
    expect(copy.authorize('svc', 'payments', 'read')).toBe(true);
  });

  it('gives identical results and state on every replica (property)', () => {
    const users = ['root', 'u1', 'u2', 'u3'];
    const apps = ['*', 'orders', 'pay'];
    const perms = fc.subarray([...PERMISSIONS], { minLength: 0, maxLength: 3 });
    const cmd: fc.Arbitrary<AuthCommand> = fc.oneof(
      fc.record({
        op: fc.constant('userAdd' as const),
        user: fc.constantFrom(...users),
        password: fc.constantFrom(hashA, hashB),
        grants: fc.array(fc.tuple(fc.constantFrom(...apps), perms), { maxLength: 2 }),
      }),
      fc.record({ op: fc.constant('userDelete' as const), user: fc.constantFrom(...users) }),
      fc.record({
        op: fc.constant('userSetPassword' as const),
        user: fc.constantFrom(...users),
        password: fc.constantFrom(hashA, hashB),
      }),
      fc.record({
        op: fc.constant('grant' as const),
        user: fc.constantFrom(...users),
        app: fc.constantFrom(...apps),
        permissions: perms,
      }),
      fc.record({
        op: fc.constant('revoke' as const),
        user: fc.constantFrom(...users),
        app: fc.constantFrom(...apps),
        permissions: perms,
      }),
    );
    fc.assert(
      fc.property(fc.array(cmd, { maxLength: 60, size: 'max' }), fc.nat(), (cmds, cut) => {
        const a = new AuthStateMachine();
        const b = new AuthStateMachine();
        let c: AuthStateMachine | undefined;
        cmds.forEach((k, i) => {
          if (i === cut % Math.max(1, cmds.length)) {
            c = new AuthStateMachine();
            c.restore(a.snapshot());
          }
          const bytes = encodeAuthCommand(k);
          const ctx = { index: i + 1, term: 1, leaderTimeMs: 1000 + i };
          const ra = a.apply(bytes, ctx);
          expect(b.apply(bytes, ctx)).toEqual(ra);
          if (c) expect(c.apply(bytes, ctx)).toEqual(ra);
          // Never locked out: with users present, someone can manage them.
          if (a.authEnabled) expect(a.userList().some((u) => a.authorize(u.user, '*', 'admin'))).toBe(true);
        });
        expect(b.snapshot()).toEqual(a.snapshot());
        if (c) expect(c.snapshot()).toEqual(a.snapshot());
      }),
      { numRuns: 100 },
    );
  });
});
