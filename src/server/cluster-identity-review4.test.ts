// Regression tests for adversarial review 4 of the cluster identity (written by the reviewer against ef68172, where
// each failed).
import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { leaseNodeOf } from '../lease/floe-node-adapter.js';
import { LeaseService } from '../lease/lease-service.js';
import type { FloeNode } from '../node/node.js';
import { sequenceNodeOf } from '../sequences/floe-node-adapter.js';
import { allocProof, REMOTE_ALLOC_PATH } from '../sequences/remote-alloc.js';
import { SequenceService } from '../sequences/sequence-service.js';
import { buildCreate, encodeSequenceCommand } from '../state/sequences/index.js';
import { httpJsonCall, importThroughApi, type LeaseExport } from '../store/migrate.js';
import { ClusterIdentityKeeper } from './cluster-identity.js';
import { startHttpAdmin } from './http-admin.js';
import { memorySingleNode } from './test-node.js';

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const s of stops.splice(0).reverse()) await s();
});

/** A one-node cluster with the real HTTP API; `keeper: false` plays the window before its UUID is applied. */
async function cluster(keeper = true) {
  const { node, state } = memorySingleNode();
  const leases = new LeaseService({ node: leaseNodeOf(node), state: state.leases });
  const k = keeper ? new ClusterIdentityKeeper({ node: leaseNodeOf(node), state: state.cluster }) : undefined;
  const app = await startHttpAdmin({
    node,
    kv: state.kv,
    services: { node, leases, auth: state.auth, clusterUid: () => state.cluster.uid },
    clusterSecret: 'secret-b',
    host: '127.0.0.1',
    port: 0,
  });
  node.start();
  await node.waitForLeader();
  await leases.whenReady();
  stops.push(async () => {
    k?.close();
    leases.close();
    await node.stop('test over');
    await app.close();
  });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return { node, state, app, base: `127.0.0.1:${addr.port}` };
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  stops.push(() => new Promise<void>((r) => server.close(() => r())));
  const a = server.address();
  if (!a || typeof a === 'string') throw new Error('no address');
  return `127.0.0.1:${a.port}`;
}

const OTHER = '11111111-2222-4333-8444-555555555555';

describe('review 4 of the cluster identity', () => {
  it('a node that does not know its own UUID yet acts on a request that names a cluster (floe-cluster)', async () => {
    // Cluster B's leader, in the window before its UUID is applied (first election; a restarted leader replaying).
    const b = await cluster(false);
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
    const b = await cluster(false);
    const target = createServer((req, res) => {
      res.setHeader('floe-cluster', OTHER);
      if (req.method === 'GET' && req.url === '/v1/cluster') {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ id: 2, cluster: OTHER, role: 'follower', leader: 1 }));
        return;
      }
      res.statusCode = 307;
      res.setHeader('location', `http://${b.base}${req.url}`);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ error: 'not_leader', leader: { id: 1, httpAddr: b.base } }));
    });
    const aBase = await listen(target);
    const data = {
      format: 'floe-leases',
      version: 2,
      source: ['test'],
      pools: [
        {
          app: 'svc',
          bits: 4,
          datacenterBits: 0,
          layout: '',
          records: [{ workerId: 3, highWaterMs: Date.now() - 60_000, floorMs: 0 }],
        },
      ],
      sequences: [],
      tombstones: [],
    } as unknown as LeaseExport;
    const outcome = await importThroughApi(data, httpJsonCall(`http://${aBase}`), () => {}, {
      retryMs: 20,
    }).then(
      (r) => r,
      (e: unknown) => e,
    );
    expect(outcome).toBeInstanceOf(Error); // holds: the answer names no cluster
    expect(b.state.leases.pool('svc')).toBeUndefined(); // fails: B got A's pool
  });

  it('a lease call whose path is percent-encoded is served by a leader that does not know the UUID (not_ready gate bypassed)', async () => {
    const c = await cluster(false);
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
    const { node, state } = memorySingleNode();
    const follower = new Proxy(node, {
      get(t, p, r) {
        if (p === 'isLeader') return false;
        if (p === 'leaderHint') return () => ({ id: 9, httpAddr: '127.0.0.9:7380' });
        if (p === 'status') return () => ({ ...t.status(), lead: 9, role: 'follower' });
        const v = Reflect.get(t, p, r);
        return typeof v === 'function' ? v.bind(t) : v;
      },
    }) as FloeNode<unknown>;
    const leases = new LeaseService({ node: leaseNodeOf(node), state: state.leases });
    const sequences = new SequenceService({
      node: sequenceNodeOf(follower),
      state: state.sequences,
      owner: 'node-1',
    });
    const app = await startHttpAdmin({
      node: follower,
      kv: state.kv,
      services: { node: follower, leases, sequences, auth: state.auth, clusterUid: () => state.cluster.uid },
      clusterSecret: 'secret-b',
      host: '127.0.0.1',
      port: 0,
    });
    node.start();
    await node.waitForLeader();
    stops.push(async () => {
      leases.close();
      await node.stop('test over');
      await app.close();
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
    const { node, state } = memorySingleNode();
    const leases = new LeaseService({ node: leaseNodeOf(node), state: state.leases });
    const k = new ClusterIdentityKeeper({ node: leaseNodeOf(node), state: state.cluster });
    const store = { routing: { isActive: () => true, active: () => undefined, onChange: () => () => {} } };
    const app = await startHttpAdmin({
      node,
      kv: state.kv,
      services: { node, leases, auth: state.auth, clusterUid: () => state.cluster.uid, store } as never,
      clusterSecret: 'secret-b',
      host: '127.0.0.1',
      port: 0,
    });
    node.start();
    await node.waitForLeader();
    stops.push(async () => {
      k.close();
      leases.close();
      await node.stop('test over');
      await app.close();
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
