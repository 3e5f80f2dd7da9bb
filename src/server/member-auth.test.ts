import { describe, expect, it } from 'vitest';
import { MEMBER_CLOCK_SKEW_MS, memberHeader, verifyMemberHeader } from './member-auth.js';

describe('member authentication (x-floe-member)', () => {
  const secret = 's'.repeat(32);
  const now = 1_800_000_000_000;
  it('proves the member id for this method and path, within the allowed clock skew', () => {
    const h = memberHeader(secret, 2, 'post', '/v1/apps/a/workers/acquire', now);
    expect(verifyMemberHeader(secret, h, 'POST', '/v1/apps/a/workers/acquire', now + 1000)).toBe(2);
    expect(
      verifyMemberHeader(secret, h, 'POST', '/v1/apps/a/workers/acquire', now + MEMBER_CLOCK_SKEW_MS + 1),
    ).toBeUndefined();
  });
  it('refuses another secret, path, method, member id, or a malformed header', () => {
    const h = memberHeader(secret, 2, 'POST', '/v1/apps/a/workers/acquire', now);
    expect(verifyMemberHeader('t'.repeat(32), h, 'POST', '/v1/apps/a/workers/acquire', now)).toBeUndefined();
    expect(verifyMemberHeader(secret, h, 'POST', '/v1/users', now)).toBeUndefined();
    expect(verifyMemberHeader(secret, h, 'GET', '/v1/apps/a/workers/acquire', now)).toBeUndefined();
    expect(
      verifyMemberHeader(secret, h.replace(/^2\./, '3.'), 'POST', '/v1/apps/a/workers/acquire', now),
    ).toBeUndefined();
    for (const bad of ['', 'x', '2.1.zz', `2.${now}.${'0'.repeat(63)}`])
      expect(verifyMemberHeader(secret, bad, 'POST', '/', now)).toBeUndefined();
  });
});
