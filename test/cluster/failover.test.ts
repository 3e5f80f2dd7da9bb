// Real 3- and 5-node clusters as separate processes under write load: kill -9 and SIGSTOP faults,
// every history checked for linearizability and every acknowledged write for survival.
import { afterEach, describe, expect, it } from 'vitest';
import { Cluster, type ClusterView, http, until, waitForLeader } from './harness.js';
import { progress, Workload } from './workload.js';

let cluster: Cluster | undefined;

afterEach(async () => {
  await cluster?.stopAll();
  cluster?.cleanup();
  cluster = undefined;
});

/** Waits until every running node has applied at least `index`. */
async function converged(c: Cluster, index: number): Promise<void> {
  for (const n of c.nodes.filter((x) => x.running)) {
    await until(`node ${n.spec.id} applies ${index}`, async () => {
      const r = await http<ClusterView>(n.http, 'GET', '/v1/cluster', undefined, 1000);
      return r.status === 200 && r.body.applied >= index ? true : undefined;
    });
  }
}

async function leaderView(c: Cluster, id: number): Promise<ClusterView> {
  const r = await http<ClusterView>(c.node(id).http, 'GET', '/v1/cluster');
  return r.body;
}

describe('multi-process cluster (real processes on 127.0.0.1)', () => {
  it('3 nodes: kill -9 of the leader (3 times) and of a follower under load loses nothing acknowledged and stays linearizable', async () => {
    cluster = await Cluster.create({ size: 3 });
    cluster.startAll();
    await waitForLeader(cluster);
    const w = new Workload(cluster, 4, 7);
    w.start();
    await progress(w, 50);
    for (let round = 0; round < 3; round++) {
      const leader = await waitForLeader(cluster);
      await cluster.node(leader).kill9();
      const next = await waitForLeader(cluster);
      expect(next).not.toBe(leader);
      await progress(w, 30);
      cluster.node(leader).start(); // restart from its data dir
      await progress(w, 30);
    }
    const leader = await waitForLeader(cluster);
    const follower = cluster.nodes.find((n) => n.spec.id !== leader)!;
    await follower.kill9();
    await progress(w, 30);
    follower.start();
    await progress(w, 30);
    await w.stop();

    const final = await leaderView(cluster, await waitForLeader(cluster));
    await converged(cluster, final.commit);
    // Every acknowledged increment is visible: the counter is at least the highest acked value,
    // and every node agrees on it.
    const values = await Promise.all(
      cluster.nodes.map((n) => http<{ value: string }>(n.http, 'GET', '/v1/counters/c')),
    );
    // biome-ignore lint/complexity/useMathMinMax: bigints (Math.max throws on them)
    const maxAcked = w.stats.ackedIncrs.reduce((a, b) => (b > a ? b : a), 0n);
    for (const v of values) {
      expect(v.status).toBe(200);
      expect(BigInt(v.body.value)).toBeGreaterThanOrEqual(maxAcked);
      expect(v.body.value).toBe(values[0]!.body.value);
    }
    expect(w.stats.ok).toBeGreaterThan(200);
    expect(w.verify()).toBeUndefined();
    // Followers have asked the leader to publish their client addresses: every member is listed
    // with its HTTP address (for redirects, CLUSTER SLOTS replicas and sentinel replicas).
    await until('every member’s HTTP address in the replicated directory', async () => {
      const v = await http<ClusterView>(cluster!.nodes[0]!.http, 'GET', '/v1/cluster');
      const addrs = v.body.members?.map((m) => m.httpAddr);
      return addrs?.length === 3 && addrs.every((a, i) => a === cluster!.nodes[i]!.http) ? true : undefined;
    });
  }, 120_000);

  it('3 nodes: a leader stopped (SIGSTOP) past the election timeout steps down after SIGCONT; no split brain', async () => {
    cluster = await Cluster.create({ size: 3 });
    cluster.startAll();
    const old = await waitForLeader(cluster);
    const w = new Workload(cluster, 4, 11);
    w.start();
    await progress(w, 50);
    cluster.node(old).signal('SIGSTOP');
    const next = await until('a new leader among the others', async () => {
      const views = await Promise.all(
        cluster!.nodes
          .filter((n) => n.spec.id !== old)
          .map((n) => http<ClusterView>(n.http, 'GET', '/v1/cluster', undefined, 1000)),
      );
      const l = views.find((v) => v.status === 200 && v.body.role === 'leader');
      return l?.body.id;
    });
    expect(next).not.toBe(old);
    await progress(w, 50);
    cluster.node(old).signal('SIGCONT');
    // The old leader learns the higher term and follows the new leader.
    await until('the old leader to step down', async () => {
      const v = await http<ClusterView>(cluster!.node(old).http, 'GET', '/v1/cluster', undefined, 1000);
      return v.status === 200 && v.body.role !== 'leader' && v.body.leader !== old ? true : undefined;
    });
    await progress(w, 50);
    await w.stop();
    expect(w.verify()).toBeUndefined();
  }, 120_000);

  it('5 nodes: repeated leader kills under load stay linearizable', async () => {
    cluster = await Cluster.create({ size: 5 });
    cluster.startAll();
    await waitForLeader(cluster);
    const w = new Workload(cluster, 6, 13);
    w.start();
    await progress(w, 50);
    const killed: number[] = [];
    for (let round = 0; round < 2; round++) {
      const leader = await waitForLeader(cluster);
      await cluster.node(leader).kill9();
      killed.push(leader);
      await waitForLeader(cluster);
      await progress(w, 40);
    }
    for (const id of killed) cluster.node(id).start();
    await progress(w, 40);
    await w.stop();
    expect(w.verify()).toBeUndefined();
  }, 120_000);
});
