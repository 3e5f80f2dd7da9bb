import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Bitset, zobristTable } from './bitset.js';

describe('Bitset', () => {
  it('matches a Set under random set/clear, with equal snapshots exactly for equal sets', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 130 }),
        fc.array(fc.tuple(fc.boolean(), fc.nat()), { maxLength: 300 }),
        (size, actions) => {
          const table = zobristTable(size);
          const bits = new Bitset(size, table);
          const model = new Set<number>();
          const seen: Array<{ members: string; snap: ReturnType<Bitset['snapshot']>; hash: number }> = [];
          for (const [add, raw] of actions) {
            const i = raw % size;
            if (add) {
              bits.set(i);
              model.add(i);
            } else {
              bits.clear(i);
              model.delete(i);
            }
            for (let j = 0; j < size; j++) expect(bits.has(j)).toBe(model.has(j));
            const members = [...model].sort((a, b) => a - b).join(',');
            const expectedHash = [...model].reduce((h, j) => (h ^ table[j]!) >>> 0, 0);
            expect(bits.hash).toBe(expectedHash);
            for (const s of seen) expect(bits.equalsSnapshot(s.snap)).toBe(s.members === members);
            seen.push({ members, snap: bits.snapshot(), hash: bits.hash });
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('keeps snapshots small when the low operations are all done', () => {
    const bits = new Bitset(1000, zobristTable(1000));
    for (let i = 0; i < 900; i++) bits.set(i);
    bits.set(950);
    const snap = bits.snapshot();
    expect(snap.base).toBe(28); // 900 / 32 = 28.1: words 0..27 are full
    expect(snap.words.length).toBe(29 - 28 + 1); // up to the word holding 950
  });
});
