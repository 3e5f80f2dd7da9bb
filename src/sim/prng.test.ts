import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_SEED, Prng } from './prng.js';

function draws(p: Prng, n: number): number[] {
  return Array.from({ length: n }, () => p.nextU32());
}

describe('Prng', () => {
  it('is a pure function of its seed', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX_SEED }), (seed) => {
        expect(draws(new Prng(seed), 8)).toEqual(draws(new Prng(seed), 8));
      }),
    );
  });

  it('gives different streams for neighbouring seeds, including ones that differ only above bit 32', () => {
    expect(draws(new Prng(1), 4)).not.toEqual(draws(new Prng(2), 4));
    expect(draws(new Prng(5), 4)).not.toEqual(draws(new Prng(5 + 2 ** 32), 4));
  });

  it('forks streams by name without advancing the parent', () => {
    const a = new Prng(42);
    const before = new Prng(42);
    const net = a.fork('network');
    expect(draws(a, 4)).toEqual(draws(before, 4));
    expect(draws(net, 4)).toEqual(draws(new Prng(42).fork('network'), 4));
    expect(draws(new Prng(42).fork('network'), 4)).not.toEqual(draws(new Prng(42).fork('faults'), 4));
  });

  it('keeps int(n) within [0, n) and range() within its inclusive bounds', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 32 }), fc.integer({ min: 1, max: 2 ** 32 }), (seed, n) => {
        const p = new Prng(seed);
        for (let i = 0; i < 20; i++) {
          const v = p.int(n);
          expect(Number.isInteger(v) && v >= 0 && v < n).toBe(true);
        }
        const r = p.range(-3, 3);
        expect(r >= -3 && r <= 3).toBe(true);
      }),
    );
  });

  it('is roughly uniform (chi-square over 10 buckets)', () => {
    const p = new Prng(7);
    const counts = new Array<number>(10).fill(0);
    const n = 100_000;
    for (let i = 0; i < n; i++) counts[p.int(10)]!++;
    const expected = n / 10;
    const chi = counts.reduce((s, c) => s + (c - expected) ** 2 / expected, 0);
    // 9 degrees of freedom: p = 0.001 at 27.9. A correct generator fails this once in a thousand seeds;
    // the seed is fixed, so the test is deterministic.
    expect(chi).toBeLessThan(27.9);
  });

  it('never picks a zero weight', () => {
    const p = new Prng(3);
    for (let i = 0; i < 2000; i++) expect(p.weighted({ a: 0, b: 1, c: 0 })).toBe('b');
  });

  it('rejects seeds and bounds outside their documented ranges', () => {
    expect(() => new Prng(-1)).toThrow(/seed must be an integer/);
    expect(() => new Prng(1.5)).toThrow(/seed must be an integer/);
    expect(() => new Prng(1).int(0)).toThrow(/\[1, 2\^32\]/);
    expect(() => new Prng(1).range(3, 2)).toThrow(/empty/);
    expect(() => new Prng(1).weighted({ a: 0 })).toThrow(/positive weight/);
  });

  it('shuffles into a permutation', () => {
    const p = new Prng(11);
    const s = p.shuffled([1, 2, 3, 4, 5, 6]);
    expect([...s].sort()).toEqual([1, 2, 3, 4, 5, 6]);
  });
});
