import { afterAll, expect, it } from 'vitest';
import { FloeClient } from '../../src/client/index.js';
import { EtcdCluster } from './etcd-cluster.js';
import { FloeNodes } from './floe-nodes.js';

// The SDK on the etcd store: six embedded generators share a 4-ID pool (so worker IDs change hands), each
// generating in-process and releasing every ~2 s, while the active Floe node is killed with -9. Every ID
// any of them issued must be unique. Needs `npm run build`.

let etcd: EtcdCluster | undefined;
let floe: FloeNodes | undefined;
afterAll(async () => {
  try {
    await floe?.stop();
    floe?.cleanup();
  } finally {
    etcd?.stop();
  }
});

it('SDK holders on the etcd store: 0 duplicate IDs across a kill -9 of the active node', async () => {
  etcd = await EtcdCluster.start(3);
  floe = await FloeNodes.create(3, ['--store', 'etcd', '--etcd-endpoints', etcd.endpoints.join(',')]);
  for (const n of floe.nodes) n.start();
  await floe.waitActive();
  for (const n of floe.nodes) await floe.waitServingLeases(n);
  const f = floe;
  const eps = f.nodes.map((n) => n.http);
  const put = await fetch(`http://${eps[0]}/v1/apps/sdk/pool`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ bits: 2 }),
  });
  await put.text();
  const seen = new Set<bigint>();
  let duplicates = 0;
  let leases = 0;
  const errors = new Map<string, number>();
  const clients: FloeClient[] = [];
  /** The clients that got a lease: a result pins the cluster (4 worker IDs for 6 holders: some may get none). */
  const granted = new Set<FloeClient>();
  const endAt = performance.now() + 20_000;
  const holder = async (i: number) => {
    const client = new FloeClient({ endpoints: eps });
    clients.push(client);
    while (performance.now() < endAt) {
      let lease: Awaited<ReturnType<FloeClient['leaseWorker']>>;
      try {
        lease = await client.leaseWorker({ app: 'sdk', nodeId: `sdk-${i}`, ttlMs: 10_000 });
        leases++;
        granted.add(client);
      } catch (err) {
        const k = (err as Error).name;
        errors.set(k, (errors.get(k) ?? 0) + 1);
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      const ids = lease.snowflake('floe');
      const until = performance.now() + 1500 + Math.random() * 1000;
      try {
        while (performance.now() < Math.min(until, endAt)) {
          for (const id of ids.nextBatch(100)) {
            if (seen.has(id)) duplicates++;
            else seen.add(id);
          }
          await new Promise((r) => setTimeout(r, 10));
        }
        await lease.release().catch(() => {});
      } catch (err) {
        const k = `generate: ${(err as Error).name}`;
        errors.set(k, (errors.get(k) ?? 0) + 1);
      }
    }
    await client.close();
  };
  const work = Promise.all(Array.from({ length: 6 }, (_, i) => holder(i)));
  await new Promise((r) => setTimeout(r, 5000));
  const old = (await f.active())!;
  await old.kill9();
  const next = await f.waitActive(30_000, old);
  await work;
  console.log(
    `SDK on etcd: ${seen.size} IDs, ${duplicates} duplicates, ${leases} leases; node ${old.spec.id} killed, node ${next.spec.id} took over; ` +
      ([...errors].map(([k, v]) => `${k}: ${v}`).join('; ') || 'no errors'),
  );
  expect(duplicates).toBe(0);
  expect(seen.size).toBeGreaterThan(10_000);
  expect(leases).toBeGreaterThan(6);
  // The cluster's UUID lives in etcd with the leases: one for every node, the same after the active node's kill -9,
  // and the one every client pinned (docs/cluster-identity.md).
  const uids = await Promise.all(
    f.nodes
      .filter((n) => n !== old)
      .map(
        async (n) =>
          ((await (await fetch(`http://${n.http}/v1/cluster`)).json()) as { cluster: string | null }).cluster,
      ),
  );
  expect(new Set(uids).size).toBe(1);
  expect(uids[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  expect(granted.size).toBeGreaterThan(0);
  for (const c of granted) expect(c.clusterUid).toBe(uids[0]);
  // A client refused every time (pool exhausted) pinned nothing, or the same cluster.
  for (const c of clients) expect(c.clusterUid ?? uids[0]).toBe(uids[0]);
});
