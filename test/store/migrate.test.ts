import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import {
  exportFromDataDirs,
  exportFromEtcd,
  httpJsonCall,
  importIntoEtcd,
  importThroughApi,
  type LeaseExport,
} from '../../src/store/migrate.js';
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
  // Sequences: a strict one with values issued, and a deleted one (its tombstone keeps its mark).
  const oldIssued = await issueOld(leader);
  for (const n of raft.nodes) await n.stopGracefully();

  const exp = await exportFromDataDirs(raft.nodes.map((n) => n.dataDir));
  expectSequenceMarks(exp, oldIssued);
  await expect(
    importIntoEtcd({ ...exp, version: 1 } as unknown as LeaseExport, ['http://127.0.0.1:1']),
  ).rejects.toThrow(/version-1 export, which carries no sequences/);
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
  expect(again.refused).toEqual([
    'mig',
    expect.stringMatching(/^sequence "orders" \(already in etcd; old high-water \d+\)$/),
    'sequence "tiny" (already in etcd; old high-water 6)',
  ]);

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
  await expectAboveOld(active, oldIssued);
}, 120_000);

it('etcd back to the built-in store: export-etcd from a stopped installation, import-api into a Raft node; floors continue', async () => {
  const e = await EtcdCluster.start(1);
  const src = await FloeNodes.create(1, ['--store', 'etcd', '--etcd-endpoints', e.endpoints.join(',')]);
  const dst = await FloeNodes.create(1, []);
  try {
    src.nodes[0]!.start();
    const active = (await src.waitActive()).http;
    expect((await http(active, 'PUT', '/v1/apps/back/pool', { bits: 3 })).status).toBe(200);
    const bound = Date.now() + 60_000;
    const old: { workerId: number; token: number }[] = [];
    for (let i = 0; i < 4; i++) {
      const g = await http<{ workerId: number; token: number }>(
        active,
        'POST',
        '/v1/apps/back/workers/acquire',
        {
          nodeId: `h${i}`,
          boundMs: bound - i,
          layout: 'L',
        },
      );
      expect(g.status).toBe(200);
      old.push(g.body);
    }
    for (const g of old.slice(0, 2))
      await http(active, 'POST', `/v1/apps/back/workers/${g.workerId}/release`, {
        token: g.token,
        lastTimestampMs: bound,
      });
    const oldIssued = await issueOld(active);
    // Refused while a node is active: a mark could still rise after the read.
    await expect(exportFromEtcd(e.endpoints)).rejects.toThrow(/still active/);
    await src.nodes[0]!.stopGracefully(); // revokes its session: the active key goes

    const file = join(src.root, 'back.json');
    const script = (...args: string[]) =>
      execFileSync(
        process.execPath,
        ['--import', 'tsx', join(repoRoot, 'scripts/store-migrate.ts'), ...args],
        {
          cwd: repoRoot,
          stdio: 'pipe',
        },
      );
    writeFileSync(file, script('export-etcd', '--etcd-endpoints', e.endpoints.join(',')));
    const exp = JSON.parse(readFileSync(file, 'utf8')) as LeaseExport;
    const pool = exp.pools.find((p) => p.app === 'back')!;
    expect(pool).toMatchObject({ bits: 3, datacenterBits: 0, layout: 'L' });
    expect(pool.records).toHaveLength(4);
    expectSequenceMarks(exp, oldIssued);

    dst.nodes[0]!.start();
    const target = (await dst.waitActive()).http;
    script('import-api', '--target', `http://${target}`, file);
    // A second import leaves the app alone.
    expect((await importThroughApi(exp, httpJsonCall(`http://${target}`))).refused).toEqual([
      'back',
      expect.stringMatching(/^sequence "orders" \(already on the target; old high-water \d+\)$/),
      'sequence "tiny" (already on the target; old high-water 6)',
    ]);
    await expectAboveOld(target, oldIssued);
    // Every new holder of an old worker ID starts at or above its old mark; the layout pin came along.
    const marks = new Map(pool.records.map((r) => [r.workerId, r.highWaterMs]));
    for (let i = 0; i < 8; i++) {
      const g = await http<{ workerId: number; highWaterMs: number }>(
        target,
        'POST',
        '/v1/apps/back/workers/acquire',
        { nodeId: `new${i}`, layout: 'L' },
      );
      expect(g.status).toBe(200);
      expect(g.body.highWaterMs).toBeGreaterThanOrEqual(marks.get(g.body.workerId) ?? 0);
    }
    for (const w of old.map((g) => g.workerId)) expect(marks.get(w)!).toBeGreaterThanOrEqual(bound - 3);
    const other = await http(target, 'POST', '/v1/apps/back/workers/acquire', {
      nodeId: 'x',
      layout: 'other',
    });
    expect(other.status).toBe(409);
  } finally {
    await src.stop();
    src.cleanup();
    await dst.stop();
    dst.cleanup();
    e.stop();
  }
}, 120_000);

/** Values issued on the old store: INCRs of a strict sequence, and of one deleted afterwards. */
async function issueOld(node: string): Promise<{ orders: bigint; gone: bigint }> {
  const top = { orders: 0n, gone: 0n };
  for (const key of ['orders', 'gone'] as const) {
    const c = await http(node, 'POST', '/v1/sequences', { key, mode: 'strict', step: 10 });
    expect(c.status).toBe(201);
    for (let i = 0; i < 25; i++) {
      const r = await http<{ key: string; last: string }>(node, 'POST', `/v1/sequences/${key}/incr`, {});
      expect(r.status).toBe(200);
      expect(r.body.key).toBe(key);
      const v = BigInt(r.body.last);
      expect(v).toBeGreaterThan(top[key]);
      top[key] = v;
    }
  }
  expect((await http(node, 'DELETE', '/v1/sequences/gone')).status).toBe(200);
  // An exhausted one: its mark (6) is above its max (5), which START cannot express.
  expect((await http(node, 'POST', '/v1/sequences', { key: 'tiny', max: 5, step: 10 })).status).toBe(201);
  for (let i = 1; i <= 5; i++)
    expect((await http<{ last: string }>(node, 'POST', '/v1/sequences/tiny/incr', {})).body.last).toBe(
      String(i),
    );
  return top;
}

function expectSequenceMarks(exp: LeaseExport, issued: { orders: bigint; gone: bigint }): void {
  const orders = exp.sequences.find((q) => q.key === 'orders')!;
  expect(orders).toMatchObject({ mode: 'strict', step: 10, start: '1' });
  expect(BigInt(orders.highWater)).toBeGreaterThan(issued.orders);
  expect(exp.sequences.find((q) => q.key === 'gone')).toBeUndefined();
  const gone = exp.tombstones.find((t) => t.key === 'gone')!;
  expect(BigInt(gone.highWater)).toBeGreaterThan(issued.gone);
  expect(exp.sequences.find((q) => q.key === 'tiny')).toMatchObject({ max: '5', highWater: '6' });
}

/** On the new store: INCR of the carried sequence, and of the deleted one re-created from 1, are above the old. */
async function expectAboveOld(node: string, issued: { orders: bigint; gone: bigint }): Promise<void> {
  const info = await http<{ mode: string }>(node, 'GET', '/v1/sequences/orders');
  expect(info.status).toBe(200);
  expect(info.body.mode).toBe('strict');
  const again = await http(node, 'POST', '/v1/sequences', { key: 'gone', mode: 'strict', start: 1 });
  expect(again.status).toBe(201);
  for (const key of ['orders', 'gone'] as const) {
    const r = await http<{ key: string; first: string }>(node, 'POST', `/v1/sequences/${key}/incr`, {});
    expect(r.status).toBe(200);
    expect(r.body.key).toBe(key);
    expect(BigInt(r.body.first)).toBeGreaterThan(issued[key]);
  }
  const tiny = await http<{ error: string }>(node, 'POST', '/v1/sequences/tiny/incr', {});
  expect(tiny.body.error).toBe('exhausted');
}
