// Regression tests for adversarial review 3 of the cluster identity (written by the reviewer against 47217a5, where
// each failed).
import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { leaseNodeOf } from '../lease/floe-node-adapter.js';
import { LeaseService } from '../lease/lease-service.js';
import type { FloeNode } from '../node/node.js';
import { allocProof, httpRemoteAlloc, REMOTE_ALLOC_PATH } from '../sequences/remote-alloc.js';
import { buildCreate, encodeSequenceCommand, type SequenceResult } from '../state/sequences/index.js';
import { httpJsonCall, importThroughApi, type LeaseExport } from '../store/migrate.js';
import { ClusterIdentityKeeper } from './cluster-identity.js';
import { startHttpAdmin } from './http-admin.js';
import { memorySingleNode } from './test-node.js';

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const s of stops.splice(0).reverse()) await s();
});

const SECRET = 'secret-a';

/** A one-node cluster with the real HTTP API; `keeper: false` plays the window before its UUID is applied. */
async function cluster(keeper = true, wrap?: (n: FloeNode<unknown>) => FloeNode<unknown>) {
  const { node, state } = memorySingleNode();
  const leases = new LeaseService({ node: leaseNodeOf(node), state: state.leases });
  const k = keeper ? new ClusterIdentityKeeper({ node: leaseNodeOf(node), state: state.cluster }) : undefined;
  const served = wrap ? wrap(node) : node;
  const app = await startHttpAdmin({
    node: served,
    kv: state.kv,
    services: { node: served, leases, auth: state.auth, clusterUid: () => state.cluster.uid },
    clusterSecret: SECRET,
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

function known(state: ReturnType<typeof memorySingleNode>['state']): Promise<string> {
  return new Promise((resolve) => {
    if (state.cluster.uid !== undefined) resolve(state.cluster.uid);
    else state.cluster.onKnown(resolve);
  });
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  stops.push(() => new Promise<void>((r) => server.close(() => r())));
  const a = server.address();
  if (!a || typeof a === 'string') throw new Error('no address');
  return `127.0.0.1:${a.port}`;
}

const exported = () =>
  ({
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
  }) as unknown as LeaseExport;

describe('review 3 of the cluster identity', () => {
  it('import-api: a target follower whose leader address now reaches another cluster does not import into that cluster', async () => {
    // Cluster B (a real node, its own UUID) sits at the address the target's follower still names as its leader.
    const b = await cluster();
    await known(b.state);
    // The target: a follower of cluster A that knows A's UUID and redirects every write to its (stale) leader hint.
    const aUid = '11111111-2222-4333-8444-555555555555';
    const target = createServer((req, res) => {
      res.setHeader('floe-cluster', aUid);
      if (req.method === 'GET' && req.url === '/v1/cluster') {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ id: 2, cluster: aUid, role: 'follower', leader: 1 }));
        return;
      }
      res.statusCode = 307;
      res.setHeader('location', `http://${b.base}${req.url}`);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ error: 'not_leader', leader: { id: 1, httpAddr: b.base } }));
    });
    const aBase = await listen(target);
    const outcome = await importThroughApi(exported(), httpJsonCall(`http://${aBase}`), () => {}, {
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
    const c = await cluster(false);
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
    const c = await cluster(false);
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
    const c = await cluster(false, (n) => {
      return new Proxy(n, {
        get(t, p, r) {
          if (p === 'isLeader') return false;
          if (p === 'status') return () => ({ ...t.status(), lead: 9, role: 'follower' });
          const v = Reflect.get(t, p, r);
          return typeof v === 'function' ? v.bind(t) : v;
        },
      });
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
    const c = await cluster();
    const uid = await known(c.state);
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
});
