import { afterEach, describe, expect, it } from 'vitest';
import { leaseNodeOf } from '../lease/floe-node-adapter.js';
import { LeaseService } from '../lease/lease-service.js';
import type { FloeNode } from '../node/node.js';
import { identityCluster } from '../server/test-identity-cluster.js';
import { ClientOptionError, FloeUnavailableError } from './errors.js';
import { clusterKit, leasesOn } from './test-cluster-kit.js';

const { stops, cluster, client, cacheOfA, cleanup } = clusterKit();
afterEach(cleanup);

describe('review of 3775fb6: requests that name the pinned cluster', () => {
  it('a lease cache written against A: a call started beside the cached lease is sent before the cache is read, names nothing, and is granted by B', async () => {
    const [a, b] = await Promise.all([cluster('secret-a'), cluster('secret-b')]);
    const cachePath = await cacheOfA(a);
    // The restarted process: its endpoints now reach B first. Its cache names A ("what is pinned: ... else the cluster
    // a lease cache was written against"). It starts the cached lease first, and another app's lease beside it.
    const next = client({ endpoints: [b.base, a.base] });
    const cached = next.leaseWorker({ app: 'svc', nodeId: 'h1', cachePath, acquireTimeoutMs: 3000 });
    const other = next.leaseWorker({ app: 'other', nodeId: 'h2', acquireTimeoutMs: 3000 });
    await Promise.allSettled([cached, other]);
    // What happens: `other`'s acquire is sent at once, naming nothing (the cache is read only once its lock is held),
    // reaches B and is granted there; by the time B answers, the cache has pinned A, so B's grant is refused, and sits
    // on B for a TTL. (Had B answered first, B would be pinned: next test.)
    expect({
      pinned: next.clusterUid === a.uid ? 'A' : next.clusterUid === b.uid ? 'B' : 'none',
      onB: { svc: leasesOn(b, 'svc').length, other: leasesOn(b, 'other').length },
    }).toEqual({ pinned: 'A', onB: { svc: 0, other: 0 } });
  });

  it('a lease cache written against A, read after a first call pinned B from its answer: the cached call is refused, nothing of the cached app is leased from B', async () => {
    const [a, b] = await Promise.all([cluster('secret-a'), cluster('secret-b')]);
    const cachePath = await cacheOfA(a);
    const next = client({ endpoints: [b.base, a.base] });
    // E.g. a lease without a cache (or a sequence) set up first, then the cached one. With nothing pinned, the first
    // answer pins its cluster (documented: set clusterUid), so `other` is B's.
    await next.leaseWorker({ app: 'other', nodeId: 'h2', acquireTimeoutMs: 3000 }).catch(() => {});
    expect(next.clusterUid).toBe(b.uid);
    // On 3775fb6 the cached app was then leased from B: B's worker ID while A may have granted the same one to
    // another holder (duplicates, FS-19). Now the conflict between the cache's cluster and the learned one is refused.
    const err = await next
      .leaseWorker({ app: 'svc', nodeId: 'h1', cachePath, acquireTimeoutMs: 3000 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClientOptionError);
    expect(String(err)).toMatch(/clusterUid/);
    expect(String(err)).toContain(a.uid);
    expect(leasesOn(b, 'svc')).toEqual([]);
  });

  it('with clusterUid set, a cache written against another cluster is overridden (a migration), and never resumed', async () => {
    const [a, b] = await Promise.all([cluster('secret-a'), cluster('secret-b')]);
    const cachePath = await cacheOfA(a);
    const moved = client({ endpoints: [b.base], clusterUid: b.uid });
    const l = await moved.leaseWorker({ app: 'svc', nodeId: 'h1', cachePath, acquireTimeoutMs: 3000 });
    expect(leasesOn(b, 'svc')).toHaveLength(1);
    await l.release();
  });

  it("a node's own client (clusterUid given as a function) sends its requests while the node does not know its UUID: they act on whatever cluster they reach, though every result is refused", async () => {
    const b = await cluster('secret-b');
    // The node's UUID is not applied yet (a restarted follower catching up, a cluster's first election).
    const own = client({ endpoints: [b.base], clusterUid: () => undefined });
    const err = await own
      .leaseWorker({ app: 'svc', nodeId: 'floe-node-1', acquireTimeoutMs: 300 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FloeUnavailableError); // holds: no result taken
    // Fails: B granted (and holds for a TTL) a lease to a request whose answer could only ever be refused. import-api
    // and the node-mode segment route wait for the UUID before sending anything; this client does not.
    expect(leasesOn(b, 'svc')).toEqual([]);
  });

  it('a follower that does not know the UUID answers a pinned client 503 not_ready instead of redirecting it to the leader: a client whose only endpoint is that follower (a DNS name, a balancer on a kept-alive connection) gets no lease', async () => {
    const leader = await cluster('secret-a');
    // An upgraded follower of the same cluster whose state came from an older member's snapshot (docs/cluster-
    // identity.md, Limits: it learns the UUID only if it leads or from a later snapshot), or one still catching up.
    const follower = (n: FloeNode<unknown>): FloeNode<unknown> =>
      new Proxy(n, {
        get(t, p, r) {
          if (p === 'isLeader') return false;
          if (p === 'leaderHint') return () => ({ id: 9, httpAddr: leader.base });
          if (p === 'status') return () => ({ ...t.status(), lead: 9, role: 'follower' });
          const v = Reflect.get(t, p, r);
          return typeof v === 'function' ? v.bind(t) : v;
        },
      });
    const f = await identityCluster(stops, {
      keeper: false,
      secret: 'secret-a',
      wrap: follower,
      services: (served, state) => ({
        leases: new LeaseService({ node: leaseNodeOf(served), state: state.leases }),
      }),
    });
    expect(f.state.cluster.uid).toBeUndefined();

    // Control: a client that names nothing is redirected by the follower to the leader and gets its lease there.
    const unpinned = client({ endpoints: [f.base] });
    const l0 = await unpinned.leaseWorker({ app: 'svc', nodeId: 'h0', acquireTimeoutMs: 5000 });
    expect(unpinned.clusterUid).toBe(leader.uid);
    await l0.release();

    // The same client pinned to the same cluster (as production is told to run it): 503 not_ready on every attempt,
    // each followed by a 1 s wait (Retry-After), no redirect, no learned leader. On 3775fb6^ it got its lease.
    const pinned = client({ endpoints: [f.base], clusterUid: leader.uid });
    const got = await pinned.leaseWorker({ app: 'svc', nodeId: 'h1', acquireTimeoutMs: 5000 }).then(
      (l) => ({ ok: true as const, token: l.token }),
      (e: unknown) => ({ ok: false as const, error: String((e as Error).cause ?? e) }),
    );
    expect(got.ok ? 'a lease' : got.error).toBe('a lease');
  });
});
