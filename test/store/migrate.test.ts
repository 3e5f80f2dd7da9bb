import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { exportFromDataDirs, importIntoEtcd } from '../../src/store/migrate.js';
import { Cluster, http, repoRoot, waitForLeader } from '../cluster/harness.js';
import { EtcdCluster } from './etcd-cluster.js';
import { FloeNodes } from './floe-nodes.js';

// Built-in store → etcd: leases taken on a 3-node Floe cluster, members stopped, exported from their
// data directories, imported into a real 3-member etcd; the etcd store then grants above every old
// mark and token. Needs `npm run build`.

let raft: Cluster | undefined;
let etcd: EtcdCluster | undefined;
let floe: FloeNodes | undefined;
afterAll(async () => {
  try {
    await raft?.stopAll();
    raft?.cleanup();
    await floe?.stop();
    floe?.cleanup();
  } finally {
    etcd?.stop();
  }
});

it('export from stopped members, import into etcd: floors and tokens continue, a second import is refused', async () => {
  raft = await Cluster.create({ size: 3 });
  raft.startAll();
  const leader = raft.node(await waitForLeader(raft)).http;
  await http(leader, 'PUT', '/v1/apps/mig/pool', { bits: 2 });
  const bound = Date.now() + 60_000;
  const old: { workerId: number; token: number }[] = [];
  for (let i = 0; i < 4; i++) {
    const g = await http<{ workerId: number; token: number }>(
      leader,
      'POST',
      '/v1/apps/mig/workers/acquire',
      {
        nodeId: `h${i}`,
        boundMs: bound - i,
        layout: 'L',
      },
    );
    expect(g.status).toBe(200);
    old.push(g.body);
  }
  // Two released (with a last timestamp), two left live: the import frees them, keeping their marks.
  for (const g of old.slice(0, 2))
    await http(leader, 'POST', `/v1/apps/mig/workers/${g.workerId}/release`, {
      token: g.token,
      lastTimestampMs: bound,
    });
  for (const n of raft.nodes) await n.stopGracefully();

  const exp = await exportFromDataDirs(raft.nodes.map((n) => n.dataDir));
  const pool = exp.pools.find((p) => p.app === 'mig')!;
  expect(pool).toMatchObject({ bits: 2, layout: 'L' });
  expect(pool.records).toHaveLength(4);
  const file = join(raft.root, 'leases.json');
  writeFileSync(file, JSON.stringify(exp));

  etcd = await EtcdCluster.start(3);
  // Through the script, as an operator would run it.
  execFileSync(
    process.execPath,
    [
      '--import',
      'tsx',
      join(repoRoot, 'scripts/store-migrate.ts'),
      'import',
      '--etcd-endpoints',
      etcd.endpoints.join(','),
      file,
    ],
    { cwd: repoRoot, stdio: 'pipe' },
  );
  const again = await importIntoEtcd(exp, etcd.endpoints);
  expect(again.refused).toEqual(['mig']);

  floe = await FloeNodes.create(1, ['--store', 'etcd', '--etcd-endpoints', etcd.endpoints.join(',')]);
  floe.nodes[0]!.start();
  const active = (await floe.waitActive()).http;
  const maxOldToken = Math.max(...old.map((g) => g.token));
  for (let i = 0; i < 4; i++) {
    const g = await http<{ workerId: number; token: number; highWaterMs: number; layout: string }>(
      active,
      'POST',
      '/v1/apps/mig/workers/acquire',
      { nodeId: `new${i}`, layout: 'L' },
    );
    expect(g.status).toBe(200);
    expect(g.body.token).toBeGreaterThan(maxOldToken);
    expect(g.body.highWaterMs).toBeGreaterThanOrEqual(bound - 3);
  }
  const other = await http(active, 'POST', '/v1/apps/mig/workers/acquire', { nodeId: 'x', layout: 'other' });
  expect(other.status).toBe(409);
});
