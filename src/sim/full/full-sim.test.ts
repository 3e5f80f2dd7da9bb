import { describe, expect, it } from 'vitest';
import { runFullSim } from './run.js';

describe('full-stack simulation', () => {
  it('is deterministic: one seed run twice gives the same trace hash', async () => {
    const a = await runFullSim({ seed: 42, seconds: 3 });
    const b = await runFullSim({ seed: 42, seconds: 3 });
    expect(a.traceLines).toBeGreaterThan(0);
    expect(b.traceHash).toBe(a.traceHash);
    expect(b.stats).toEqual(a.stats);
    const c = await runFullSim({ seed: 43, seconds: 3 });
    expect(c.traceHash).not.toBe(a.traceHash);
  });

  it('runs the production node, storage and HTTP API with no failure on a quiet network', async () => {
    const r = await runFullSim({ seed: 7, seconds: 5 });
    expect(r.failure).toBeUndefined();
    expect(r.stats.acknowledgedWrites).toBeGreaterThan(10);
    expect(r.stats.unattributedTimers).toBe(0);
  });
});
