import { describe, expect, it } from 'vitest';
import { leaseMarginFor, resolveConfig } from './config.js';
import { RaftConfigError } from './types.js';

const base = { id: 1, heartbeatTicks: 1, random: () => 0 };

describe('lease margin derived from the clock drift bound', () => {
  it('is E − ⌊(E − 1)(1 − ε) / (1 + ε)⌋', () => {
    expect(leaseMarginFor(9, 0.1)).toBe(3); // the old max(1, ⌊9/5⌋) = 1 is unsafe (issue 9 item 5)
    expect(leaseMarginFor(10, 0.1)).toBe(3);
    expect(leaseMarginFor(13, 0.1)).toBe(4);
    expect(leaseMarginFor(20, 0.1)).toBe(5);
    expect(leaseMarginFor(10, 0)).toBe(1); // a voter's first tick may come right after receipt
  });

  it('is the smallest margin for which the lease ends before any voter can vote again', () => {
    for (let e = 2; e <= 100; e++) {
      for (const eps of [0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.45]) {
        const m = leaseMarginFor(e, eps);
        const voterTicks = (e - 1) * (1 - eps);
        if (m < e) expect((e - m) * (1 + eps)).toBeLessThanOrEqual(voterTicks + 1e-9);
        expect((e - m + 1) * (1 + eps)).toBeGreaterThan(voterTicks - 1e-9);
      }
    }
  });

  it('is the default, and refuses a lease that no election timeout leaves room for', () => {
    expect(resolveConfig({ ...base, electionTicks: 9 }).leaseMarginTicks).toBe(3);
    expect(resolveConfig({ ...base, electionTicks: 9, clockDriftBound: 0.2 }).leaseMarginTicks).toBe(
      leaseMarginFor(9, 0.2),
    );
    expect(resolveConfig({ ...base, electionTicks: 9, leaseMarginTicks: 0 }).leaseMarginTicks).toBe(0);
    expect(() => resolveConfig({ ...base, electionTicks: 2, leaderLease: true })).toThrow(RaftConfigError);
    expect(() => resolveConfig({ ...base, electionTicks: 2, leaderLease: true })).toThrow(
      /raise electionTicks/,
    );
    expect(() => resolveConfig({ ...base, electionTicks: 9, clockDriftBound: 0.5 })).toThrow(
      /clockDriftBound must be a number in \[0, 0.5\)/,
    );
  });
});
