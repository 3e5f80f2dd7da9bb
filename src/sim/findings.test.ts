// The seeds behind the old simulator's findings (docs/findings/simulator-findings.md), replayed
// exactly: each was a failure once and must stay safe and live. The core-level situations are
// also pinned as transcripts in src/raft/testdata/finding-*.txt and storm-2000662-*.txt.

import { describe, expect, it } from 'vitest';
import { runSimulation, type SimOptions } from './simulation.js';

const SEEDS: Array<{ finding: string; options: SimOptions }> = [
  { finding: 'F1 restart re-applied snapshot entries', options: { seed: 4, faults: 'crash' } },
  { finding: 'F2 torn snapshot + hard state write', options: { seed: 15, faults: 'crash' } },
  { finding: 'F2 (lease profile)', options: { seed: 1, faults: 'lease' } },
  { finding: 'F3 vote half', options: { seed: 100791 } },
  { finding: 'F3 append half', options: { seed: 400648, preVote: false, checkQuorum: false } },
  {
    finding: 'F3 append half (partition)',
    options: { seed: 401521, faults: 'partition', preVote: false, checkQuorum: false },
  },
  {
    finding: 'storm 2000662 snapshot lost with a crashed paused node',
    options: { seed: 2000662, faults: 'storm' },
  },
];

describe('simulator finding seeds stay safe and live', () => {
  it.each(SEEDS.map((s) => [s.finding, s.options] as const))('%s', (_finding, options) => {
    const r = runSimulation(options);
    expect(r.safety?.message).toBeUndefined();
    expect(r.liveness).toMatchObject({ ok: true });
  });
});
