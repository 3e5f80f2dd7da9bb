// Disk faults and recovery with real node processes: a corrupted log segment, a follower that
// falls behind compaction, and membership change 3 → 5 → 3 under load.
import { once } from 'node:events';
import { closeSync, openSync, readdirSync, readFileSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Cluster, type ClusterView, http, until, waitForLeader } from './harness.js';
import { progress, Workload } from './workload.js';

let cluster: Cluster | undefined;

afterEach(async () => {
  await cluster?.stopAll();
  cluster?.cleanup();
  cluster = undefined;
});

async function view(c: Cluster, id: number): Promise<ClusterView | undefined> {
  const r = await http<ClusterView & { snapshotIndex: number }>(
    c.node(id).http,
    'GET',
    '/v1/cluster',
    undefined,
    1000,
  );
  return r.status === 200 ? r.body : undefined;
}

async function incr(c: Cluster, times: number): Promise<void> {
  const leader = await waitForLeader(c);
  for (let i = 0; i < times; i++) {
    const r = await http(c.node(leader).http, 'POST', '/v1/counters/c/incr', { by: 1 });
    expect(r.status).toBe(200);
  }
}

describe('durability (real processes)', () => {
  it('a corrupted log segment stops the node at start-up with an error naming the file and offset', async () => {
    cluster = await Cluster.create({ size: 1 });
    const node = cluster.nodes[0]!;
    node.start();
    await waitForLeader(cluster);
    await incr(cluster, 200);
    expect(await node.stopGracefully()).toBe(0);

    const walDir = join(node.dataDir, 'wal');
    const segment = readdirSync(walDir).find((f) => f.endsWith('.wal'))!;
    const path = join(walDir, segment);
    const size = statSync(path).size;
    // Flip a byte in the middle of the file: a record that is not the torn tail.
    const fd = openSync(path, 'r+');
    const at = Math.floor(size / 2);
    const byte = readFileSync(path)[at]!;
    writeSync(fd, Buffer.from([byte ^ 0xff]), 0, 1, at);
    closeSync(fd);

    node.start();
    const [code] = (await once(node.proc!, 'exit')) as [number];
    expect(code).not.toBe(0);
    const log = readFileSync(join(cluster.root, 'node-1.log'), 'utf8');
    expect(log).toContain(segment);
    expect(log).toMatch(/offset \d+/);
  });

  it('a follower that falls behind compaction catches up by receiving a snapshot', async () => {
    cluster = await Cluster.create({
      size: 3,
      extraArgs: ['--snapshot-every', '50', '--snapshot-trailing', '10'],
    });
    cluster.startAll();
    const leader = await waitForLeader(cluster);
    const lagging = cluster.nodes.find((n) => n.spec.id !== leader)!;
    await lagging.kill9();
    await incr(cluster, 300);
    const lv = (await view(cluster, leader)) as ClusterView & { snapshotIndex: number };
    expect(lv.snapshotIndex).toBeGreaterThan(100); // the log the follower needs is compacted away
    lagging.start();
    await until('the lagging follower to catch up', async () => {
      const v = await view(cluster!, lagging.spec.id);
      return v && v.applied >= lv.commit ? true : undefined;
    });
    const snap = (await view(cluster, lagging.spec.id)) as ClusterView & { snapshotIndex: number };
    expect(snap.snapshotIndex).toBeGreaterThan(0);
    const counter = await http<{ value: string }>(lagging.http, 'GET', '/v1/counters/c');
    expect(counter.body.value).toBe('300');
  }, 120_000);

  it('membership change 3 → 5 → 3 under load keeps every history linearizable', async () => {
    cluster = await Cluster.create({ size: 5, initialSize: 3 });
    cluster.startAll(3);
    await waitForLeader(cluster);
    const w = new Workload(cluster, 3, 31);
    w.start();
    await progress(w, 30);
    for (const id of [4, 5]) {
      const n = cluster.node(id);
      n.start();
      const leader = await waitForLeader(cluster);
      const r = await http<ClusterView>(
        cluster.node(leader).http,
        'POST',
        '/v1/members',
        {
          id,
          peerAddr: `127.0.0.1:${n.spec.advertisedPeerPort}`,
          httpAddr: n.http,
        },
        60_000,
      );
      expect(r.status).toBe(200);
      expect(r.body.members.find((m) => m.id === id)?.role).not.toBe('learner');
      await progress(w, 30);
    }
    const five = (await view(cluster, await waitForLeader(cluster)))!;
    expect(five.members.map((m) => m.id).sort()).toEqual([1, 2, 3, 4, 5]);

    // Back to 3: remove two of the original members, the leader among them if possible.
    const leader = await waitForLeader(cluster);
    const removals = [leader, ...[1, 2, 3].filter((x) => x !== leader)].slice(0, 2);
    for (const id of removals) {
      const current = await waitForLeader(cluster);
      const r = await http<ClusterView>(
        cluster.node(current).http,
        'DELETE',
        `/v1/members/${id}`,
        undefined,
        30_000,
      );
      expect(r.status).toBe(200);
      // A removed node stops by itself.
      await until(`removed node ${id} to exit`, async () => (cluster!.node(id).running ? undefined : true));
      await progress(w, 30);
    }
    const three = (await view(cluster, await waitForLeader(cluster)))!;
    expect(three.members.map((m) => m.id).sort()).toEqual(
      [1, 2, 3, 4, 5].filter((x) => !removals.includes(x)),
    );
    await w.stop();
    expect(w.verify()).toBeUndefined();
  }, 180_000);
});
