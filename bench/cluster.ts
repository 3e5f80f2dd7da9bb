// npm run bench:cluster [-- --seconds 5 --kills 20 --skip-etcd]
//
// One run, side by side on loopback: a 3-node Floe cluster (fsync on) and a 3-member etcd 3.4
// cluster, each driven by the same number of concurrent clients writing 64-byte values
// (Floe: HTTP PUT /v1/kv/:key; etcd: put through the etcd3 client). Prints writes/s and p50/p99
// latency for 1 and 32 clients, the Floe/etcd ratios, then Floe's failover time: kill -9 of the
// leader → first write accepted by the new leader, median of N kills.
import { Agent, request } from 'node:http';
import { parseArgs } from 'node:util';
import { Etcd3 } from 'etcd3';
import { parseHostPort } from '../src/net/host-port.js';
import { Cluster, type ClusterView, http, until, waitForLeader } from '../test/cluster/harness.js';
import { startEtcd, stopEtcd } from './etcd-cluster.js';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    kills: { type: 'string', default: '20' },
    'skip-etcd': { type: 'boolean', default: false },
  },
});
const SECONDS = Number(args.seconds);
const KILLS = Number(args.kills);
const VALUE = 'x'.repeat(64);

interface Result {
  writes: number;
  perSecond: number;
  p50: number;
  p99: number;
  errors: number;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function drive(
  clients: number,
  seconds: number,
  write: (client: number, n: number) => Promise<boolean>,
): Promise<Result> {
  const latencies: number[] = [];
  let errors = 0;
  const end = performance.now() + seconds * 1000;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async (_, c) => {
      let n = 0;
      while (performance.now() < end) {
        const t0 = performance.now();
        const ok = await write(c, n++);
        if (ok) latencies.push(performance.now() - t0);
        else errors++;
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    writes: latencies.length,
    perSecond: latencies.length / elapsed,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    errors,
  };
}

function fmt(r: Result): string {
  return `${r.perSecond.toFixed(0).padStart(7)} writes/s  p50 ${r.p50.toFixed(2).padStart(7)} ms  p99 ${r.p99.toFixed(2).padStart(7)} ms  (${r.writes} writes, ${r.errors} errors)`;
}

// Floe's client: keep-alive node:http (undici's fetch costs more CPU per call than the
// whole server side; etcd3 likewise keeps its gRPC connections open).
const agent = new Agent({ keepAlive: true, maxSockets: 64 });
function floePut(addr: string, key: string): Promise<boolean> {
  const { host, port } = parseHostPort(addr, 'leader address');
  const body = JSON.stringify({ value: VALUE });
  return new Promise((resolve) => {
    const req = request(
      {
        host,
        port,
        method: 'PUT',
        path: `/v1/kv/${key}`,
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        timeout: 5000,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode === 200));
      },
    );
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
    req.end(body);
  });
}

// ---- etcd -------------------------------------------------------------------------------------

// ---- main -------------------------------------------------------------------------------------

async function main(): Promise<void> {
  console.log(`bench:cluster — ${SECONDS}s per measurement, 64-byte values, loopback, fsync on`);
  const floe = await Cluster.create({ size: 3, extraArgs: ['--log-level', 'warn'] });
  floe.startAll();
  const results: Record<string, Result> = {};
  try {
    const leader = await waitForLeader(floe);
    const addr = floe.node(leader).http;
    for (const clients of [1, 32]) {
      // warm-up
      await drive(clients, 1, (c, n) => floePut(addr, `w${c}-${n % 64}`));
      results[`floe-${clients}`] = await drive(clients, SECONDS, (c, n) => floePut(addr, `k${c}-${n % 64}`));
      console.log(`floe ${String(clients).padStart(2)} clients: ${fmt(results[`floe-${clients}`]!)}`);
    }

    if (!args['skip-etcd']) {
      const etcd = await startEtcd();
      try {
        const clients = Array.from(
          { length: 32 },
          () =>
            new Etcd3({
              hosts: etcd.urls,
              defaultCallOptions: () => ({ deadline: new Date(Date.now() + 5000) }),
            }),
        );
        for (const n of [1, 32]) {
          const put = async (c: number, i: number) => {
            try {
              await clients[c]!.put(`k${c}-${i % 64}`).value(VALUE);
              return true;
            } catch {
              return false;
            }
          };
          await drive(n, 1, put);
          results[`etcd-${n}`] = await drive(n, SECONDS, put);
          console.log(`etcd ${String(n).padStart(2)} clients: ${fmt(results[`etcd-${n}`]!)}`);
        }
        for (const c of clients) c.close();
      } finally {
        await stopEtcd(etcd);
      }
      for (const n of [1, 32]) {
        const f = results[`floe-${n}`]!;
        const e = results[`etcd-${n}`]!;
        console.log(
          `ratio floe/etcd ${String(n).padStart(2)} clients: writes/s ${(f.perSecond / e.perSecond).toFixed(2)}x (target >= 2x at 32), p99 ${(f.p99 / e.p99).toFixed(2)}x (target < 1)`,
        );
      }
    }

    // ---- failover ----
    const times: number[] = [];
    for (let k = 0; k < KILLS; k++) {
      const old = await waitForLeader(floe);
      const others = floe.nodes.filter((n) => n.spec.id !== old);
      const killedAt = performance.now();
      await floe.node(old).kill9();
      // write to every surviving node until one accepts (307 redirects followed to the new leader)
      let accepted = false;
      while (!accepted) {
        const rs = await Promise.all(
          others.map((n) => http(n.http, 'PUT', `/v1/kv/failover`, { value: String(k) }, 500)),
        );
        accepted = rs.some((r) => r.status === 200);
      }
      times.push(performance.now() - killedAt);
      floe.node(old).start();
      // the restarted node must know the leader again before the next kill
      const next = await waitForLeader(floe);
      await until('the restarted node to rejoin', async () => {
        const v = await http<ClusterView>(floe.node(old).http, 'GET', '/v1/cluster', undefined, 500);
        return v.status === 200 && v.body.leader === next ? true : undefined;
      });
    }
    times.sort((a, b) => a - b);
    const median = percentile(times, 50);
    console.log(
      `failover (kill -9 leader → first accepted write), ${KILLS} kills: median ${median.toFixed(0)} ms, min ${times[0]?.toFixed(0)} ms, max ${times.at(-1)?.toFixed(0)} ms (target <= 1000 ms)`,
    );
    console.log(
      JSON.stringify({
        floe1: results['floe-1']?.perSecond,
        floe32: results['floe-32']?.perSecond,
        etcd1: results['etcd-1']?.perSecond,
        etcd32: results['etcd-32']?.perSecond,
        floeP99_32: results['floe-32']?.p99,
        etcdP99_32: results['etcd-32']?.p99,
        failoverMedianMs: median,
      }),
    );
  } finally {
    agent.destroy();
    await floe.stopAll();
    floe.cleanup();
  }
}

await main();
