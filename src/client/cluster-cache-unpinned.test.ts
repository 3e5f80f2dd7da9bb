// Regression (review of the cluster identity, finding 1): a lease cache with no `cluster` (an older SDK, or a grant
// whose answer named none) was resumed by a client pinned to another cluster. A pinned client must never use a
// result of another cluster, nor resume its lease from a cache.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLUSTER_UID_HEADER } from './cluster-pin.js';
import type { FloeClient, LeaseWorkerOptions } from './floe-client.js';
import type { FetchLike } from './http-transport.js';
import { type FakeTime, fakeWorld, leaseDriven, leaveDeadLock } from './test-doubles.js';

const A = '0b6f5a8e-6a43-4d8c-9a4e-2f1d3c5b7a90';
const B = 'f3c1d2e4-1111-4222-8333-444455556666';
const TTL = 30_000;

const lease = (s: { time: FakeTime }, c: FloeClient, o: Partial<LeaseWorkerOptions> = {}) =>
  leaseDriven(s.time, c, { app: 'orders', nodeId: 'n1', ttlMs: TTL, ...o });

/** The fake cluster's answers, each naming `uid` (or none). */
function naming(inner: FetchLike, uid: string | undefined): FetchLike {
  return async (url, init) => {
    const r = await inner(url, init);
    return {
      ...r,
      headers: {
        get: (n: string) => (n.toLowerCase() === CLUSTER_UID_HEADER ? (uid ?? null) : r.headers.get(n)),
      },
    };
  };
}

describe('review: a lease cache with no `cluster` (written before the pin existed)', () => {
  it('a client pinned to A whose endpoints reach only B does not resume a cached lease B granted', async () => {
    const s = fakeWorld(Date.UTC(2026, 5, 1)); // s.cluster plays cluster B
    const cachePath = join(mkdtempSync(join(tmpdir(), 'floe-cid-review-')), 'lease.json');
    // Before the upgrade (an SDK or servers without the identity): B's grant, cached with no cluster.
    const p0 = await lease(s, s.mk({ incarnation: 'old', fetch: naming(s.cluster.fetch, undefined) }), {
      cachePath,
    });
    p0.snowflake().next();
    const rec = JSON.parse(readFileSync(cachePath, 'utf8'));
    expect(rec.cluster).toBeUndefined();
    leaveDeadLock(cachePath, 'boot-1', TTL);
    // After: pinned to A by the option; the endpoint still reaches B, whose every answer names B.
    const me = s.mk({ incarnation: 'new', clusterUid: A, fetch: naming(s.cluster.fetch, B) });
    const got = await lease(s, me, { cachePath, acquireTimeoutMs: 300 }).catch((e: unknown) => e);
    // Fails on fc8e194: the call is "unavailable" (every answer refused as B's), so B's cached grant is resumed and
    // the A-pinned client makes IDs with B's worker ID.
    expect(got).not.toHaveProperty('resumedFromCache', true);
  });
});
