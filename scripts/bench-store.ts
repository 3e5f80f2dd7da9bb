// npm run bench:store: worker-ID lease operations per second and their latency on the built-in store
// (a 3-node Floe Raft cluster) and on the etcd store (a 3-member etcd 3.4 and `floe serve --store etcd`),
// side by side, one run. Every call goes over HTTP to the node that serves it (Raft leader / active node).
// INCR: HTTP `POST /v1/sequences/<key>/incr` from the same number of clients on a strict sequence (step 1,000);
// on the etcd store the sequence state lives in etcd (src/store/etcd/etcd-state-node.ts).
import { randomUUID } from 'node:crypto';
import { Cluster, waitForLeader } from '../test/cluster/harness.js';
import { EtcdCluster } from '../test/store/etcd-cluster.js';
import { FloeNodes } from '../test/store/floe-nodes.js';

const DURATION_MS = Number(process.env.BENCH_STORE_MS ?? 10_000);
const CONCURRENCY = Number(process.env.BENCH_STORE_CONCURRENCY ?? 16);
type Op = 'acquire' | 'renew (raises)' | 'renew (no raise)' | 'release';
const OPS: Op[] = ['acquire', 'renew (raises)', 'renew (no raise)', 'release'];

async function post(base: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

interface Result {
  total: number;
  seconds: number;
  lat: Map<Op, number[]>;
  incr?: { perSecond: number; lat: number[] };
}

async function runIncr(base: string, key: string): Promise<{ perSecond: number; lat: number[] }> {
  const res = await fetch(`${base}/v1/sequences`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ key, step: 1000 }),
  });
  await res.text();
  const lat: number[] = [];
  const start = performance.now();
  const end = start + DURATION_MS / 2;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        await post(base, `/v1/sequences/${key}/incr`, { count: 1 });
        lat.push(performance.now() - t);
      }
    }),
  );
  return { perSecond: lat.length / ((performance.now() - start) / 1000), lat };
}

async function run(base: string, app: string): Promise<Result> {
  const lat = new Map<Op, number[]>(OPS.map((o) => [o, []]));
  const timed = async <T>(op: Op, fn: () => Promise<T>): Promise<T> => {
    const t = performance.now();
    const r = await fn();
    lat.get(op)!.push(performance.now() - t);
    return r;
  };
  await fetch(`${base}/v1/apps/${app}/pool`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ bits: 10 }),
  }).then((r) => r.text());
  const start = performance.now();
  const end = start + DURATION_MS;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_, i) => {
      while (performance.now() < end) {
        const g = await timed('acquire', () =>
          post(base, `/v1/apps/${app}/workers/acquire`, {
            nodeId: `bench-${i}`,
            requestId: randomUUID(),
            incarnation: `inc-${i}`,
            ttlMs: 30_000,
          }),
        );
        const w = `/v1/apps/${app}/workers/${g.workerId as number}`;
        const bound = Date.now() + 2000;
        await timed('renew (raises)', () => post(base, `${w}/renew`, { token: g.token, boundMs: bound }));
        for (let k = 0; k < 3; k++)
          await timed('renew (no raise)', () => post(base, `${w}/renew`, { token: g.token, boundMs: bound }));
        await timed('release', () => post(base, `${w}/release`, { token: g.token, lastTimestampMs: bound }));
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const total = [...lat.values()].reduce((a, l) => a + l.length, 0);
  return { total, seconds, lat };
}

function pct(xs: number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
}

async function main(): Promise<void> {
  console.log(
    `bench:store: ${CONCURRENCY} concurrent holders, ${DURATION_MS / 1000} s per store, HTTP to the serving node`,
  );
  const results: [string, Result][] = [];

  const raft = await Cluster.create({ size: 3 });
  try {
    raft.startAll();
    const leader = await waitForLeader(raft);
    const base = `http://${raft.node(leader).http}`;
    const r = await run(base, 'bench-raft');
    r.incr = await runIncr(base, 'bench-raft');
    results.push(['raft (3 Floe nodes)', r]);
  } finally {
    await raft.stopAll();
    raft.cleanup();
  }

  const etcd = await EtcdCluster.start(3);
  const floe = await FloeNodes.create(1, ['--store', 'etcd', '--etcd-endpoints', etcd.endpoints.join(',')]);
  try {
    floe.nodes[0]!.start();
    const active = await floe.waitActive();
    const base = `http://${active.http}`;
    const r = await run(base, 'bench-etcd');
    r.incr = await runIncr(base, 'bench-etcd');
    results.push(['etcd (3 members)', r]);
  } finally {
    await floe.stop();
    floe.cleanup();
    etcd.stop();
  }

  const rows: string[][] = [
    ['store', 'lease ops/s', ...OPS.map((o) => `${o} p50/p99 ms`), 'INCR/s', 'INCR p50/p99 ms'],
  ];
  for (const [name, r] of results) {
    rows.push([
      name,
      (r.total / r.seconds).toFixed(0),
      ...OPS.map((o) => {
        const l = r.lat.get(o)!;
        return `${pct(l, 50).toFixed(1)} / ${pct(l, 99).toFixed(1)}`;
      }),
      (r.incr?.perSecond ?? 0).toFixed(0),
      `${pct(r.incr?.lat ?? [], 50).toFixed(1)} / ${pct(r.incr?.lat ?? [], 99).toFixed(1)}`,
    ]);
  }
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  for (const r of rows) console.log(r.map((c, i) => c.padEnd(widths[i]!)).join('  '));
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
