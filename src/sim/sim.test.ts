// The simulator in CI: a fixed range of seeds over every fault profile and both cluster sizes
// (thousands of short runs), a few long runs, exact reproducibility, and self-tests proving that
// deliberately broken behaviour is caught.
//
// Sizing (measured on the 2-core dev box, see docs/simulator.md): a 1,200-event run takes ~10 ms
// of wall time, so the sweep below (14 × 300 runs) takes about a minute on one core.

import { describe, expect, it } from 'vitest';
import { PROFILE_NAMES } from './profiles.js';
import { replayCommand, runSimulation, type SimOptions, type SimResult } from './simulation.js';

const SWEEP_SEEDS = 300;
const SWEEP_STEPS = 1_200;

function failures(results: SimResult[]): string[] {
  return results
    .filter((r) => r.safety !== undefined || !r.liveness.ok)
    .map((r) =>
      r.safety
        ? `seed ${r.seed}: ${r.safety.message}\n  replay: ${r.replay}`
        : `seed ${r.seed}: LIVENESS ${r.liveness.reason}\n  replay: ${r.replay}`,
    );
}

function sweep(base: Omit<SimOptions, 'seed'>, from: number, count: number): SimResult[] {
  const out: SimResult[] = [];
  for (let seed = from; seed < from + count; seed++) out.push(runSimulation({ ...base, seed }));
  return out;
}

describe('fixed seed sweep (CI)', () => {
  for (const faults of PROFILE_NAMES) {
    for (const nodes of [3, 5] as const) {
      it(`${faults}, ${nodes} nodes: seeds 1..${SWEEP_SEEDS} are safe and live`, () => {
        const results = sweep({ faults, nodes, steps: SWEEP_STEPS }, 1, SWEEP_SEEDS);
        expect(failures(results)).toEqual([]);
        // The runs must actually exercise the cluster, or "no violation" would mean nothing.
        const committed = results.reduce((s, r) => s + r.stats.committed, 0);
        expect(committed / results.length).toBeGreaterThan(20);
      });
    }
  }
});

describe('long runs', () => {
  const cases: Array<Omit<SimOptions, 'seed'> & { seed: number }> = [
    { seed: 1_000_001, faults: 'chaos', nodes: 3, steps: 60_000 },
    { seed: 1_000_002, faults: 'chaos', nodes: 5, steps: 60_000 },
    { seed: 1_000_003, faults: 'lease', nodes: 5, steps: 40_000 },
    { seed: 1_000_004, faults: 'crash', nodes: 3, steps: 40_000 },
  ];
  for (const c of cases) {
    it(`${c.faults}, ${c.nodes} nodes, ${c.steps} events (seed ${c.seed})`, () => {
      const r = runSimulation(c);
      expect(failures([r])).toEqual([]);
      expect(r.stats.committed).toBeGreaterThan(500);
      expect(r.stats.snapshotsInstalled).toBeGreaterThan(0);
    });
  }
});

describe('reproducibility', () => {
  it('the same seed gives the same trace, event for event', () => {
    const opts: SimOptions = { seed: 4242, faults: 'chaos', nodes: 5, steps: 3_000 };
    const a = runSimulation(opts);
    const b = runSimulation(opts);
    expect(a.traceHash).toBe(b.traceHash);
    expect(a.events).toBe(b.events);
    expect(a.virtualUs).toBe(b.virtualUs);
    expect(a.stats).toEqual(b.stats);
    expect(a.traceTail).toEqual(b.traceTail);
  });

  it('verbose mode prints exactly the trace that is hashed', () => {
    const lines: string[] = [];
    const quiet = runSimulation({ seed: 77, steps: 800 });
    const loud = runSimulation({ seed: 77, steps: 800, sink: (l) => lines.push(l) });
    expect(loud.traceHash).toBe(quiet.traceHash);
    expect(lines.slice(-loud.traceTail.length)).toEqual(loud.traceTail);
  });

  it('different seeds give different traces', () => {
    const hashes = new Set([1, 2, 3, 4, 5].map((seed) => runSimulation({ seed, steps: 500 }).traceHash));
    expect(hashes.size).toBe(5);
  });

  it('prints a replay command carrying every non-default option', () => {
    expect(replayCommand({ seed: 12345, nodes: 3, steps: 3000, faults: 'chaos' })).toBe(
      'npm run sim -- --seed 12345 --verbose',
    );
    expect(replayCommand({ seed: 9, nodes: 5, steps: 100, faults: 'lease', bug: 'amnesia' })).toBe(
      'npm run sim -- --seed 9 --nodes 5 --steps 100 --faults lease --bug amnesia --verbose',
    );
  });
});

describe('self-tests: broken behaviour is caught', () => {
  it('a node that never persists its term and vote is caught sending what it did not persist', () => {
    const r = runSimulation({ seed: 1, faults: 'crash', bug: 'amnesia', steps: 2_000 });
    expect(r.safety?.invariant).toBe('persist-before-send');
  });

  it('with that check off, forgetting votes across restarts leads to a double vote or two leaders', () => {
    const found: string[] = [];
    for (let seed = 1; seed <= 60 && found.length === 0; seed++) {
      const r = runSimulation({
        seed,
        faults: 'crash',
        bug: 'amnesia',
        steps: 2_000,
        disabledInvariants: ['persist-before-send'],
      });
      if (r.safety?.invariant === 'double-vote' || r.safety?.invariant === 'election-safety') {
        found.push(`${r.seed}: ${r.safety.message}`);
      }
    }
    expect(found).toHaveLength(1);
  });

  it('clocks far outside the lease margin (±80% rates) let two leaders believe in their lease at once', () => {
    let found: SimResult | undefined;
    for (let seed = 1; seed <= 400 && found === undefined; seed++) {
      const r = runSimulation({ seed, faults: 'lease', clockDrift: 0.8, steps: 3_000 });
      if (r.safety) found = r;
    }
    expect(found?.safety?.invariant).toBe('lease-overlap');
    expect(found?.replay).toContain('--clock-drift 0.8');
  });

  it('a partition left in place after healing is a liveness failure, not a safety violation', () => {
    const r = runSimulation({
      seed: 3,
      faults: 'net',
      bug: 'unhealed-partition',
      steps: 1_000,
      confChanges: false,
    });
    expect(r.safety).toBeUndefined();
    expect(r.liveness.ok).toBe(false);
    expect(r.liveness.reason).toMatch(/members \[1\] have not applied the barrier/);
  });

  it('the same run without the bug is live', () => {
    const r = runSimulation({ seed: 3, faults: 'net', steps: 1_000, confChanges: false });
    expect(r.safety).toBeUndefined();
    expect(r.liveness.ok).toBe(true);
  });
});
