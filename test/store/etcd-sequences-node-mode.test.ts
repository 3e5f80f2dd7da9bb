import { Redis } from 'ioredis';
import { afterAll, expect, it } from 'vitest';
import { EtcdCluster } from './etcd-cluster.js';
import { FloeNodes } from './floe-nodes.js';

// Node-mode sequences on the etcd store, against a real etcd and real Floe processes (docs/etcd-store.md,
// "Sequences"): only the active node serves them. A standby's own segments would come through its own Raft log,
// which etcd never sees, so it answers MOVED to the active node instead of a value (HTTP: 307). INCR clients that
// follow MOVED keep going across a kill -9 of the active node, and every value handed out is unique.
// Needs `npm run build`.

let etcd: EtcdCluster | undefined;
let floe: FloeNodes | undefined;
const conns: Redis[] = [];
afterAll(async () => {
  for (const c of conns) c.disconnect();
  try {
    await floe?.stop();
    floe?.cleanup();
  } finally {
    etcd?.stop();
  }
});

/** One plain (non-cluster) connection: no retries of its own, so every error reaches the test. */
function connect(port: number): Redis {
  const c = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
    commandTimeout: 5000,
  });
  // Errors reach the caller's command; the event would only be logged.
  c.on('error', () => {});
  conns.push(c);
  return c;
}

it('node-mode INCR on the etcd store: standbys answer MOVED, values unique across a kill -9 of the active node', async () => {
  etcd = await EtcdCluster.start(3);
  floe = await FloeNodes.create(3, ['--store', 'etcd', '--etcd-endpoints', etcd.endpoints.join(',')]);
  const f = floe;
  for (const n of f.nodes) n.start();
  const active = await f.waitActive();
  for (const n of f.nodes) await f.waitServingLeases(n);
  const admin = connect(active.spec.respPort);
  await admin.connect();
  expect(await admin.call('SEQ.CREATE', 'orders', 'MODE', 'node', 'STEP', '50')).toEqual(
    expect.arrayContaining(['created', 1]),
  );

  // A standby never answers a value of its own.
  for (const n of f.nodes.filter((x) => x !== active)) {
    const c = connect(n.spec.respPort);
    await c.connect();
    await expect(c.call('INCR', 'orders')).rejects.toThrow(
      new RegExp(`^MOVED \\d+ 127\\.0\\.0\\.1:${active.spec.respPort}$`),
    );
    const h = await fetch(`http://${n.http}/v1/sequences/orders/incr`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"count":1}',
      redirect: 'manual',
    });
    expect(h.status).toBe(307);
  }

  const ports = () => f.nodes.filter((n) => n.running).map((n) => n.spec.respPort);
  const all: bigint[] = [];
  const errors = new Map<string, number>();
  const count = (k: string) => errors.set(k, (errors.get(k) ?? 0) + 1);
  const endAt = performance.now() + 14_000;
  // A client as a Redis cluster client behaves: follow MOVED, and after a connection error ask another node.
  const client = async (i: number) => {
    const byPort = new Map<number, Redis>();
    let port = ports()[i % ports().length]!;
    while (performance.now() < endAt) {
      let c = byPort.get(port);
      try {
        if (!c) {
          c = connect(port);
          byPort.set(port, c);
          await c.connect();
        }
        all.push(BigInt((await c.call('INCR', 'orders')) as number));
      } catch (err) {
        const msg = (err as Error).message;
        const moved = /^MOVED \d+ [\d.]+:(\d+)$/.exec(msg);
        if (moved) {
          port = Number(moved[1]);
          continue;
        }
        count(msg.split(':')[0]!.slice(0, 40));
        c?.disconnect();
        byPort.delete(port);
        const live = ports();
        port = live[Math.floor(Math.random() * live.length)]!;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  };
  const work = Promise.all(Array.from({ length: 4 }, (_, i) => client(i)));
  await new Promise((r) => setTimeout(r, 4000));
  const before = all.length;
  await active.kill9();
  const next = await f.waitActive(30_000, active);
  await work;
  const unique = new Set(all.map(String)).size;
  console.log(
    `node-mode on etcd: ${all.length} values (${before} before the kill), ${unique} unique; node ${active.spec.id} killed, ` +
      `node ${next.spec.id} took over; ${[...errors].map(([k, v]) => `${k}: ${v}`).join('; ') || 'no errors'}`,
  );
  expect(unique).toBe(all.length);
  expect(before).toBeGreaterThan(50);
  expect(all.length - before).toBeGreaterThan(50);
}, 120_000);
