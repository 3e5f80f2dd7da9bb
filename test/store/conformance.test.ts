import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterNode } from '../cluster/harness.js';
import { httpLeaseApi, leaseStoreConformance } from './conformance.js';
import { EtcdCluster } from './etcd-cluster.js';
import { FloeNodes } from './floe-nodes.js';

// One suite, two stores: the same HTTP calls against `floe serve` (built-in Raft) and
// `floe serve --store etcd` with a real 3-member etcd 3.4. Needs `npm run build`.

describe('lease store conformance: built-in raft', () => {
  let f: FloeNodes;
  let active: ClusterNode;
  beforeAll(async () => {
    f = await FloeNodes.create(1, []);
    f.nodes[0]!.start();
    active = await f.waitActive();
  });
  afterAll(async () => {
    await f?.stop();
    f?.cleanup();
  });
  leaseStoreConformance(() => httpLeaseApi(() => `http://${active.http}`), 'raft');
});

describe('lease store conformance: etcd (3 members), through a standby', () => {
  let etcd: EtcdCluster;
  let f: FloeNodes;
  let standby: ClusterNode;
  beforeAll(async () => {
    etcd = await EtcdCluster.start(3);
    f = await FloeNodes.create(2, ['--store', 'etcd', '--etcd-endpoints', etcd.endpoints.join(',')]);
    f.nodes[0]!.start();
    await f.waitActive();
    // Calls go to the standby: it answers 307 to the active node, which fetch follows.
    standby = f.nodes[1]!;
    standby.start();
    await f.waitServingLeases(standby);
  }, 60_000);
  afterAll(async () => {
    try {
      await f?.stop();
      f?.cleanup();
    } finally {
      etcd?.stop();
    }
  });
  leaseStoreConformance(() => httpLeaseApi(() => `http://${standby.http}`), 'etcd');

  it('a Snowflake key created through one node is served by every node, each from its own worker ID', async () => {
    const viaStandby = httpLeaseApi(() => `http://${standby.http}`);
    const viaActive = httpLeaseApi(() => `http://${f.nodes[0]!.http}`);
    const key = 'conf-etcd-shared-key';
    const c = await viaStandby.snowflakeCreate({ key, layout: 'floe' });
    expect(c.ok, JSON.stringify(c)).toBe(true);
    // The key reaches the active node too (its watch, or the read before "no such key").
    const a = await viaActive.snowflakeNext(key, 200);
    const b = await viaStandby.snowflakeNext(key, 200);
    if (!a.ok || !b.ok) throw new Error(`next failed: ${JSON.stringify([a, b])}`);
    const all = [...(a.ids as string[]), ...(b.ids as string[])];
    expect(new Set(all).size).toBe(400);
    // Two holders of the key's pool: one worker ID per node.
    const holders = await viaActive.list(key);
    if (!holders.ok) throw new Error(JSON.stringify(holders));
    const leases = (holders as unknown as { leases?: { nodeId: string }[] }).leases ?? [];
    expect(new Set(leases.map((l) => l.nodeId)).size).toBe(2);
  });
});
