// npm run bench:store: worker-ID lease operations per second and their latency on the built-in store
// (a 3-node Floe Raft cluster) and on the etcd store (a 3-member etcd 3.4 and `floe serve --store etcd`),
// side by side, one run. Every call goes over HTTP to the node that serves it (Raft leader / active node).
// INCR: HTTP `POST /v1/sequences/<key>/incr` from the same number of clients on a strict sequence (step 1,000);
// on the etcd store the sequence state lives in etcd (src/store/etcd/etcd-state-node.ts).
// Peer (measured on the same etcd): an INCR done with the etcd3 client alone, the way an application without Floe
// would (read the counter, then a transaction that writes value + 1 if its mod revision is unchanged; retry on a lost
// compare), from the same number of clients. Then the ratios: etcd store / built-in store, and Floe's INCR on etcd /
// the peer's.
// BENCH_STORE_MS (default 10,000: lease ops run that long, INCR half), BENCH_STORE_CONCURRENCY (default 16).
import { randomUUID } from 'node:crypto';
import { Etcd3 } from 'etcd3';
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

/** The peer: INCR of one etcd key by compare-and-swap from CONCURRENCY clients (etcd3 over gRPC, no Floe). */
async function runEtcdCasIncr(
  endpoints: string[],
): Promise<{ perSecond: number; lat: number[]; conflicts: number; value: bigint }> {
  const client = new Etcd3({
    hosts: endpoints,
    defaultCallOptions: () => ({ deadline: Date.now() + 10_000 }),
  });
  const key = 'bench-store-peer/counter';
  try {
    await client.put(key).value('0');
    const lat: number[] = [];
    let conflicts = 0;
    const start = performance.now();
    const end = start + DURATION_MS / 2;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (performance.now() < end) {
          const t = performance.now();
          for (;;) {
            const kv = (await client.get(key).exec()).kvs[0];
            if (!kv) throw new Error(`${key} vanished`);
            const next = BigInt(kv.value.toString()) + 1n;
            const r = await client
              .if(key, 'Mod', '==', kv.mod_revision)
              .then(client.put(key).value(String(next)))
              .commit();
            if (r.succeeded) break;
            conflicts++;
          }
          lat.push(performance.now() - t);
        }
      }),
    );
    const perSecond = lat.length / ((performance.now() - start) / 1000);
    // Every acknowledged increment is in the counter exactly once (a check that the peer did what it says).
    const value = BigInt(((await client.get(key).string()) as string | null) ?? '0');
    if (value !== BigInt(lat.length))
      throw new Error(`peer counter is ${value}, expected ${lat.length} acknowledged increments`);
    await client.delete().key(key);
    return { perSecond, lat, conflicts, value };
  } finally {
    client.close();
  }
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

  let peer: Awaited<ReturnType<typeof runEtcdCasIncr>> | undefined;
  const etcd = await EtcdCluster.start(3);
  const floe = await FloeNodes.create(1, ['--store', 'etcd', '--etcd-endpoints', etcd.endpoints.join(',')]);
  try {
    floe.nodes[0]!.start();
    const active = await floe.waitActive();
    const base = `http://${active.http}`;
    const r = await run(base, 'bench-etcd');
    r.incr = await runIncr(base, 'bench-etcd');
    results.push(['etcd (3 members)', r]);
    // The peer on the same etcd, with the Floe node stopped (it would keep its session alive meanwhile).
    await floe.stop();
    peer = await runEtcdCasIncr(etcd.endpoints);
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
  const raftR = results[0]![1];
  const etcdR = results[1]![1];
  const ops = (r: Result) => r.total / r.seconds;
  if (peer)
    console.log(
      `peer (measured, same etcd, no Floe): etcd3 client INCR by compare-and-swap on one key, ${CONCURRENCY} clients: ` +
        `${peer.perSecond.toFixed(0)} INCR/s, p50/p99 ${pct(peer.lat, 50).toFixed(1)} / ${pct(peer.lat, 99).toFixed(1)} ms, ` +
        `${peer.conflicts} lost compares retried; counter ${peer.value} = acknowledged increments`,
    );
  console.log(
    `ratio etcd store / built-in store: lease ops/s ${(ops(etcdR) / ops(raftR)).toFixed(2)}x, ` +
      `INCR/s ${((etcdR.incr?.perSecond ?? 0) / (raftR.incr?.perSecond ?? 1)).toFixed(2)}x`,
  );
  if (peer)
    console.log(
      `ratio Floe INCR on etcd / peer: ${((etcdR.incr?.perSecond ?? 0) / peer.perSecond).toFixed(2)}x INCR/s, ` +
        `p99 ${(pct(etcdR.incr?.lat ?? [], 99) / pct(peer.lat, 99)).toFixed(2)}x ` +
        '(Floe writes one segment of >= 1,000 values per etcd write and serves INCR from it, over HTTP)',
    );
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
