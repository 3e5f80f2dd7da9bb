import { afterEach, describe, expect, it } from 'vitest';
import { hashPassword } from '../../state/auth/password.js';
import type { PasswordHash } from '../../state/auth/types.js';
import { PasswordVerifier } from './password-verifier.js';

let verifiers: PasswordVerifier[] = [];
afterEach(() => {
  for (const v of verifiers) v.close();
  verifiers = [];
});

async function setup(extra: Partial<ConstructorParameters<typeof PasswordVerifier>[0]> = {}) {
  const users = new Map<string, PasswordHash>([
    ['svc', await hashPassword('right-password', { N: 2 ** 10 })],
  ]);
  let now = 1_000_000;
  let revision = 1;
  const v = new PasswordVerifier({
    lookup: (u) => users.get(u),
    revision: () => revision,
    now: () => now,
    ...extra,
  });
  verifiers.push(v);
  return { v, users, advance: (ms: number) => (now += ms), bump: () => revision++ };
}

describe('PasswordVerifier (issue 15 item 1)', () => {
  it('checks on its own thread: right and wrong passwords, unknown users', async () => {
    const { v } = await setup();
    expect(await v.verify('svc', 'right-password', '10.0.0.1')).toEqual({ ok: true });
    expect(await v.verify('svc', 'wrong-password', '10.0.0.2')).toEqual({ ok: false, reason: 'wrong' });
    expect(await v.verify('nobody', 'right-password', '10.0.0.3')).toEqual({ ok: false, reason: 'wrong' });
  });

  it('backs off after 5 failures from one address: refused without hashing, doubling; other addresses and users unaffected', async () => {
    const { v, advance } = await setup();
    for (let i = 0; i < 5; i++) expect((await v.verify('x', `bad-${i}`, 'evil')).ok).toBe(false);
    const hashed = v.stats.hashed;
    const r = await v.verify('x', 'bad-6', 'evil');
    expect(r).toEqual({ ok: false, reason: 'backoff', retryAfterMs: 1000 });
    expect(v.stats.hashed).toBe(hashed); // refused without hashing
    // Another address and another user are not blocked by it.
    expect(await v.verify('svc', 'right-password', 'good')).toEqual({ ok: true });
    advance(1001);
    expect((await v.verify('x', 'bad-7', 'evil')).ok).toBe(false);
    expect(await v.verify('x', 'bad-8', 'evil')).toEqual({
      ok: false,
      reason: 'backoff',
      retryAfterMs: 2000,
    });
  });

  it('backs off per user too, but a credential verified before still passes (no lock-out by failing on purpose)', async () => {
    const { v } = await setup();
    expect(await v.verify('svc', 'right-password', 'owner')).toEqual({ ok: true });
    for (let i = 0; i < 5; i++) await v.verify('svc', `guess-${i}`, `attacker-${i}`);
    expect(await v.verify('svc', 'guess-9', 'attacker-9')).toMatchObject({ ok: false, reason: 'backoff' });
    expect(await v.verify('svc', 'right-password', 'owner')).toEqual({ ok: true }); // from the cache
  });

  it('caches only successes, and only for the users revision they were checked in', async () => {
    const { v, bump } = await setup();
    await v.verify('svc', 'right-password', 'a');
    await v.verify('svc', 'right-password', 'a');
    expect(v.stats).toMatchObject({ hashed: 1, cached: 1 });
    bump(); // passwd, revoke, delete: any change of users
    await v.verify('svc', 'right-password', 'a');
    expect(v.stats.hashed).toBe(2);
  });

  it('single-flight: concurrent checks of one credential share one hash; a full queue refuses at once', async () => {
    const { v } = await setup({ maxQueued: 2 });
    const same = await Promise.all([1, 2, 3].map(() => v.verify('svc', 'right-password', 'a')));
    expect(same.every((r) => r.ok)).toBe(true);
    expect(v.stats.hashed).toBe(1);
    const many = await Promise.all([1, 2, 3, 4].map((i) => v.verify(`u${i}`, `p${i}`, `addr${i}`)));
    expect(many.filter((r) => !r.ok && r.reason === 'busy').length).toBe(2);
  });
});
