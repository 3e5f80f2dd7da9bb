// Worker-ID leases on a real 3-node cluster survive the loss of the leader (kill -9) and a leader
// paused past the election timeout (SIGSTOP … SIGCONT): a newly elected leader gives every existing
// lease a full TTL, so no lease that its holder keeps renewing is ever reclaimed.
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { type Cluster, type ClusterView, http, until } from './harness.js';
import { leaderKnownEverywhere, record, startCluster } from './lease-cluster.js';
import { LeaseKeeper } from './lease-keeper.js';

const TTL_MS = 3000;
const LEASES = 24;

let cluster: Cluster | undefined;
let keeper: LeaseKeeper | undefined;

afterEach(async () => {
  await keeper?.stop();
  keeper = undefined;
  await cluster?.stopAll();
  cluster?.cleanup();
  cluster = undefined;
});

interface ListedLease {
  workerId: number;
  token: number;
  nodeId: string;
}

/** Checks, on the current leader, that every kept lease is listed with its token and renews with it. */
async function expectEveryLeaseKept(c: Cluster, k: LeaseKeeper, leader: number): Promise<void> {
  const node = c.node(leader);
  const list = await http<{ leases: ListedLease[] }>(node.http, 'GET', `/v1/apps/${k.app}/workers`);
  expect(list.status).toBe(200);
  const byWorker = new Map(list.body.leases.map((l) => [l.workerId, l]));
  for (const l of k.leases) {
    expect(byWorker.get(l.workerId), `worker ${l.workerId}`).toMatchObject({
      token: l.token,
      nodeId: l.nodeId,
    });
  }
  expect(list.body.leases).toHaveLength(k.leases.length);
  // The same over RESP on the new leader, and a renewal with each original token succeeds.
  const r = new Redis({ port: node.spec.respPort, host: '127.0.0.1', maxRetriesPerRequest: 1 });
  try {
    const listed = ((await r.call('WORKER.LIST', k.app)) as unknown[]).map(record);
    expect(new Map(listed.map((l) => [Number(l.worker_id), Number(l.token)]))).toEqual(
      new Map(k.leases.map((l) => [l.workerId, l.token])),
    );
    const renewed = await Promise.all(
      k.leases.map(async (l) =>
        record(await r.call('WORKER.RENEW', k.app, String(l.workerId), String(l.token))),
      ),
    );
    for (const [i, x] of renewed.entries()) expect(x.token).toBe(String(k.leases[i]!.token));
  } finally {
    r.disconnect();
  }
}

describe('leases across leader failure (3 real node processes)', () => {
  it('kill -9 of the leader: every renewed lease keeps its worker ID and token on the new leader', async () => {
    const started = await startCluster(3);
    cluster = started.cluster;
    const old = started.leader;
    keeper = new LeaseKeeper(cluster, 'kill9', TTL_MS);
    await keeper.acquire(LEASES);
    keeper.start();
    // Renewed past one TTL: the grants' own timestamps are now older than a TTL, so a new leader
    // that seeded deadlines from replicated times instead of "now" would reclaim them all.
    await keeper.renewedAgain(4);

    await cluster.node(old).kill9();
    const next = await leaderKnownEverywhere(cluster);
    expect(next).not.toBe(old);
    // More than a TTL of renewals through the new leader.
    await keeper.renewedAgain(4);
    expect(keeper.lost).toEqual([]);
    await expectEveryLeaseKept(cluster, keeper, next);

    // The new leader does enforce deadlines: a holder that stops renewing loses its lease.
    const gone = keeper.abandon(0);
    await until(
      'the new leader to reclaim the abandoned lease',
      async () => {
        const r = await http<{ leases: ListedLease[] }>(
          cluster!.node(next).http,
          'GET',
          '/v1/apps/kill9/workers',
        );
        return r.status === 200 && !r.body.leases.some((l) => l.workerId === gone.workerId)
          ? true
          : undefined;
      },
      15_000,
      100,
    );

    // The old leader comes back from its data dir as a follower; nothing changes.
    cluster.node(old).start();
    await until('the restarted node to follow the new leader', async () => {
      const v = await http<ClusterView>(cluster!.node(old).http, 'GET', '/v1/cluster', undefined, 1000);
      return v.status === 200 && v.body.role === 'follower' && v.body.leader !== 0 ? true : undefined;
    });
    await keeper.renewedAgain(2);
    await keeper.stop();
    expect(keeper.lost).toEqual([]);
    await expectEveryLeaseKept(cluster, keeper, await leaderKnownEverywhere(cluster));
  });

  it('leader SIGSTOP past the election timeout, then SIGCONT: no lease is reclaimed by either leader', async () => {
    const started = await startCluster(3);
    cluster = started.cluster;
    const old = started.leader;
    keeper = new LeaseKeeper(cluster, 'sigstop', TTL_MS);
    await keeper.acquire(LEASES);
    keeper.start();
    await keeper.renewedAgain(4);

    keeper.avoid.add(old);
    cluster.node(old).signal('SIGSTOP');
    // A new leader among the other two means the pause outlasted the election timeout.
    const paused = new Set([old]);
    const next = await leaderKnownEverywhere(cluster, 20_000, paused);
    expect(next).not.toBe(old);
    // The paused leader's deadlines all pass while it sleeps (its monotonic clock keeps running).
    await keeper.renewedAgain(4);
    expect(keeper.lost).toEqual([]);

    cluster.node(old).signal('SIGCONT');
    await until('the resumed old leader to step down', async () => {
      const v = await http<ClusterView>(cluster!.node(old).http, 'GET', '/v1/cluster', undefined, 1000);
      return v.status === 200 && v.body.role !== 'leader' ? true : undefined;
    });
    keeper.avoid.delete(old);
    // Renewals keep flowing through all three nodes, the resumed one included.
    await keeper.renewedAgain(4);
    await keeper.stop();
    expect(keeper.lost).toEqual([]);
    const leader = await leaderKnownEverywhere(cluster);
    expect(leader).not.toBe(old);
    await expectEveryLeaseKept(cluster, keeper, leader);
  });
});
