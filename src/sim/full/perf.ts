// CPU time per seed of the full-stack simulation (process.cpuUsage, so other jobs on the machine do not
// count), after a warm-up:
//   npx tsx src/sim/full/perf.ts [profile] [seeds] [start] [seqClients] [peerTransport] [flags]
// seqClients: a number forces the sequence workload's client count; omitted or `drawn`, each seed draws it.
// peerTransport: sim, production or drawn (default drawn), as the CLI's --peer-transport.
// Flags override the seed's shape as the CLI's do: --seconds S, --heal-seconds S, --clients N (SDK lease
// clients), --kv-clients N, --snowflake-clients N, --defaults on|off|drawn, --warmup N (unmeasured seeds first, 5). `--shape issue10` is issue 10's speed target: 3 nodes,
// 10 SDK clients (plus the 3 key-value clients the linearizability oracle needs), no sequence or Snowflake
// workload, 10 simulated seconds of workload and faults per seed (then healing, until liveness is shown).
// FLOE_PERF_PROFILE=<file.cpuprofile> writes a V8 CPU profile of the measured seeds only (not the warm-up).
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { parseArgs } from 'node:util';
import type { ConfigOverrides } from './config.js';
import { runFullSim } from './run.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    seconds: { type: 'string' },
    'heal-seconds': { type: 'string' },
    clients: { type: 'string' },
    'kv-clients': { type: 'string' },
    'snowflake-clients': { type: 'string' },
    shape: { type: 'string' },
    warmup: { type: 'string' },
    defaults: { type: 'string' },
  },
});
const [profile = 'swarm', seedsRaw = '40', startRaw = '1000', seqRaw, ptRaw = 'drawn'] = positionals;
const seeds = Number(seedsRaw);
const start = Number(startRaw);
const seqClients = seqRaw === undefined || seqRaw === 'drawn' ? undefined : Number(seqRaw);
if (ptRaw !== 'sim' && ptRaw !== 'production' && ptRaw !== 'drawn')
  throw new Error(`peerTransport must be sim, production or drawn, got "${ptRaw}"`);
const peerTransport: 'sim' | 'production' | 'drawn' = ptRaw;
if (values.shape !== undefined && values.shape !== 'issue10')
  throw new Error(`--shape must be issue10, got "${values.shape}"`);

const num = (name: string, v: string | undefined): number | undefined => {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a number ≥ 0, got "${v}"`);
  return n;
};
const shape: ConfigOverrides =
  values.shape === 'issue10'
    ? {
        nodes: 3,
        leaseClients: 10,
        kvClients: 3,
        seqClients: 0,
        snowflakeClients: 0,
        respLeaseClients: 0,
        seconds: 10,
      }
    : {};
const flags: ConfigOverrides = {};
const set = <K extends keyof ConfigOverrides>(k: K, v: ConfigOverrides[K] | undefined) => {
  if (v !== undefined) flags[k] = v;
};
set('seconds', num('seconds', values.seconds));
set('healSeconds', num('heal-seconds', values['heal-seconds']));
set('leaseClients', num('clients', values.clients));
set('kvClients', num('kv-clients', values['kv-clients']));
set('snowflakeClients', num('snowflake-clients', values['snowflake-clients']));
if (values.defaults !== undefined) {
  const d = values.defaults;
  if (d !== 'on' && d !== 'off' && d !== 'drawn')
    throw new Error(`--defaults must be on, off or drawn, got "${d}"`);
  flags.defaults = d;
}
const opts = {
  profile,
  peerTransport,
  ...shape,
  ...(seqClients === undefined ? {} : { seqClients }),
  ...flags,
};
const profileFile = process.env.FLOE_PERF_PROFILE;

// A long sweep runs with a warm JIT: `--warmup N` (default 5) seeds of another range run first, unmeasured.
const warmup = num('warmup', values.warmup) ?? 5;
for (let s = 1; s <= warmup; s++) await runFullSim({ seed: 900_000 + s, ...opts });
let session: Session | undefined;
if (profileFile) {
  session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
}
const before = process.cpuUsage();
let failures = 0;
let simulatedS = 0;
for (let seed = start; seed < start + seeds; seed++) {
  const r = await runFullSim({ seed, ...opts });
  if (r.failure) failures++;
  simulatedS += r.simulatedMs / 1000;
}
const used = process.cpuUsage(before);
if (session && profileFile) {
  const { profile: cpuProfile } = await session.post('Profiler.stop');
  writeFileSync(profileFile, JSON.stringify(cpuProfile));
  session.disconnect();
}
const cpuS = (used.user + used.system) / 1e6;
const shown = Object.entries({ ...shape, ...flags })
  .map(([k, v]) => `${k}=${v}`)
  .join(' ');
console.log(
  `${profile} seqClients=${seqRaw ?? shape.seqClients ?? 'drawn'} peerTransport=${peerTransport}${shown ? ` ${shown}` : ''}: ` +
    `${seeds} seeds, ${(simulatedS / seeds).toFixed(1)} simulated s per seed, ${(cpuS / seeds).toFixed(3)} s CPU per seed, ` +
    `${(seeds / cpuS).toFixed(2)} seeds/s per core, ${failures} failing`,
);
