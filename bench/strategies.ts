/**
 * `npm run bench:strategies`: the cost per ID of the strategy/plugin layer (issue 12), one run.
 * The same Snowflake generator (floe layout, borrow on exhaustion so the clock never limits the
 * rate) called directly, through IdGenerator.generateSync with no plugins, with the audit plugin
 * (summaries to a sink that keeps nothing), with audit + metrics + permutation, and through the
 * async `generate`. Prints ns per ID and the ratio to the direct call.
 * Target (issue 12): the audit plugin costs at most 5 % over the generator without it.
 */
import { Registry } from 'prom-client';
import { Snowflake } from '../src/id/snowflake.js';
import {
  auditPlugin,
  IdGenerator,
  metricsPlugin,
  permutationPlugin,
  snowflakeStrategy,
} from '../src/strategies/index.js';

const N = Number(process.argv[process.argv.indexOf('--n') + 1]) || 2_000_000;
const gen = () =>
  new Snowflake({ layout: 'floe', worker: 1, onSequenceExhausted: 'borrow', maxLeadMs: 10_000_000 });

function time(label: string, fn: () => void, base?: number): number {
  for (let i = 0; i < 3; i++) fn(); // warm up
  const runs: number[] = [];
  for (let r = 0; r < 5; r++) {
    const t = process.hrtime.bigint();
    fn();
    runs.push(Number(process.hrtime.bigint() - t) / N);
  }
  runs.sort((a, b) => a - b);
  const ns = runs[2]!; // median of 5
  console.log(
    `${label.padEnd(56)} ${ns.toFixed(1).padStart(7)} ns/ID  ${(1e9 / ns / 1e6).toFixed(2).padStart(6)} M IDs/s${base ? `  ${(ns / base).toFixed(3)}x` : ''}`,
  );
  return ns;
}

async function main(): Promise<void> {
  console.log(
    `bench:strategies, ${N.toLocaleString('en-US')} IDs per run, median of 5, Node ${process.version}\n`,
  );
  const g0 = gen();
  const base = time('Snowflake.next() directly', () => {
    for (let i = 0; i < N; i++) g0.next();
  });

  const plain = new IdGenerator().register('b', snowflakeStrategy(gen()));
  await plain.init();
  const noPlugins = time(
    'IdGenerator.generateSync, no plugins',
    () => {
      for (let i = 0; i < N; i++) plain.generateSync('b');
    },
    base,
  );

  const audited = new IdGenerator().register('b', snowflakeStrategy(gen()));
  const audit = auditPlugin({ record: () => {} }, { intervalMs: 1000 });
  audited.use(audit, 'b');
  await audited.init();
  const withAudit = time(
    'IdGenerator.generateSync + audit plugin',
    () => {
      for (let i = 0; i < N; i++) audited.generateSync('b');
    },
    base,
  );
  audit.stop();

  const full = new IdGenerator().register('b', snowflakeStrategy(gen()));
  const audit2 = auditPlugin({ record: () => {} });
  full
    .use(audit2, 'b')
    .use(metricsPlugin(new Registry()), 'b')
    .use(permutationPlugin({ secret: 'bench' }), 'b');
  await full.init();
  time(
    'IdGenerator.generateSync + audit + metrics + permutation',
    () => {
      for (let i = 0; i < N; i++) full.generateSync('b');
    },
    base,
  );
  audit2.stop();

  const asyncGen = new IdGenerator().register('b', snowflakeStrategy(gen()));
  const M = Math.floor(N / 10);
  const t = process.hrtime.bigint();
  for (let i = 0; i < M; i++) await asyncGen.generate('b');
  const asyncNs = Number(process.hrtime.bigint() - t) / M;
  console.log(
    `${'IdGenerator.generate (async), no plugins'.padEnd(56)} ${asyncNs.toFixed(1).padStart(7)} ns/ID  ${(1e9 / asyncNs / 1e6).toFixed(2).padStart(6)} M IDs/s  ${(asyncNs / base).toFixed(3)}x`,
  );

  // The target's own figure: interleaved runs (A B A B ...) of the two, each ID consumed, median of 9.
  const sinkBuf = new BigInt64Array(1024);
  let k = 0;
  const run = (g: IdGenerator) => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < N; i++) sinkBuf[k++ & 1023] = g.generateSync('b');
    return Number(process.hrtime.bigint() - t0) / N;
  };
  const a: number[] = [];
  const b: number[] = [];
  const audit3 = auditPlugin({ record: () => {} });
  const withA = new IdGenerator().register('b', snowflakeStrategy(gen()));
  withA.use(audit3, 'b');
  const without = new IdGenerator().register('b', snowflakeStrategy(gen()));
  for (let r = 0; r < 9; r++) {
    a.push(run(without));
    b.push(run(withA));
  }
  audit3.stop();
  a.sort((x, y) => x - y);
  b.sort((x, y) => x - y);
  const ma = a[4]!;
  const mb = b[4]!;
  console.log(
    `\naudit plugin overhead (interleaved, IDs consumed, median of 9): ${ma.toFixed(1)} -> ${mb.toFixed(1)} ns/ID = ${(((mb - ma) / ma) * 100).toFixed(1)} % (target <= 5 %)`,
  );
  console.log(`(single runs above: ${noPlugins.toFixed(1)} -> ${withAudit.toFixed(1)} ns/ID)`);
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
