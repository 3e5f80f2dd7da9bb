// The bounded CI sweep of the full-stack simulation: a fixed set of seeds per profile, each run
// through the production node, storage, lease service, HTTP API and SDK, under the faults its seed
// draws. A failure prints the one-line replay command. Long sweeps: npm run sim:full -- --seeds N --jobs J.
import { describe, expect, it } from 'vitest';
import { replayCommand } from './cli.js';
import { runFullSim } from './run.js';

const SWEEP: Array<{ profile: string; seeds: [number, number] }> = [
  { profile: 'quiet', seeds: [1, 10] },
  { profile: 'net', seeds: [1, 30] },
  { profile: 'nodes', seeds: [1, 30] },
  { profile: 'disk', seeds: [1, 30] },
  { profile: 'clients', seeds: [1, 30] },
  { profile: 'restarts', seeds: [1, 15] },
  { profile: 'coarse', seeds: [1, 15] },
  { profile: 'stalls', seeds: [1, 15] },
  { profile: 'hostile', seeds: [1, 10] },
  { profile: 'swarm', seeds: [1, 120] },
];

describe('full-stack simulation sweep', () => {
  for (const { profile, seeds } of SWEEP) {
    it(`${profile}: seeds ${seeds[0]}..${seeds[1]} pass every oracle`, { timeout: 900_000 }, async () => {
      const failures: string[] = [];
      for (let seed = seeds[0]; seed <= seeds[1]; seed++) {
        const r = await runFullSim({ seed, profile });
        if (r.failure) {
          const args = profile === 'swarm' ? [] : ['--profile', profile];
          failures.push(
            `seed ${seed}: ${r.failure.kind}: ${r.failure.detail.split('\n')[0]}\n  replay: ${replayCommand(seed, args)}`,
          );
        }
      }
      expect(failures, failures.join('\n')).toEqual([]);
    });
  }
});
