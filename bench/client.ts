/**
 * `npm run bench:client`: the client SDK's lease-bound generator (`lease.snowflake()`: deadline-checked clock, floor
 * and ceiling from the lease) beside the plain ID-core generator, same layout, same process, rounds interleaved.
 *
 * The lease comes from an in-process fake cluster (src/client/test-doubles.ts): only the generator is measured.
 * Three comparisons, each the MEDIAN of 9 interleaved rounds after 2 warm-ups:
 *  - `next()`, wait mode, real clock: both are held to the layout's 4,096 IDs/ms, so this shows the guard does not
 *    cost IDs where it matters in production;
 *  - `next()`, borrow mode with a lead of 10 minutes: CPU-bound, so the ratio is the guard's real per-ID cost;
 *  - `fill()` (batch), same borrow mode.
 * Target: lease-bound >= 0.95 x plain in each. Prints one JSON line at the end.
 */
import { cpus, loadavg } from 'node:os';
import { FloeClient } from '../src/client/index.js';
import { FakeCluster } from '../src/client/test-doubles.js';
import { Snowflake, systemClock } from '../src/id/index.js';

const WARMUPS = 2;
const ROUNDS = 9;
let sink = 0n;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

function interleaved(runs: Array<() => number>): number[] {
  const rates: number[][] = runs.map(() => []);
  for (let r = 0; r < WARMUPS + ROUNDS; r++) {
    runs.forEach((run, k) => {
      const t0 = process.hrtime.bigint();
      const n = run();
      const s = Number(process.hrtime.bigint() - t0) / 1e9;
      if (r >= WARMUPS) rates[k]?.push(n / s);
    });
  }
  return rates.map(median);
}

const cluster = new FakeCluster(['127.0.0.1:1']);
const client = new FloeClient({ endpoints: cluster.hosts, fetch: cluster.fetch });
// One generator per lease (two would issue the same IDs): one lease per comparison. The long TTL leaves room for
// borrow mode's 10-minute lead (a lease refuses a tick + lead that does not fit between renewals).
const leaseFor = (nodeId: string) => client.leaseWorker({ app: 'bench', nodeId, ttlMs: 3_600_000 });
const leases = [await leaseFor('bench-1'), await leaseFor('bench-2'), await leaseFor('bench-3')] as const;

const results: Record<string, { plain: number; lease: number; ratio: number }> = {};
function compare(
  name: string,
  make: () => Snowflake,
  op: (g: Snowflake) => number,
  leaseMake: () => Snowflake,
): void {
  const plain = make();
  const bound = leaseMake();
  const [p, l] = interleaved([() => op(plain), () => op(bound)]) as [number, number];
  results[name] = { plain: p, lease: l, ratio: l / p };
  console.log(
    `${name.padEnd(28)} plain ${(p / 1e6).toFixed(2).padStart(7)} M/s   lease-bound ${(l / 1e6).toFixed(2).padStart(7)} M/s   ratio ${(l / p).toFixed(3)}`,
  );
}

const N = 1_000_000;
const nextLoop = (g: Snowflake) => {
  let x = 0n;
  for (let i = 0; i < N; i++) x ^= g.next();
  sink ^= x;
  return N;
};
const batch = new BigInt64Array(4096);
const fillLoop = (g: Snowflake) => {
  for (let i = 0; i < 2000; i++) g.fill(batch);
  sink ^= batch[4095] as bigint;
  return 2000 * 4096;
};
const borrow = { onSequenceExhausted: 'borrow', onClockBackwards: 'wait', maxLeadMs: 600_000 } as const;

console.log(
  `cpus ${cpus().length} x ${cpus()[0]?.model ?? '?'}, load ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`,
);
compare(
  'next() wait, real clock',
  () => new Snowflake({ layout: 'floe', worker: 1, clock: systemClock }),
  nextLoop,
  () => leases[0].snowflake('floe'),
);
compare(
  'next() borrow (CPU-bound)',
  () => new Snowflake({ layout: 'floe', worker: 1, clock: systemClock, ...borrow }),
  nextLoop,
  () => leases[1].snowflake('floe', borrow),
);
compare(
  'fill() borrow (CPU-bound)',
  () => new Snowflake({ layout: 'floe', worker: 1, clock: systemClock, ...borrow }),
  fillLoop,
  () => leases[2].snowflake('floe', borrow),
);
const worst = Math.min(...Object.values(results).map((r) => r.ratio));
console.log(
  `target lease-bound >= 0.95 x plain: ${worst >= 0.95 ? 'met' : 'NOT met'} (worst ratio ${worst.toFixed(3)})`,
);
console.log(JSON.stringify({ bench: 'client', results, worstRatio: worst, sink: String(sink & 1n) }));
await Promise.all(leases.map((l) => l.release()));
