import { afterAll, expect, it } from 'vitest';
import { EtcdCluster } from './etcd-cluster.js';
import { FloeNodes } from './floe-nodes.js';

// Sequences on the etcd store: created and incremented over HTTP through any Floe node (307 to the active
// one); concurrent INCR clients keep going across a kill -9 of the active node; every value handed out is
// unique, and each client's values strictly increase. Needs `npm run build`.

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

async function call(eps: () => string[], method: string, path: string, body?: unknown) {
  let last: unknown;
  for (const ep of eps()) {
    try {
      const res = await fetch(`http://${ep}${path}`, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(5000),
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    } catch (err) {
      last = err;
    }
  }
  throw last ?? new Error('no node');
}

it('INCR on the etcd store: unique and increasing per client across a kill -9 of the active node', async () => {
  etcd = await EtcdCluster.start(3);
  floe = await FloeNodes.create(3, ['--store', 'etcd', '--etcd-endpoints', etcd.endpoints.join(',')]);
  for (const n of floe.nodes) n.start();
  await floe.waitActive();
  for (const n of floe.nodes) await floe.waitServingLeases(n);
  const f = floe;
  const eps = () => f.nodes.filter((n) => n.running).map((n) => n.http);
  const created = await call(eps, 'POST', '/v1/sequences', { key: 'orders', step: 50 });
  expect(created.status).toBe(201);
  const all: bigint[] = [];
  let nonIncreasing = 0;
  const errors = new Map<string, number>();
  const endAt = performance.now() + 16_000;
  const client = async () => {
    let prev = 0n;
    while (performance.now() < endAt) {
      try {
        const r = await call(eps, 'POST', '/v1/sequences/orders/incr', { count: 1 });
        if (r.status !== 200) {
          const k = `${r.status} ${String(r.json.error)}`;
          errors.set(k, (errors.get(k) ?? 0) + 1);
          await new Promise((res) => setTimeout(res, 100));
          continue;
        }
        const v = BigInt(r.json.last as string);
        if (v <= prev) nonIncreasing++;
        prev = v;
        all.push(v);
      } catch (err) {
        const k = (err as Error).message;
        errors.set(k, (errors.get(k) ?? 0) + 1);
        await new Promise((res) => setTimeout(res, 100));
      }
    }
  };
  const work = Promise.all(Array.from({ length: 4 }, client));
  await new Promise((r) => setTimeout(r, 4000));
  const old = (await f.active())!;
  await old.kill9();
  const next = await f.waitActive(30_000, old);
  await work;
  const unique = new Set(all.map(String)).size;
  console.log(
    `sequences on etcd: ${all.length} values, ${unique} unique, ${nonIncreasing} not increasing; node ${old.spec.id} killed, ` +
      `node ${next.spec.id} took over; ${[...errors].map(([k, v]) => `${k}: ${v}`).join('; ') || 'no errors'}`,
  );
  expect(unique).toBe(all.length);
  expect(nonIncreasing).toBe(0);
  expect(all.length).toBeGreaterThan(100);
  // After the failover the new active node hands out values above every earlier one.
  const after = await call(eps, 'POST', '/v1/sequences/orders/incr', { count: 1 });
  let highest = 0n;
  for (const v of all) if (v > highest) highest = v;
  expect(BigInt(after.json.last as string)).toBeGreaterThan(highest);
});
