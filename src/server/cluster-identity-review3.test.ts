import { afterEach, describe, expect, it } from 'vitest';
import { allocProof, httpRemoteAlloc, REMOTE_ALLOC_PATH } from '../sequences/remote-alloc.js';
import { buildCreate, encodeSequenceCommand, type SequenceResult } from '../state/sequences/index.js';
import { httpJsonCall, importThroughApi } from '../store/migrate.js';
import { identityCluster, knownUid, oneAppExport, staleFollower } from './test-identity-cluster.js';

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const s of stops.splice(0).reverse()) await s();
});

const SECRET = 'secret-a';

describe('review 3 of the cluster identity', () => {
  it('import-api: a target follower whose leader address now reaches another cluster does not import into that cluster', async () => {
    // Cluster B (a real node, its own UUID) sits at the address the target's follower still names as its leader.
    const b = await identityCluster(stops);
    await knownUid(b.state);
    // The target: a follower of cluster A that knows A's UUID and redirects every write to its (stale) leader hint.
    const aUid = '11111111-2222-4333-8444-555555555555';
    const aBase = await staleFollower(stops, aUid, b.base);
    const outcome = await importThroughApi(oneAppExport(), httpJsonCall(`http://${aBase}`), () => {}, {
      retryMs: 20,
    }).then(
      (r) => r,
      (e: unknown) => e,
    );
    // The import may fail, but it must not have written cluster A's marks into cluster B (and reported success).
    expect(b.state.leases.pool('svc')).toBeUndefined();
    expect(outcome).toBeInstanceOf(Error);
  });

  it('remote alloc: a leader that does not know the UUID yet allocates no segment the follower must refuse', async () => {
    // The internal route is not gated like POST /v1/sequences/*/alloc: the leader allocates and answers without a
    // floe-cluster header; the follower (F5) refuses the answer, so the segment is allocated and thrown away.
    const c = await identityCluster(stops, { keeper: false });
    const create = buildCreate('invoices', {});
    if ('ok' in create) throw new Error(create.message);
    await c.node.propose(encodeSequenceCommand(create));
    const remote = httpRemoteAlloc({
      secret: SECRET,
      leaderHttpAddr: () => c.base,
      clusterUid: () => '11111111-2222-4333-8444-555555555555',
      fetch: async (url, init) => {
        const r = await fetch(url, init);
        return { status: r.status, headers: r.headers, json: () => r.json() as Promise<unknown> };
      },
    });
    await expect(
      remote({ op: 'alloc', key: 'invoices', count: 100, owner: 'node-2', requestId: 'r1', exact: false }),
    ).rejects.toThrow(/answer refused|not_ready|not know/);
    // Nothing was allocated: the next segment still starts at the sequence's start.
    const next = (await c.node.propose(
      encodeSequenceCommand({
        op: 'alloc',
        key: 'invoices',
        count: 1,
        owner: 'node-1',
        requestId: 'r2',
        exact: false,
      }),
    )) as SequenceResult;
    expect(next).toMatchObject({ ok: true, start: '1' });
  });

  it('remote alloc: the internal allocation route answers 503 not_ready on a leader that does not know the UUID', async () => {
    const c = await identityCluster(stops, { keeper: false });
    const cmd = { key: 'invoices', count: 10, owner: 'node-2', requestId: 'r1', exact: false };
    const res = await c.app.inject({
      method: 'POST',
      url: REMOTE_ALLOC_PATH,
      payload: { ...cmd, proof: allocProof(SECRET, { op: 'alloc', ...cmd }) },
    });
    expect(res.statusCode).toBe(503);
  });

  it('readyz: a follower under an older-version leader (which never mints) becomes ready, as it redirects every lease call', async () => {
    // A rolling upgrade: this node runs the new version, its leader (node 9) an older one that never proposes the
    // UUID. F2 made followers redirect lease calls instead of answering not_ready, but F3 keeps /readyz at 503 until
    // the UUID is known, which here is never: a rollout that waits for readiness (a StatefulSet) stops at this node.
    const c = await identityCluster(stops, {
      keeper: false,
      wrap: (n) => {
        return new Proxy(n, {
          get(t, p, r) {
            if (p === 'isLeader') return false;
            if (p === 'status') return () => ({ ...t.status(), lead: 9, role: 'follower' });
            const v = Reflect.get(t, p, r);
            return typeof v === 'function' ? v.bind(t) : v;
          },
        });
      },
    });
    const lease = await c.app.inject({
      method: 'POST',
      url: '/v1/apps/svc/workers/acquire',
      payload: { nodeId: 'h1', requestId: 'r1' },
    });
    expect(lease.statusCode).not.toBe(503);
    const ready = await c.app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json().clusterKnown).toBe(false);
  });

  it('a request naming another cluster in floe-cluster is refused 421 before anything is done', async () => {
    const c = await identityCluster(stops);
    const uid = await knownUid(c.state);
    const other = '11111111-2222-4333-8444-555555555555';
    const res = await c.app.inject({
      method: 'PUT',
      url: '/v1/apps/svc/pool',
      headers: { 'floe-cluster': other },
      payload: { bits: 4 },
    });
    expect(res.statusCode).toBe(421);
    expect(res.json()).toMatchObject({ error: 'cluster_mismatch' });
    expect(res.headers['floe-cluster']).toBe(uid);
    expect(c.state.leases.pool('svc')).toBeUndefined();
    const mine = await c.app.inject({
      method: 'PUT',
      url: '/v1/apps/svc/pool',
      headers: { 'floe-cluster': uid.toUpperCase() },
      payload: { bits: 4 },
    });
    expect(mine.statusCode).toBe(200);
  });
  it('a floe-cluster header that is no UUID is refused 400 invalid_argument, not 421 (review of the RESP option, 3)', async () => {
    const c = await identityCluster(stops);
    await knownUid(c.state);
    for (const bad of [
      'prod',
      '11111111-2222-4333-8444-55555555555',
      '{11111111-2222-4333-8444-555555555555}',
    ]) {
      const res = await c.app.inject({
        method: 'PUT',
        url: '/v1/apps/svc/pool',
        headers: { 'floe-cluster': bad },
        payload: { bits: 4 },
      });
      expect(res.statusCode, bad).toBe(400);
      expect(res.json()).toMatchObject({ error: 'invalid_argument' });
      expect(res.json().message).toMatch(/floe-cluster header must be the cluster's UUID/);
    }
    expect(c.state.leases.pool('svc')).toBeUndefined();
  });
});
