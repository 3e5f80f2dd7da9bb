// The cluster identity (review of FS-19): no answer used to name its cluster, so a client whose endpoints, balancer or
// a redirect reached another Floe cluster was granted a worker ID there. Every answer names it now (`floe-cluster`);
// these tests fail on the code before it (the transport took any 2xx as the answer).
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLUSTER_UID_HEADER, ClusterPin } from './cluster-pin.js';
import { ClientOptionError, FloeUnavailableError, ReplyMismatchError } from './errors.js';
import type { FloeClient } from './floe-client.js';
import type { FetchResponseLike } from './http-transport.js';
import { fakeWorld, leaveDeadLock, virtualTransport } from './test-doubles.js';

const A = '0b6f5a8e-6a43-4d8c-9a4e-2f1d3c5b7a90';
const B = 'f3c1d2e4-1111-4222-8333-444455556666';

function reply(status: number, body: unknown, cluster?: string): FetchResponseLike {
  return {
    status,
    headers: { get: (n) => (n === CLUSTER_UID_HEADER && cluster !== undefined ? cluster : null) },
    text: async () => JSON.stringify(body),
  };
}

const transportOf = (
  endpoints: string[],
  answer: (host: string, headers: Record<string, string>) => FetchResponseLike,
  pin?: string,
) => virtualTransport(endpoints, answer, new ClusterPin(pin));

describe('ClusterPin', () => {
  it('refuses a clusterUid option that is not a UUID, naming the option', () => {
    expect(() => new ClusterPin('floe')).toThrow(ClientOptionError);
    expect(() => new ClusterPin('floe')).toThrow(/clusterUid/);
  });

  it('pins the first successful answer that names a cluster; an error answer does not pin', () => {
    const p = new ClusterPin(undefined);
    expect(p.admit('/x', B, false)).toBeUndefined();
    expect(p.value).toBeUndefined();
    expect(p.admit('/x', A, true)).toBeUndefined();
    expect(p.value).toBe(A);
    const e = p.admit('/x', B, false);
    expect(e).toBeInstanceOf(ReplyMismatchError);
    expect(e?.field).toBe('cluster');
  });

  it('once pinned, a successful answer that names no cluster is refused; an error answer without one passes', () => {
    const p = new ClusterPin(A);
    expect(p.admit('/x', null, true)?.message).toMatch(/names no cluster/);
    expect(p.admit('/x', null, false)).toBeUndefined();
    expect(p.admit('/x', 'not-a-uuid', false)).toBeInstanceOf(ReplyMismatchError);
  });

  it("adopts a lease cache's cluster only when nothing is pinned", () => {
    const p = new ClusterPin(undefined);
    expect(p.adopt(B)).toBe(true);
    expect(p.adopt(A)).toBe(false);
    expect(p.value).toBe(B);
  });

  it("a node's own client (review 2, finding 5): no result is taken before the node knows its UUID, then only its own", () => {
    let own: string | undefined;
    const p = new ClusterPin(() => own);
    // A redirect may have led to another cluster's leader: its grant must not pin that cluster.
    expect(p.admit('/x', B, true)).toBeInstanceOf(ReplyMismatchError);
    expect(p.value).toBeUndefined();
    expect(p.adopt(B)).toBe(false);
    expect(p.admit('/x', null, false)).toBeUndefined();
    own = A;
    expect(p.admit('/x', B, true)).toBeInstanceOf(ReplyMismatchError);
    expect(p.admit('/x', A, true)).toBeUndefined();
    expect(p.value).toBe(A);
    expect(p.refused).toBe(2);
  });
});

describe('HttpTransport: answers of another cluster (FS-19 review)', () => {
  it('a grant from another cluster behind a configured endpoint is refused, and the call is answered by its own', async () => {
    const { t, hosts } = transportOf(
      ['b1:8080', 'a1:8080'],
      (host) =>
        host === 'b1:8080' ? reply(200, { ok: true, from: 'B' }, B) : reply(200, { ok: true, from: 'A' }, A),
      A,
    );
    const r = await t.post<{ from: string }>('/v1/apps/svc/workers/acquire', {}, { budgetMs: 10_000 });
    expect(r.body.from).toBe('A');
    expect(hosts).toEqual(['b1:8080', 'a1:8080']);
    expect(t.cluster.refused).toBe(1);
  });

  it("a redirect from another cluster's node is not followed", async () => {
    const { t, hosts } = transportOf(
      ['b1:8080', 'a1:8080'],
      (host) => {
        if (host === 'b1:8080')
          return reply(307, { error: 'not_leader', message: 'x', leader: { id: 2, httpAddr: 'b2:8080' } }, B);
        if (host === 'a1:8080') return reply(200, { ok: true }, A);
        throw new Error(`followed to ${host}`);
      },
      A,
    );
    await t.post('/v1/apps/svc/workers/acquire', {}, { budgetMs: 10_000 });
    expect(hosts).not.toContain('b2:8080');
  });

  it('only another cluster answering: the call fails unavailable, its cause the mismatch, never a result', async () => {
    const { t } = transportOf(['b1:8080'], () => reply(200, { ok: true }, B), A);
    const err = await t.post('/v1/apps/svc/workers/acquire', {}, { budgetMs: 500 }).catch((e) => e);
    expect(err).toBeInstanceOf(FloeUnavailableError);
    expect((err as FloeUnavailableError).cause).toBeInstanceOf(ReplyMismatchError);
  });

  it('without the option: pinned by the first result, then another cluster is refused', async () => {
    let turn = 0;
    const { t } = transportOf(['lb:8080'], () =>
      turn++ === 0 ? reply(200, { n: 1 }, A) : turn === 2 ? reply(200, { n: 2 }, B) : reply(200, { n: 3 }, A),
    );
    expect((await t.post<{ n: number }>('/p', {}, { budgetMs: 10_000 })).body.n).toBe(1);
    expect(t.cluster.value).toBe(A);
    expect((await t.post<{ n: number }>('/p', {}, { budgetMs: 10_000 })).body.n).toBe(3);
  });
});

describe('HttpTransport: every request names the pinned cluster (the next step after the FS-19 review)', () => {
  // Before, the SDK checked only the answer: another cluster behind a configured endpoint had already acted (granted a
  // lease that then sat unused for a TTL, or renewed or released one whose app, worker ID and token matched).
  it('sends floe-cluster once pinned by the option, and nothing before a first result pins one', async () => {
    const seen: Array<string | undefined> = [];
    const pinned = transportOf(
      ['a1:8080'],
      (_h, headers) => {
        seen.push(headers[CLUSTER_UID_HEADER]);
        return reply(200, { ok: true }, A);
      },
      A,
    );
    await pinned.t.post('/v1/apps/svc/workers/acquire', {}, { budgetMs: 10_000 });
    expect(seen).toEqual([A]);

    seen.length = 0;
    const unpinned = transportOf(['a1:8080'], (_h, headers) => {
      seen.push(headers[CLUSTER_UID_HEADER]);
      return reply(200, { ok: true }, A);
    });
    await unpinned.t.post('/p', {}, { budgetMs: 10_000 });
    await unpinned.t.post('/p', {}, { budgetMs: 10_000 });
    expect(seen).toEqual([undefined, A]);
  });

  it("a node's own client sends nothing until the node knows its UUID, then names it (review of 3775fb6, F3)", async () => {
    let reads = 0;
    const seen: Array<string | undefined> = [];
    const { t } = virtualTransport(
      ['a1:8080'],
      (_h, headers) => {
        seen.push(headers[CLUSTER_UID_HEADER]);
        return reply(200, { ok: true }, A);
      },
      // The node applies its UUID a few attempts into the call.
      new ClusterPin(() => (++reads > 6 ? A : undefined)),
    );
    await t.post('/p', {}, { budgetMs: 10_000 });
    expect(seen).toEqual([A]);
  });

  it('a 421 cluster_mismatch (even one whose header a proxy dropped) is a refusal: the call goes on with its own cluster', async () => {
    const { t, hosts } = transportOf(
      ['b1:8080', 'a1:8080'],
      (host, headers) =>
        host === 'b1:8080'
          ? reply(421, { error: 'cluster_mismatch', message: `meant for ${headers[CLUSTER_UID_HEADER]}` })
          : reply(200, { from: 'A' }, A),
      A,
    );
    const r = await t.post<{ from: string }>('/v1/apps/svc/workers/acquire', {}, { budgetMs: 10_000 });
    expect(r.body.from).toBe('A');
    expect(hosts).toEqual(['b1:8080', 'a1:8080']);
    expect(t.cluster.refused).toBe(1);
    const only = transportOf(['b1:8080'], () => reply(421, { error: 'cluster_mismatch', message: 'x' }), A);
    const err = await only.t.post('/p', {}, { budgetMs: 500 }).catch((e) => e);
    expect(err).toBeInstanceOf(FloeUnavailableError);
    expect((err as FloeUnavailableError).cause).toBeInstanceOf(ReplyMismatchError);
  });
});

describe('the lease cache records its cluster (FS-19 review)', () => {
  const WALL0 = Date.UTC(2026, 5, 1);
  const TTL = 30_000;

  async function lease(s: ReturnType<typeof fakeWorld>, c: FloeClient, cachePath: string, more = {}) {
    let done = false;
    const p = c.leaseWorker({ app: 'orders', nodeId: 'n1', ttlMs: TTL, cachePath, ...more }).finally(() => {
      done = true;
    });
    p.catch(() => {});
    for (let i = 0; i < 2000 && !done; i++) await s.time.advance(10);
    return p;
  }

  it("a restarted client pins its cache's cluster: another cluster's grant is refused", async () => {
    const s = fakeWorld(WALL0);
    s.cluster.clusterUid = A;
    const cachePath = join(mkdtempSync(join(tmpdir(), 'floe-pin-')), 'lease.json');
    const first = await lease(s, s.mk({ incarnation: 'p0' }), cachePath);
    expect(JSON.parse(readFileSync(cachePath, 'utf8')).cluster).toBe(A);
    first.snowflake().next();
    leaveDeadLock(cachePath, 'boot-1', TTL); // the process died
    s.cluster.clusterUid = B; // its endpoints now reach another cluster
    const next = s.mk({ incarnation: 'p1' });
    const got = await lease(s, next, cachePath, { acquireTimeoutMs: 300 });
    expect(next.clusterUid).toBe(A);
    // Cluster A is away (only B answers): the cached lease of A is resumed, within its deadline, as when A is down.
    // Before the fix B's grant was taken: a fresh token of B's.
    expect(got.resumedFromCache).toBe(true);
    expect(got.token).toBe(first.token);
    expect(next.transport.cluster.refused).toBeGreaterThan(0);
  });

  it('a cache written against another cluster than clusterUid is neither resumed nor released', async () => {
    const s = fakeWorld(WALL0);
    s.cluster.clusterUid = B;
    const cachePath = join(mkdtempSync(join(tmpdir(), 'floe-pin-')), 'lease.json');
    const first = await lease(s, s.mk({ incarnation: 'p0' }), cachePath);
    first.snowflake().next();
    leaveDeadLock(cachePath, 'boot-1', TTL);
    s.cluster.clusterUid = A;
    s.cluster.leader = undefined; // cluster A away: only the cache could help, and it is B's
    const before = s.cluster.requests.length;
    const err = await lease(s, s.mk({ incarnation: 'p1', clusterUid: A }), cachePath, {
      acquireTimeoutMs: 300,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FloeUnavailableError);
    expect(s.cluster.requests.slice(before).some((r) => r.path.endsWith('/release'))).toBe(false);
  });
});
