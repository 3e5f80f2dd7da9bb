// CPU time per seed of the full-stack simulation (process.cpuUsage, so other jobs on the machine do not
// count), after a warm-up: `npx tsx src/sim/full/perf.ts [profile] [seeds] [start] [seqClients] [peerTransport]`.
// seqClients: a number forces the sequence workload's client count; omitted or `drawn`, each seed draws it.
// peerTransport: sim, production or drawn (default drawn), as the CLI's --peer-transport.
// FLOE_PERF_PROFILE=<file.cpuprofile> writes a V8 CPU profile of the measured seeds only (not the warm-up).
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { runFullSim } from './run.js';

const [profile = 'swarm', seedsRaw = '40', startRaw = '1000', seqRaw, ptRaw = 'drawn'] =
  process.argv.slice(2);
const seeds = Number(seedsRaw);
const start = Number(startRaw);
const seqClients = seqRaw === undefined || seqRaw === 'drawn' ? undefined : Number(seqRaw);
if (ptRaw !== 'sim' && ptRaw !== 'production' && ptRaw !== 'drawn')
  throw new Error(`peerTransport must be sim, production or drawn, got "${ptRaw}"`);
const peerTransport: 'sim' | 'production' | 'drawn' = ptRaw;
const opts = { profile, peerTransport, ...(seqClients === undefined ? {} : { seqClients }) };
const profileFile = process.env.FLOE_PERF_PROFILE;

for (let s = 1; s <= 5; s++) await runFullSim({ seed: 900_000 + s, ...opts });
let session: Session | undefined;
if (profileFile) {
  session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
}
const before = process.cpuUsage();
let failures = 0;
for (let seed = start; seed < start + seeds; seed++) {
  const r = await runFullSim({ seed, ...opts });
  if (r.failure) failures++;
}
const used = process.cpuUsage(before);
if (session && profileFile) {
  const { profile: cpuProfile } = await session.post('Profiler.stop');
  writeFileSync(profileFile, JSON.stringify(cpuProfile));
  session.disconnect();
}
const cpuS = (used.user + used.system) / 1e6;
console.log(
  `${profile} seqClients=${seqRaw ?? 'drawn'} peerTransport=${peerTransport}: ${seeds} seeds, ${(cpuS / seeds).toFixed(3)} s CPU per seed, ` +
    `${(seeds / cpuS).toFixed(2)} seeds/s per core, ${failures} failing`,
);
