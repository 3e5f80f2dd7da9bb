// Regression tests for review 2 of the cluster identity (docs/findings/full-sim-findings.md, FS-19 review): each
// failed on ecca21b.
import { afterEach, describe, expect, it } from 'vitest';
import { leaseNodeOf } from '../lease/floe-node-adapter.js';
import type { LeaseService } from '../lease/lease-service.js';
import { NotLeaderError } from '../node/errors.js';
import type { FloeNode } from '../node/node.js';
import { httpJsonCall, importThroughApi } from '../store/migrate.js';
import { askMembersForClusterUid, ClusterIdentityKeeper } from './cluster-identity.js';
import type { FloeServices } from './floe-services.js';
import { startHttpAdmin } from './http-admin.js';
import { identityCluster, knownUid, oneAppExport } from './test-identity-cluster.js';
import { memorySingleNode } from './test-node.js';

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const s of stops.splice(0).reverse()) await s();
});

/** Cluster B's leader, knowing no UUID, whose member 3's recorded httpAddr is `addr`; returns the UUID it settles on. */
async function leaderOfB(addr: string, secret: string, memberId = 3): Promise<string> {
  const { node, state } = memorySingleNode();
  const view = {
    id: 1,
    status: () => ({
      conf: { voters: [1, memberId], learners: [] },
      members: [
        { id: 1, httpAddr: '127.0.0.1:1' },
        { id: memberId, httpAddr: addr },
      ],
    }),
  } as unknown as FloeNode<unknown>;
  const keeper = new ClusterIdentityKeeper({
    node: leaseNodeOf(node),
    state: state.cluster,
    askMembers: () => askMembersForClusterUid(view, 'http', undefined, secret, 500),
  });
  node.start();
  await node.waitForLeader();
  const uid = await knownUid(state);
  keeper.close();
  await node.stop('test over');
  return uid;
}

describe('review 2 of the cluster identity', () => {
  it('finding 1: a member address that reaches another cluster (another secret) does not give this cluster that UUID', async () => {
    const a = await identityCluster(stops);
    const aUid = await knownUid(a.state);
    expect(await leaderOfB(a.base, 'secret-b')).not.toBe(aUid);
  });

  it('finding 1: nor does a node of the same secret that is not the member asked for (its id differs)', async () => {
    const a = await identityCluster(stops); // node id 1
    const aUid = await knownUid(a.state);
    expect(await leaderOfB(a.base, 'secret-a', 3)).not.toBe(aUid);
  });

  it('finding 1: the member asked for, proving the UUID under this cluster’s secret, is adopted', async () => {
    // Node 1 of A answers as member 1 with a proof under A's secret: B here is A's own leader after a state loss.
    const a = await identityCluster(stops);
    const aUid = await knownUid(a.state);
    const { node, state } = memorySingleNode();
    const view = {
      id: 2,
      status: () => ({ conf: { voters: [1, 2], learners: [] }, members: [{ id: 1, httpAddr: a.base }] }),
    } as unknown as FloeNode<unknown>;
    const keeper = new ClusterIdentityKeeper({
      node: leaseNodeOf(node),
      state: state.cluster,
      askMembers: () => askMembersForClusterUid(view, 'http', undefined, 'secret-a', 500),
    });
    node.start();
    await node.waitForLeader();
    const uid = await knownUid(state);
    keeper.close();
    await node.stop('test over');
    expect(uid).toBe(aUid);
  });

  it('finding 2: a follower that does not know the UUID still redirects a lease call to the leader', async () => {
    // A follower of a new version under an older leader (which never mints): the lease service answers "not the
    // leader, it is node 1 at ...", which the client follows and checks there.
    const { node, state } = memorySingleNode();
    const leases = {
      acquire: async () => {
        throw new NotLeaderError(2, { id: 1, httpAddr: '127.0.0.1:7380' });
      },
    } as unknown as LeaseService;
    const app = await startHttpAdmin({
      node,
      kv: state.kv,
      services: { node, leases, auth: state.auth, clusterUid: () => undefined } as unknown as FloeServices,
      host: '127.0.0.1',
      port: 0,
    });
    stops.push(async () => {
      await app.close();
    });
    const res = await app.inject({
      method: 'POST',
      url: '/v1/apps/svc/workers/acquire',
      payload: { nodeId: 'h1', requestId: 'r1' },
    });
    expect(res.statusCode).toBe(307);
    expect(res.headers.location).toContain('127.0.0.1:7380');
  });

  it('finding 2: the leader that does not know the UUID yet answers lease calls 503 not_ready', async () => {
    const c = await identityCluster(stops, { keeper: false });
    const res = await c.app.inject({
      method: 'POST',
      url: '/v1/apps/svc/workers/acquire',
      payload: { nodeId: 'h1', requestId: 'r1' },
    });
    expect(res.statusCode).toBe(503);
    expect(res.json().error).toBe('not_ready');
  });

  it('finding 3: /readyz is not "ready" while lease calls answer 503 not_ready, and is once the UUID is known', async () => {
    const c = await identityCluster(stops, { keeper: false });
    const ready = await c.app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(503);
    expect(ready.json().clusterKnown).toBe(false);
    c.startKeeper();
    await knownUid(c.state);
    const after = await c.app.inject({ method: 'GET', url: '/readyz' });
    expect(after.statusCode).toBe(200);
    expect(after.json()).toMatchObject({ ready: true, clusterKnown: true });
  });

  it('finding 4: import-api into a fresh cluster waits for its UUID, then imports everything', async () => {
    const c = await identityCluster(stops, { keeper: false });
    const call = httpJsonCall(`http://${c.base}`);
    const lines: string[] = [];
    const running = importThroughApi(oneAppExport(), call, (l) => lines.push(l), { retryMs: 20 });
    // The keeper starts once the import is waiting (its first line), not after a guessed delay.
    while (lines.length === 0) await new Promise((r) => setImmediate(r));
    expect(lines[0]).toMatch(/cluster UUID/);
    c.startKeeper();
    const first = await running;
    expect(first).toMatchObject({ apps: 1, records: 1, refused: [] });
    const again = await importThroughApi(oneAppExport(), call);
    expect(again.refused).toEqual(['svc']);
  });

  it('finding 4: import-api into a cluster that never learns its UUID stops before changing anything, saying why', async () => {
    const c = await identityCluster(stops, { keeper: false });
    const call = httpJsonCall(`http://${c.base}`);
    await expect(
      importThroughApi(oneAppExport(), call, () => {}, { clusterWaitMs: 100, retryMs: 20 }),
    ).rejects.toThrow(/does not know its cluster UUID .* nothing was imported/);
    expect(c.state.leases.pool('svc')).toBeUndefined();
  });
});
