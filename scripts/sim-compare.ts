// Compares two compiled trees of the full-stack simulator (each built with `npx tsc -p tsconfig.build.json
// --declaration false --outDir <dir>`, `node_modules` reachable from it, e.g. a copy under tmp/) in one process:
//
//   npx tsx scripts/sim-compare.ts traces <dirA> <dirB>
//       `trace <hash>` of every seed of the standard sample (swarm 1-30, clients, nodes, restarts and coarse 1-20),
//       as `npm run sim:full -- --seed S --profile P` prints it, in both trees; exits 1 if any differs.
//   npx tsx scripts/sim-compare.ts cpu <dirA> <dirB> [seeds] [start] [--defaults on|off|drawn]
//       CPU per seed (process.cpuUsage) of issue 10's shape (as `sim:perf --shape issue10`), the two trees
//       alternating seed by seed (A then B on odd seeds, B then A on even ones), after a warm-up of both. Load from
//       other jobs then weighs on both sides alike: separate `sim:perf` runs on this shared machine move by ±10-15%.
//       Also checks that both trees give each seed the same trace hash.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

interface RunResult {
  ok: boolean;
  traceHash: string;
  simulatedMs: number;
  config: { productionDefaults?: unknown };
}
type RunFullSim = (o: Record<string, unknown>) => Promise<RunResult>;

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { defaults: { type: 'string' } },
});
const [mode, dirA, dirB, seedsRaw = '40', startRaw = '1000'] = positionals;
if ((mode !== 'traces' && mode !== 'cpu') || dirA === undefined || dirB === undefined) {
  console.error(
    'usage: sim-compare.ts traces <dirA> <dirB> | cpu <dirA> <dirB> [seeds] [start] [--defaults on|off|drawn]',
  );
  process.exit(2);
}
const defaults = values.defaults ?? 'drawn';
if (defaults !== 'on' && defaults !== 'off' && defaults !== 'drawn')
  throw new Error(`--defaults must be on, off or drawn, got "${defaults}"`);
const seeds = Number(seedsRaw);
const start = Number(startRaw);
if (!Number.isSafeInteger(seeds) || seeds < 1 || !Number.isSafeInteger(start) || start < 0)
  throw new Error(`seeds must be an integer >= 1 and start >= 0, got "${seedsRaw}" and "${startRaw}"`);

async function load(dir: string): Promise<RunFullSim> {
  const file = path.resolve(dir, 'sim/full/run.js');
  const m = (await import(pathToFileURL(file).href)) as { runFullSim?: RunFullSim };
  if (typeof m.runFullSim !== 'function') throw new Error(`${file} exports no runFullSim`);
  return m.runFullSim;
}
const A = await load(dirA);
const B = await load(dirB);

if (mode === 'traces') {
  const sample: Array<[string, number]> = [
    ['swarm', 30],
    ['clients', 20],
    ['nodes', 20],
    ['restarts', 20],
    ['coarse', 20],
  ];
  let n = 0;
  let different = 0;
  for (const [profile, count] of sample) {
    for (let seed = 1; seed <= count; seed++) {
      const a = await A({ profile, seed, traceTail: 1 });
      const b = await B({ profile, seed, traceTail: 1 });
      const same = a.traceHash === b.traceHash && a.ok === b.ok;
      n++;
      if (!same) different++;
      const show = (r: RunResult) => `${r.ok ? 'ok  ' : 'FAIL'} ${r.traceHash}`;
      console.log(`${profile} ${seed}\t${show(a)}\t${show(b)}${same ? '' : '\tDIFFERENT'}`);
    }
  }
  console.log(`${n} seeds, ${different} with a different trace`);
  process.exit(different === 0 ? 0 : 1);
}

// As perf.ts --shape issue10.
const shape = {
  profile: 'swarm',
  nodes: 3,
  leaseClients: 10,
  kvClients: 3,
  seqClients: 0,
  snowflakeClients: 0,
  respLeaseClients: 0,
  seconds: 10,
  defaults,
};
for (let s = 1; s <= 5; s++) {
  await A({ seed: 900_000 + s, ...shape });
  await B({ seed: 900_000 + s, ...shape });
}
const cpu = { a: 0, b: 0 };
const simulated = { a: 0, b: 0 };
let different = 0;
const cpuSeconds = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1e6;
for (let seed = start; seed < start + seeds; seed++) {
  const order: Array<['a' | 'b', RunFullSim]> =
    seed % 2 === 1
      ? [
          ['a', A],
          ['b', B],
        ]
      : [
          ['b', B],
          ['a', A],
        ];
  const hashes: Record<string, string> = {};
  for (const [side, run] of order) {
    const before = process.cpuUsage();
    const r = await run({ seed, ...shape });
    cpu[side] += cpuSeconds(process.cpuUsage(before));
    simulated[side] += r.simulatedMs / 1000;
    hashes[side] = r.traceHash;
  }
  if (hashes.a !== hashes.b) {
    different++;
    console.log(`seed ${seed}: trace ${hashes.a} in A, ${hashes.b} in B`);
  }
}
const line = (side: 'a' | 'b', dir: string) =>
  `${side.toUpperCase()} ${dir}: ${(cpu[side] / seeds).toFixed(3)} s CPU per seed, ${(seeds / cpu[side]).toFixed(2)} seeds/s per core, ` +
  `${(simulated[side] / seeds).toFixed(1)} simulated s per seed`;
console.log(`issue 10's shape, defaults ${defaults}, seeds ${start}..${start + seeds - 1}`);
console.log(line('a', dirA));
console.log(line('b', dirB));
console.log(`B/A ${(cpu.b / cpu.a).toFixed(3)}; ${different} seeds with a different trace`);
