/**
 * `npm run bench:id`: the ID core's speed, side by side with the npm Snowflake libraries, in one process
 * (one JavaScript thread, so one core). Bounded to well under a minute.
 *
 * Method: every figure is the MEDIAN of the measured rounds after 2 warm-up rounds (the best round is shown too):
 * 9 rounds for the real-clock comparison, whose rounds alternate between the libraries, 5 for everything else.
 * Wall time from process.hrtime.bigint(); CPU time (user + system) from process.cpuUsage().
 */
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { Snowflake as SapphireSnowflake } from '@sapphire/snowflake';
import { Snowflake as WasmSnowflake } from 'nodejs-snowflake';
import {
  IdPermutation,
  PRESETS,
  SegmentBuffer,
  type SegmentRange,
  ShortCodec,
  Snowflake,
  systemClock,
} from '../src/id/index.js';

// flake-idgen ships no types: describe the one constructor and method used.
type FlakeIdGen = new (options?: { id?: number; epoch?: number }) => { next(): Buffer };
const FlakeId = createRequire(import.meta.url)('flake-idgen') as FlakeIdGen;

const WARMUPS = 2;
const ROUNDS = 5;
const INTERLEAVED_ROUNDS = 9;
const N = 500_000;
const TWITTER = PRESETS.twitter;
const LIMIT = TWITTER.idsPerSecond; // 4,096,000: 4096 sequence values per 1 ms tick

/** Keeps results alive so the JIT cannot drop the work. */
let sink: unknown;

interface Measured {
  /** Operations per second (median round). */
  perSec: number;
  /** Best round. */
  bestPerSec: number;
  /** CPU ns per operation (median round). */
  cpuNsPerOp: number;
  /** CPU time / wall time (median round): below 1 means the process was off the CPU part of the time. */
  cpuShare: number;
}

/** Like `measure`, for several contenders whose rounds alternate. */
function measureInterleaved(ops: number, runs: Array<() => void>): Measured[] {
  const rates: number[][] = runs.map(() => []);
  const cpu: number[][] = runs.map(() => []);
  const share: number[][] = runs.map(() => []);
  for (let r = 0; r < WARMUPS + INTERLEAVED_ROUNDS; r++) {
    runs.forEach((run, k) => {
      const c0 = process.cpuUsage();
      const t0 = process.hrtime.bigint();
      run();
      const wallNs = Number(process.hrtime.bigint() - t0);
      const c = process.cpuUsage(c0);
      if (r < WARMUPS) return;
      rates[k]?.push(ops / (wallNs / 1e9));
      cpu[k]?.push(((c.user + c.system) * 1000) / ops);
      share[k]?.push(((c.user + c.system) * 1000) / wallNs);
    });
  }
  return runs.map((_, k) => ({
    perSec: median(rates[k] ?? []),
    bestPerSec: Math.max(...(rates[k] ?? [])),
    cpuNsPerOp: median(cpu[k] ?? []),
    cpuShare: median(share[k] ?? []),
  }));
}

function measure(ops: number, run: () => void): Measured {
  const rates: number[] = [];
  const cpu: number[] = [];
  const share: number[] = [];
  for (let r = 0; r < WARMUPS + ROUNDS; r++) {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    run();
    const wallNs = Number(process.hrtime.bigint() - t0);
    const c = process.cpuUsage(c0);
    if (r < WARMUPS) continue;
    rates.push(ops / (wallNs / 1e9));
    cpu.push(((c.user + c.system) * 1000) / ops);
    share.push(((c.user + c.system) * 1000) / wallNs);
  }
  return {
    perSec: median(rates),
    bestPerSec: Math.max(...rates),
    cpuNsPerOp: median(cpu),
    cpuShare: median(share),
  };
}

async function measureAsync(ops: number, run: () => Promise<void>): Promise<Measured> {
  const rates: number[] = [];
  const cpu: number[] = [];
  const share: number[] = [];
  for (let r = 0; r < WARMUPS + ROUNDS; r++) {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    await run();
    const wallNs = Number(process.hrtime.bigint() - t0);
    const c = process.cpuUsage(c0);
    if (r < WARMUPS) continue;
    rates.push(ops / (wallNs / 1e9));
    cpu.push(((c.user + c.system) * 1000) / ops);
    share.push(((c.user + c.system) * 1000) / wallNs);
  }
  return {
    perSec: median(rates),
    bestPerSec: Math.max(...rates),
    cpuNsPerOp: median(cpu),
    cpuShare: median(share),
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

/** Duplicates among n IDs (sorted scan). */
function duplicates(ids: BigInt64Array): number {
  ids.sort();
  let d = 0;
  for (let i = 1; i < ids.length; i++) if (ids[i] === ids[i - 1]) d++;
  return d;
}

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits });
const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`;
const pct = (x: number) => `${Math.round(x * 100)}%`;
const log = (s = '') => process.stdout.write(`${s}\n`);

const started = Date.now();
log(
  `Floe ID core benchmark: node ${process.version}, ${cpus()[0]?.model ?? 'unknown cpu'} (${cpus().length} cores; this runs on one thread)`,
);
log(
  `Load average at start: ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')} (other work on the machine lowers real-clock figures)`,
);
log(
  `Each figure: median of ${ROUNDS} rounds (section 1: ${INTERLEAVED_ROUNDS}, alternating between libraries) after ${WARMUPS} warm-ups; best round in brackets.`,
);
log();

// ---------------------------------------------------------------------------------------------------------------
// 1. next() with the real clock, twitter layout, wait mode, beside the npm libraries doing the same work.
log(
  `1. Snowflake next(), real clock, twitter layout (41/5/5/12, 1 ms): generate N = ${fmt(N)} IDs each per round`,
);
log(`   layout limit: ${fmt(LIMIT)} IDs/s per worker (4096 sequence values per 1 ms tick)`);

const floe = new Snowflake({ layout: TWITTER, worker: 1, datacenter: 1, clock: systemClock });
const sapphire = new SapphireSnowflake(TWITTER.epochMs);
const wasm = new WasmSnowflake({ custom_epoch: TWITTER.epochMs, instance_id: 1 });
const flake = new FlakeId({ id: 1, epoch: TWITTER.epochMs });
// Rounds are interleaved (Floe, sapphire, wasm, flake, Floe, ...) so that load from other processes falls on all
// generators alike instead of on whichever happened to run during a busy stretch.
const [floeNext, sapphireNext, wasmNext, flakeNext] = measureInterleaved(N, [
  () => {
    for (let i = 0; i < N; i++) sink = floe.next();
  },
  () => {
    for (let i = 0; i < N; i++) sink = sapphire.generate();
  },
  () => {
    for (let i = 0; i < N; i++) sink = wasm.getUniqueID();
  },
  () => {
    // flake-idgen throws when a millisecond's 4096 values are used up (without a callback): retry, as a caller must.
    for (let i = 0; i < N; i++) {
      for (;;) {
        try {
          sink = flake.next();
          break;
        } catch {
          // sequence exhausted in this ms: try again
        }
      }
    }
  },
]) as [Measured, Measured, Measured, Measured];

// Uniqueness: one more round per generator, each storing its N IDs into a typed array (the same extra cost for
// all), timed, then counted. "distinct IDs/s" = distinct IDs / wall time of that round.
function distinctRound(gen: () => bigint): { duplicates: number; distinctPerSec: number } {
  const ids = new BigInt64Array(N);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) ids[i] = gen();
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const d = duplicates(ids);
  return { duplicates: d, distinctPerSec: (N - d) / seconds };
}
const flakeBigInt = (): bigint => {
  for (;;) {
    try {
      return flake.next().readBigInt64BE(0);
    } catch {
      // sequence exhausted in this ms: retry
    }
  }
};
const dupes = {
  floe: distinctRound(() => floe.next()),
  sapphire: distinctRound(() => sapphire.generate()),
  wasm: distinctRound(() => wasm.getUniqueID() as bigint),
  flake: distinctRound(flakeBigInt),
};

const peers = [
  {
    name: '@sapphire/snowflake',
    m: sapphireNext,
    u: dupes.sapphire,
    note: 'never waits: wraps its 12-bit increment',
  },
  {
    name: 'nodejs-snowflake (wasm)',
    m: wasmNext,
    u: dupes.wasm,
    note: 'own layout: 10-bit sequence, 1,024,000/s limit',
  },
  {
    name: 'flake-idgen',
    m: flakeNext,
    u: dupes.flake,
    note: 'returns an 8-byte Buffer; throws on exhaustion',
  },
];
log(
  `   ${'Floe next() (wait mode)'.padEnd(25)} ${fmt(floeNext.perSec).padStart(11)} IDs/s  [${fmt(floeNext.bestPerSec)}]  = ${ratio(floeNext.perSec, LIMIT)} the layout limit; on CPU ${pct(floeNext.cpuShare)} of the time`,
);
for (const p of peers) {
  log(
    `   ${p.name.padEnd(25)} ${fmt(p.m.perSec).padStart(11)} IDs/s  [${fmt(p.m.bestPerSec)}]  Floe/peer = ${ratio(floeNext.perSec, p.m.perSec)}; on CPU ${pct(p.m.cpuShare)}  (${p.note})`,
  );
}
log(
  '   "on CPU" = CPU time / wall time of a round: below 100% the OS ran other work instead, and every millisecond in',
);
log(
  "   which a generator never runs loses that millisecond's 4096 IDs (the limit is per millisecond of wall time).",
);
log(`   Uniqueness round (N IDs each stored in a typed array): duplicates, distinct IDs/s`);
for (const [name, u] of [['Floe next()', dupes.floe], ...peers.map((p) => [p.name, p.u] as const)] as const) {
  log(
    `   ${name.padEnd(25)} ${String(u.duplicates).padStart(8)} duplicates  ${fmt(u.distinctPerSec).padStart(11)} distinct IDs/s`,
  );
}
log();

// ---------------------------------------------------------------------------------------------------------------
// 2. CPU per ID: next() vs the batch form. Borrow mode with an unbounded lead, so the 4096-per-ms sequence limit
//    never makes either wait: this measures the CPU cost of producing an ID, not the layout's limit.
log('2. CPU per ID, next() vs batch (borrow mode, lead unbounded: measures CPU cost, not the 4096/ms limit)');
const CPU_N = 2_000_000;
const BATCH = 65_536;
const borrowing = () =>
  new Snowflake({
    layout: TWITTER,
    worker: 2,
    clock: systemClock,
    onSequenceExhausted: 'borrow',
    maxLeadMs: Number.MAX_SAFE_INTEGER,
  });
const gNext = borrowing();
const cpuNext = measure(CPU_N, () => {
  for (let i = 0; i < CPU_N; i++) sink = gNext.next();
});
const gBatch = borrowing();
const cpuBatch = measure(CPU_N, () => {
  for (let done = 0; done < CPU_N; done += BATCH) sink = gBatch.nextBatch(BATCH);
});
const gFill = borrowing();
const reused = new BigInt64Array(BATCH);
const cpuFill = measure(CPU_N, () => {
  for (let done = 0; done < CPU_N; done += BATCH) sink = gFill.fill(reused);
});
const batchAdvantage = cpuNext.cpuNsPerOp / cpuBatch.cpuNsPerOp;
log(
  `   next()                 ${cpuNext.cpuNsPerOp.toFixed(1).padStart(6)} ns CPU/ID  (${fmt(cpuNext.perSec)} IDs/s)`,
);
log(
  `   nextBatch(${fmt(BATCH)})      ${cpuBatch.cpuNsPerOp.toFixed(1).padStart(6)} ns CPU/ID  (${fmt(cpuBatch.perSec)} IDs/s)  -> ${batchAdvantage.toFixed(1)}x cheaper than next()`,
);
log(
  `   fill(reused array)     ${cpuFill.cpuNsPerOp.toFixed(1).padStart(6)} ns CPU/ID  (${fmt(cpuFill.perSec)} IDs/s)  -> ${(cpuNext.cpuNsPerOp / cpuFill.cpuNsPerOp).toFixed(1)}x cheaper than next()`,
);
log();

// ---------------------------------------------------------------------------------------------------------------
// 3. Segment buffer: synchronous fast path, a local in-memory fetch, yielding to the event loop every 64Ki values
//    (as a server does between requests) so prefetches complete.
log('3. SegmentBuffer tryNextSync() with an in-memory fetch');
const SEG_N = 20_000_000;
let counter = 0;
const segment = new SegmentBuffer({
  key: 'bench',
  fetch: async (step: number): Promise<SegmentRange> => {
    const range = { start: counter, end: counter + step };
    counter += step;
    return range;
  },
  minStep: 1_000_000,
  maxStep: 10_000_000,
});
const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));
const seg = await measureAsync(SEG_N, async () => {
  let last = -1;
  for (let done = 0; done < SEG_N; ) {
    for (let i = 0; i < 65_536; i++) {
      const v = segment.tryNextSync() ?? (await segment.next());
      if (v <= last) throw new Error('segment buffer went backwards');
      last = v;
    }
    done += 65_536;
    await yieldToLoop();
  }
  sink = last;
});
log(
  `   ${fmt(seg.perSec)} values/s  [${fmt(seg.bestPerSec)}]  (${seg.cpuNsPerOp.toFixed(1)} ns CPU/value; fetches: ${segment.stats.fetches})`,
);
log();

// ---------------------------------------------------------------------------------------------------------------
// 4. Obfuscation: the keyed 63-bit permutation and sqids short codes, over consecutive real-looking IDs.
log('4. Obfuscation');
const OB_N = 300_000;
const base = floe.next();
const permutation = new IdPermutation({ secret: 'bench secret' });
const permEncode = measure(OB_N, () => {
  for (let i = 0; i < OB_N; i++) sink = permutation.encode(base + BigInt(i));
});
const permuted = Array.from({ length: OB_N }, (_, i) => permutation.encode(base + BigInt(i)));
const permDecode = measure(OB_N, () => {
  for (let i = 0; i < OB_N; i++) sink = permutation.decode(permuted[i] as bigint);
});
const SQ_N = 10_000;
const keyed = new ShortCodec({ secret: 'bench secret' });
const plain = new ShortCodec();
const shortEncode = measure(SQ_N, () => {
  for (let i = 0; i < SQ_N; i++) sink = keyed.encode(base + BigInt(i));
});
const codes = Array.from({ length: SQ_N }, (_, i) => keyed.encode(base + BigInt(i)));
const shortDecode = measure(SQ_N, () => {
  for (let i = 0; i < SQ_N; i++) sink = keyed.decode(codes[i] as string);
});
const plainEncode = measure(SQ_N, () => {
  for (let i = 0; i < SQ_N; i++) sink = plain.encode(base + BigInt(i));
});
log(
  `   permutation encode       ${fmt(permEncode.perSec).padStart(11)} IDs/s  [${fmt(permEncode.bestPerSec)}]`,
);
log(
  `   permutation decode       ${fmt(permDecode.perSec).padStart(11)} IDs/s  [${fmt(permDecode.bestPerSec)}]`,
);
log(
  `   short code encode (keyed)${fmt(shortEncode.perSec).padStart(12)} codes/s [${fmt(shortEncode.bestPerSec)}]  e.g. ${codes[0]}`,
);
log(
  `   short code decode (keyed)${fmt(shortDecode.perSec).padStart(12)} codes/s [${fmt(shortDecode.bestPerSec)}]`,
);
log(
  `   short code encode (plain)${fmt(plainEncode.perSec).padStart(12)} codes/s [${fmt(plainEncode.bestPerSec)}]`,
);
log();

// ---------------------------------------------------------------------------------------------------------------
const bestPeer = peers.reduce((a, b) => (b.m.perSec > a.m.perSec ? b : a));
const targets = [
  ['Floe next() >= 0.95 x layout limit', floeNext.perSec >= 0.95 * LIMIT, `${ratio(floeNext.perSec, LIMIT)}`],
  [
    'Floe next() ahead of every npm peer (raw IDs/s)',
    peers.every((p) => floeNext.perSec > p.m.perSec),
    `fastest peer ${bestPeer.name}: Floe/peer = ${ratio(floeNext.perSec, bestPeer.m.perSec)}` +
      (bestPeer.u.duplicates > 0
        ? ` (that peer issued ${bestPeer.u.duplicates} duplicates in ${fmt(N)})`
        : ''),
  ],
  [
    'Floe next() ahead of every npm peer that issued no duplicates',
    peers.every((p) => p.u.duplicates > 0 || floeNext.perSec > p.m.perSec),
    peers
      .filter((p) => p.u.duplicates === 0)
      .map((p) => `${p.name} ${ratio(floeNext.perSec, p.m.perSec)}`)
      .join(', '),
  ],
  ['batch >= 5x cheaper CPU/ID than next()', batchAdvantage >= 5, `${batchAdvantage.toFixed(1)}x`],
  ['segment buffer >= 20M values/s', seg.perSec >= 20e6, `${fmt(seg.perSec / 1e6, 1)}M/s`],
  ['permutation >= 1M IDs/s', permEncode.perSec >= 1e6, `${fmt(permEncode.perSec / 1e6, 2)}M/s`],
] as const;

log('Summary (median of rounds)');
const rows: Array<[string, string, string]> = [
  [
    'Floe next(), wait mode, real clock',
    `${fmt(floeNext.perSec)} IDs/s`,
    `${ratio(floeNext.perSec, LIMIT)} limit; ${dupes.floe.duplicates} duplicates / ${fmt(N)}`,
  ],
  ...peers.map((p): [string, string, string] => [
    p.name,
    `${fmt(p.m.perSec)} IDs/s`,
    `Floe/peer ${ratio(floeNext.perSec, p.m.perSec)}; ${p.u.duplicates} duplicates / ${fmt(N)}, ${fmt(p.u.distinctPerSec)} distinct/s`,
  ]),
  ['layout limit (twitter, 12-bit seq @ 1 ms)', `${fmt(LIMIT)} IDs/s`, ''],
  ['next() CPU, borrow mode', `${cpuNext.cpuNsPerOp.toFixed(1)} ns/ID`, ''],
  [
    'nextBatch CPU, borrow mode',
    `${cpuBatch.cpuNsPerOp.toFixed(1)} ns/ID`,
    `${batchAdvantage.toFixed(1)}x cheaper`,
  ],
  ['SegmentBuffer tryNextSync', `${fmt(seg.perSec)} values/s`, ''],
  ['IdPermutation encode', `${fmt(permEncode.perSec)} IDs/s`, ''],
  ['ShortCodec encode (keyed)', `${fmt(shortEncode.perSec)} codes/s`, ''],
  ['ShortCodec decode (keyed)', `${fmt(shortDecode.perSec)} codes/s`, ''],
];
const w0 = Math.max(...rows.map((r) => r[0].length));
const w1 = Math.max(...rows.map((r) => r[1].length));
for (const [a, b, c] of rows) log(`  ${a.padEnd(w0)}  ${b.padStart(w1)}  ${c}`);
log();
log('Targets');
for (const [what, ok, detail] of targets) log(`  ${ok ? 'MET ' : 'MISS'}  ${what}: ${detail}`);
log(
  `(${((Date.now() - started) / 1000).toFixed(1)} s; load average at end: ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')})`,
);
log(
  JSON.stringify({
    bench: 'id',
    node: process.version,
    statistic: `median of ${ROUNDS} rounds (real-clock comparison: ${INTERLEAVED_ROUNDS}, interleaved) after ${WARMUPS} warm-ups`,
    layoutLimitPerSec: LIMIT,
    floeNextPerSec: Math.round(floeNext.perSec),
    floeNextVsLimit: +(floeNext.perSec / LIMIT).toFixed(4),
    floeNextCpuShare: +floeNext.cpuShare.toFixed(3),
    peers: Object.fromEntries(
      peers.map((p) => [
        p.name,
        {
          perSec: Math.round(p.m.perSec),
          floeRatio: +(floeNext.perSec / p.m.perSec).toFixed(2),
          duplicates: p.u.duplicates,
          distinctPerSec: Math.round(p.u.distinctPerSec),
          cpuShare: +p.m.cpuShare.toFixed(3),
        },
      ]),
    ),
    floeDuplicates: dupes.floe.duplicates,
    floeDistinctPerSec: Math.round(dupes.floe.distinctPerSec),
    loadAverage: loadavg().map((x) => +x.toFixed(2)),
    cpuNsPerIdNext: +cpuNext.cpuNsPerOp.toFixed(2),
    cpuNsPerIdBatch: +cpuBatch.cpuNsPerOp.toFixed(2),
    cpuNsPerIdFill: +cpuFill.cpuNsPerOp.toFixed(2),
    batchCpuAdvantage: +batchAdvantage.toFixed(2),
    segmentValuesPerSec: Math.round(seg.perSec),
    permutationEncodePerSec: Math.round(permEncode.perSec),
    permutationDecodePerSec: Math.round(permDecode.perSec),
    shortEncodePerSec: Math.round(shortEncode.perSec),
    shortDecodePerSec: Math.round(shortDecode.perSec),
    plainShortEncodePerSec: Math.round(plainEncode.perSec),
    targetsMet: Object.fromEntries(targets.map(([what, ok]) => [what, ok])),
  }),
);
void sink;
