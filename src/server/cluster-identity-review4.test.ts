import { afterEach, describe, expect, it } from 'vitest';
import { sequenceNodeOf } from '../sequences/floe-node-adapter.js';
import { allocProof, REMOTE_ALLOC_PATH } from '../sequences/remote-alloc.js';
import { SequenceService } from '../sequences/sequence-service.js';
import { buildCreate, encodeSequenceCommand } from '../state/sequences/index.js';
import { httpJsonCall, importThroughApi } from '../store/migrate.js';
import { identityCluster, oneAppExport, staleFollower } from './test-identity-cluster.js';

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const s of stops.splice(0).reverse()) await s();
});

const OTHER = '11111111-2222-4333-8444-555555555555';

describe('review 4 of the cluster identity', () => {
  it('a node that does not know its own UUID yet acts on a request that names a cluster (floe-cluster)', async () => {
    // Cluster B's leader, in the window before its UUID is applied (first election; a restarted leader replaying).
    const b = await identityCluster(stops, { keeper: false, secret: 'secret-b' });
    const res = await b.app.inject({
      method: 'PUT',
      url: '/v1/apps/svc/pool',
      headers: { 'floe-cluster': OTHER },
      payload: { bits: 4 },
    });
    // The caller named a cluster this node cannot vouch for: nothing may be done (e.g. 503 not_ready, retried).
    expect(b.state.leases.pool('svc')).toBeUndefined();
    expect(res.statusCode).not.toBe(200);
  });

  it('import-api: a stale leader address reaching another cluster whose leader does not know its UUID yet changes that cluster', async () => {
    const b = await identityCluster(stops, { keeper: false, secret: 'secret-b' });
    const aBase = await staleFollower(stops, OTHER, b.base);
    const outcome = await importThroughApi(oneAppExport(), httpJsonCall(`http://${aBase}`), () => {}, {
      retryMs: 20,
    }).then(
      (r) => r,
      (e: unknown) => e,
    );
    expect(outcome).toBeInstanceOf(Error); // holds: the answer names no cluster
    expect(b.state.leases.pool('svc')).toBeUndefined(); // fails: B got A's pool
  });

  it('a lease call whose path is percent-encoded is served by a leader that does not know the UUID (not_ready gate bypassed)', async () => {
    const c = await identityCluster(stops, { keeper: false, secret: 'secret-b' });
    await c.app.inject({ method: 'PUT', url: '/v1/apps/svc/pool', payload: { bits: 4 } });
    const plain = await c.app.inject({
      method: 'POST',
      url: '/v1/apps/svc/workers/acquire',
      payload: { nodeId: 'h1', requestId: 'r1' },
    });
    expect(plain.statusCode).toBe(503);
    const encoded = await c.app.inject({
      method: 'POST',
      url: '/v1/%61pps/svc/workers/acquire',
      payload: { nodeId: 'h1', requestId: 'r2' },
    });
    expect(encoded.statusCode).toBe(503);
  });

  it('readyz/gate: a follower under an older leader (never mints) is ready but answers every strict sequence alloc 503 instead of redirecting', async () => {
    // Rolling upgrade, as review 3's readiness test: this node is an upgraded follower, its leader (node 9) older.
    const { node, app } = await identityCluster(stops, {
      keeper: false,
      secret: 'secret-b',
      wrap: (n) =>
        new Proxy(n, {
          get(t, p, r) {
            if (p === 'isLeader') return false;
            if (p === 'leaderHint') return () => ({ id: 9, httpAddr: '127.0.0.9:7380' });
            if (p === 'status') return () => ({ ...t.status(), lead: 9, role: 'follower' });
            const v = Reflect.get(t, p, r);
            return typeof v === 'function' ? v.bind(t) : v;
          },
        }),
      services: (follower, state) => ({
        sequences: new SequenceService({
          node: sequenceNodeOf(follower),
          state: state.sequences,
          owner: 'node-1',
        }),
      }),
    });
    const create = buildCreate('orders', { mode: 'strict' });
    if ('ok' in create) throw new Error(create.message);
    await node.propose(encodeSequenceCommand(create));
    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(200); // review 3: ready without the UUID
    const alloc = await app.inject({
      method: 'POST',
      url: '/v1/sequences/orders/alloc',
      payload: { count: 1 },
    });
    // A strict key is served by the leader: this follower must pass it on (307, as it does lease calls), not stall it
    // with not_ready until an older leader that never mints a UUID is upgraded.
    expect(alloc.statusCode).not.toBe(503);
  });

  it('etcd store: the internal node-mode route allocates nothing through the Raft node (501), etcd holds the sequences', async () => {
    const store = { routing: { isActive: () => true, active: () => undefined, onChange: () => () => {} } };
    const { node, state, app } = await identityCluster(stops, {
      secret: 'secret-b',
      services: () => ({ store }) as never,
    });
    const create = buildCreate('orders', { mode: 'node' });
    if ('ok' in create) throw new Error(create.message);
    await node.propose(encodeSequenceCommand(create));
    if (state.cluster.uid === undefined) await new Promise((r) => state.cluster.onKnown(r));
    const cmd = { key: 'orders', count: 10, owner: 'node-2', requestId: 'r1', exact: false };
    const res = await app.inject({
      method: 'POST',
      url: REMOTE_ALLOC_PATH,
      payload: { ...cmd, proof: allocProof('secret-b', { op: 'alloc', ...cmd }) },
    });
    expect(res.statusCode).toBe(501);
    expect(res.json().error).toBe('not_supported');
    expect(state.sequences.get('orders')?.next ?? '1').toBe('1');
  });
});
