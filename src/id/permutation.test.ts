import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IdPartRangeError, OptionError } from './errors.js';
import { IdPermutation } from './permutation.js';

const MAX63 = (1n << 63n) - 1n;

describe('IdPermutation', () => {
  const p = new IdPermutation({ secret: 'test secret' });

  it('round-trips random 63-bit values and stays within 63 bits', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: MAX63 }), (v) => {
        const e = p.encode(v);
        expect(e >= 0n && e <= MAX63).toBe(true);
        expect(p.decode(e)).toBe(v);
        expect(p.encode(p.decode(v))).toBe(v);
      }),
      { numRuns: 2000 },
    );
  });

  it('round-trips the edges', () => {
    for (const v of [0n, 1n, 2n, MAX63, MAX63 - 1n, 1n << 62n, (1n << 32n) - 1n, 1n << 32n]) {
      expect(p.decode(p.encode(v))).toBe(v);
    }
  });

  it('is a bijection: exhaustively for every width 2..14, odd widths by cycle-walking', () => {
    for (let width = 2; width <= 14; width++) {
      const q = new IdPermutation({ secret: `w${width}`, width });
      const size = 2 ** width;
      const seen = new Uint8Array(size);
      let fixedPoints = 0;
      for (let v = 0; v < size; v++) {
        const e = Number(q.encode(BigInt(v)));
        expect(e).toBeGreaterThanOrEqual(0);
        expect(e).toBeLessThan(size);
        expect(seen[e]).toBe(0);
        seen[e] = 1;
        expect(q.decode(BigInt(e))).toBe(BigInt(v));
        if (e === v) fixedPoints++;
      }
      // A random permutation has ~1 fixed point; far more would mean the rounds do little.
      expect(fixedPoints).toBeLessThan(Math.max(8, size / 16));
    }
  });

  it('has no collisions on a sample of consecutive IDs and scatters them', () => {
    const base = 1_234_567_890_123_456n;
    const out = new Set<bigint>();
    let ordered = 0;
    let prev = -1n;
    for (let i = 0n; i < 20_000n; i++) {
      const e = p.encode(base + i);
      out.add(e);
      if (e > prev) ordered++;
      prev = e;
    }
    expect(out.size).toBe(20_000);
    // Consecutive inputs should not keep their order (about half go up, half down).
    expect(ordered).toBeGreaterThan(8_000);
    expect(ordered).toBeLessThan(12_000);
  });

  it('depends on the secret', () => {
    const other = new IdPermutation({ secret: 'another secret' });
    let same = 0;
    for (let i = 0n; i < 1000n; i++) if (p.encode(i) === other.encode(i)) same++;
    expect(same).toBe(0);
    expect(new IdPermutation({ secret: new TextEncoder().encode('test secret') }).encode(42n)).toBe(
      p.encode(42n),
    );
  });

  it('supports the full 64-bit width', () => {
    const w = new IdPermutation({ secret: 's', width: 64 });
    const max = (1n << 64n) - 1n;
    for (const v of [0n, max, 1n << 63n, 12345n]) expect(w.decode(w.encode(v))).toBe(v);
  });

  it('refuses values and options out of range, naming them', () => {
    expect(() => p.encode(-1n)).toThrow(IdPartRangeError);
    expect(() => p.encode(MAX63 + 1n)).toThrow(
      `value ${MAX63 + 1n} is out of range: value must be an integer in [0, ${MAX63}] for a 63-bit permutation`,
    );
    expect(() => p.decode(1n << 63n)).toThrow(IdPartRangeError);
    expect(() => new IdPermutation({ secret: '' })).toThrow(OptionError);
    expect(() => new IdPermutation({ secret: '' })).toThrow(
      /secret = ""; allowed: a non-empty string or Uint8Array/,
    );
    expect(() => new IdPermutation({ secret: 's', width: 65 })).toThrow(
      /width = 65; allowed: an integer in \[2, 64\]/,
    );
    expect(() => new IdPermutation({ secret: 's', rounds: 3 })).toThrow(
      /rounds = 3; allowed: an integer in \[4, 32\]/,
    );
  });
});

describe('IdPermutation stability', () => {
  it('gives the same codes for the same secret on every platform and release (golden values)', () => {
    const p = new IdPermutation({ secret: 'golden' });
    expect([p.encode(0n), p.encode(1n), p.encode(2124365429366599680n)]).toEqual([
      3505400048765188081n,
      8159912963551490483n,
      2810514056016211860n,
    ]);
  });
});
