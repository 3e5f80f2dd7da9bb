import { afterAll, beforeAll, describe } from 'vitest';
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
});
