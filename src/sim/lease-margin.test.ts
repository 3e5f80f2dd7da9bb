// Issue 9 item 5: the leader-lease margin against clock drift. Clocks are set to the two ends of
// the documented bound ε = 0.1 (every tick period is base × 0.9 or base × 1.1), and the
// 'lease-edge' profile cuts the leader off again and again so that the others elect a new
// leader as early as the lease allows. The margin derived from ε must leave no overlap; the old
// margin max(1, ⌊E/5⌋) does at E = 9.

import { describe, expect, it } from 'vitest';
import { leaseMarginFor } from '../raft/config.js';
import { runSimulation, type SimOptions, type SimResult } from './simulation.js';

const EPSILON = 0.1;

function sweep(base: Omit<SimOptions, 'seed'>, from: number, count: number): SimResult[] {
  const out: SimResult[] = [];
  for (let seed = from; seed < from + count; seed++) out.push(runSimulation({ ...base, seed }));
  return out;
}

const edge = (electionTicks: number, nodes: 3 | 5): Omit<SimOptions, 'seed'> => ({
  faults: 'lease-edge',
  nodes,
  steps: 3_000,
  clockRates: 'extremes',
  clockDrift: EPSILON,
  electionTicks,
});

describe('leader lease margin versus clock drift (clocks at ±ε)', () => {
  for (const [electionTicks, nodes, seeds] of [
    [9, 3, 300],
    [9, 5, 150],
    [10, 3, 150],
    [13, 5, 100],
  ] as const) {
    it(`E = ${electionTicks}, ${nodes} nodes: the derived margin ${leaseMarginFor(electionTicks, EPSILON)} leaves no lease overlap in ${seeds} seeds`, () => {
      const results = sweep(edge(electionTicks, nodes), 1, seeds);
      const bad = results.filter((r) => r.safety || !r.liveness.ok).map((r) => `${r.seed}: ${r.replay}`);
      expect(bad).toEqual([]);
      // The profile must really exercise leases: many leaders, each cut off while holding one.
      const terms = results.reduce((s, r) => s + r.stats.leaderTerms, 0);
      expect(terms / results.length).toBeGreaterThan(5);
    });
  }

  it('the old margin max(1, ⌊E/5⌋) = 1 at E = 9 lets two leaders hold a lease at once', () => {
    let found: SimResult | undefined;
    for (let seed = 1; seed <= 300 && found === undefined; seed++) {
      const r = runSimulation({ ...edge(9, 3), seed, leaseMarginTicks: 1 });
      if (r.safety) found = r;
    }
    expect(found?.safety?.invariant).toBe('lease-overlap');
    expect(found?.replay).toContain('--clock-rates extremes --election-ticks 9 --lease-margin 1');
  });
});
