// Network faults between real node processes, injected by a fault proxy in front of each node's
// peer listener (there is no tc netem here). Node i's peers dial proxy i, so proxy i controls
// everything node i hears from its peers.
import { afterEach, describe, expect, it } from 'vitest';
import { FaultProxy } from '../../src/testing/fault-proxy.js';
import { Cluster, type ClusterView, http, until, waitForLeader } from './harness.js';
import { progress, Workload } from './workload.js';

let cluster: Cluster | undefined;
let proxies: FaultProxy[] = [];

afterEach(async () => {
  await cluster?.stopAll();
  cluster?.cleanup();
  cluster = undefined;
  await Promise.all(proxies.map((p) => p.close()));
  proxies = [];
});

async function proxiedCluster(size: number): Promise<Cluster> {
  const c = await Cluster.create({ size });
  for (const n of c.nodes) {
    const p = await FaultProxy.start({ listen: '127.0.0.1:0', target: `127.0.0.1:${n.spec.peerPort}` });
    proxies.push(p);
    n.spec.advertisedPeerPort = p.port;
  }
  return c;
}

async function view(c: Cluster, id: number): Promise<ClusterView | undefined> {
  const r = await http<ClusterView>(c.node(id).http, 'GET', '/v1/cluster', undefined, 1000);
  return r.status === 200 ? r.body : undefined;
}

describe('network faults through a TCP proxy (real processes)', () => {
  it('a follower that can send but not hear (one-way partition) does not disrupt the leader (pre-vote)', async () => {
    cluster = await proxiedCluster(3);
    cluster.startAll();
    const leader = await waitForLeader(cluster);
    const before = (await view(cluster, leader))!;
    const follower = cluster.nodes.find((n) => n.spec.id !== leader)!;
    const w = new Workload(cluster, 3, 21);
    w.start();
    await progress(w, 30);
    proxies[follower.spec.id - 1]!.partition();
    // Wait for the cut-off follower to notice (it loses its leader), then keep the load going.
    await until('the cut-off follower to lose its leader', async () => {
      const v = await view(cluster!, follower.spec.id);
      return v && v.leader !== leader ? true : undefined;
    });
    await progress(w, 60);
    const during = (await view(cluster, leader))!;
    expect(during.role).toBe('leader');
    expect(during.term).toBe(before.term); // nobody's pre-vote succeeded: no term inflation
    proxies[follower.spec.id - 1]!.heal();
    await until('the follower to rejoin', async () => {
      const v = await view(cluster!, follower.spec.id);
      return v && v.leader === leader ? true : undefined;
    });
    await w.stop();
    expect(w.verify()).toBeUndefined();
  }, 120_000);

  it('a leader that cannot hear its followers steps down (check-quorum) and a new one serves', async () => {
    cluster = await proxiedCluster(3);
    cluster.startAll();
    const leader = await waitForLeader(cluster);
    const w = new Workload(cluster, 3, 23);
    w.start();
    await progress(w, 30);
    proxies[leader - 1]!.partition();
    const next = await until('a new leader', async () => {
      for (const n of cluster!.nodes) {
        if (n.spec.id === leader) continue;
        const v = await view(cluster!, n.spec.id);
        if (v?.role === 'leader') return v.id;
      }
      return undefined;
    }).catch(async (err) => {
      // Once seen in CI (stop 26, a niced sweep beside it) and not reproduced in 10 runs: say what each node saw.
      const views = await Promise.all(cluster!.nodes.map((n) => view(cluster!, n.spec.id)));
      const seen = views.map((v, i) =>
        v ? `n${v.id} ${v.role} term ${v.term} leader ${v.leader} commit ${v.commit}` : `n${i + 1} no answer`,
      );
      throw new Error(`${(err as Error).message} (old leader n${leader}; ${seen.join('; ')})`);
    });
    expect(next).not.toBe(leader);
    await until('the old leader to step down', async () => {
      const v = await view(cluster!, leader);
      return v && v.role !== 'leader' ? true : undefined;
    });
    await progress(w, 40);
    proxies[leader - 1]!.heal();
    await progress(w, 40);
    await w.stop();
    expect(w.verify()).toBeUndefined();
  }, 120_000);

  it('delayed and jittered peer links (30±20 ms) keep the cluster correct and live', async () => {
    cluster = await proxiedCluster(3);
    for (const p of proxies) p.setDelay(30, 20);
    cluster.startAll();
    await waitForLeader(cluster, 30_000);
    const w = new Workload(cluster, 4, 29);
    w.start();
    await progress(w, 150);
    await w.stop();
    expect(w.verify()).toBeUndefined();
  }, 120_000);
});
