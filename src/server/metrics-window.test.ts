import { describe, expect, it } from 'vitest';
import { LatencyWindow } from './metrics-window.js';

describe('LatencyWindow', () => {
  it('gives rate and percentiles per slot, within one bucket (25 %) above the true value', () => {
    let now = 1_000_000;
    const w = new LatencyWindow(6, 1000, () => now);
    for (let i = 0; i < 99; i++) w.observe(0.001);
    w.observe(0.2, false);
    now += 1000;
    const pts = w.points();
    const first = pts.find((p) => p.t === 1_000_000)!;
    expect(first.rate).toBe(100);
    expect(first.errors).toBe(1);
    expect(first.p50).toBeGreaterThanOrEqual(1);
    expect(first.p50).toBeLessThanOrEqual(1.25);
    expect(first.p99).toBeGreaterThanOrEqual(1);
    expect(first.p99).toBeLessThanOrEqual(1.25);
    // The current slot has nothing yet.
    expect(pts.at(-1)).toMatchObject({ t: 1_001_000, rate: 0, p50: null });
  });

  it('observe with a count is that many operations', () => {
    let now = 1_000_000;
    const w = new LatencyWindow(6, 1000, () => now);
    w.observe(0.001, true, 99);
    w.observe(0.2, false, 1);
    now += 1000;
    const first = w.points().find((p) => p.t === 1_000_000)!;
    expect(first).toMatchObject({ rate: 100, errors: 1 });
    expect(first.p50).toBeLessThanOrEqual(1.25);
  });

  it('forgets slots older than the window and fills gaps with empty slots', () => {
    let now = 0;
    const w = new LatencyWindow(4, 1000, () => now);
    now = 10_000;
    w.observe(0.01);
    now = 12_500;
    w.observe(0.02);
    const pts = w.points();
    expect(pts.map((p) => p.t)).toEqual([9000, 10_000, 11_000, 12_000]);
    expect(pts.map((p) => p.rate > 0)).toEqual([false, true, false, true]);
    now = 100_000;
    expect(w.points().every((p) => p.rate === 0)).toBe(true);
  });
});
