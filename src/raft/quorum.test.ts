// Properties of the pure parts: majority math, the in-flight window, the unstable log.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Inflights } from './inflights.js';
import { majority, majorityValue, voteResult } from './quorum.js';

describe('majority math', () => {
  it('majority(n) is the smallest count that any two of intersect', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 50 }), (n) => {
        const q = majority(n);
        expect(2 * q).toBeGreaterThan(n); // two quorums always overlap
        expect(2 * (q - 1)).toBeLessThanOrEqual(n); // and it is the smallest such
      }),
    );
  });

  it('majorityValue is the largest value acknowledged by a majority', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 100 }), { minLength: 1, maxLength: 9 }), (acked) => {
        const ids = acked.map((_, i) => i + 1);
        const v = majorityValue(ids, (id) => acked[id - 1] as number, 0);
        const atLeast = (x: number) => acked.filter((a) => a >= x).length;
        expect(atLeast(v)).toBeGreaterThanOrEqual(majority(acked.length));
        // Nothing larger is held by a majority.
        expect(atLeast(v + 1)).toBeLessThan(majority(acked.length));
      }),
    );
  });

  it('majorityValue of no voters is the given default', () => {
    expect(majorityValue([], () => 5, 0)).toBe(0);
  });

  it('voteResult: won with a majority of grants, lost once a majority is impossible, pending otherwise', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom<boolean | undefined>(true, false, undefined), {
          minLength: 1,
          maxLength: 9,
        }),
        (answers) => {
          const ids = answers.map((_, i) => i + 1);
          const votes = new Map<number, boolean>();
          answers.forEach((a, i) => {
            if (a !== undefined) votes.set(i + 1, a);
          });
          const granted = answers.filter((a) => a === true).length;
          const missing = answers.filter((a) => a === undefined).length;
          const q = majority(answers.length);
          const expected = granted >= q ? 'won' : granted + missing >= q ? 'pending' : 'lost';
          expect(voteResult(ids, votes)).toBe(expected);
        },
      ),
    );
  });

  it('votes from non-voters do not count', () => {
    expect(
      voteResult(
        [1, 2, 3],
        new Map([
          [1, true],
          [9, true],
          [8, true],
        ]),
      ),
    ).toBe('pending');
  });
});

describe('Inflights ring', () => {
  it('behaves like a FIFO queue bounded by count and bytes', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('add' as const), bytes: fc.integer({ min: 0, max: 50 }) }),
      fc.record({ kind: fc.constant('free' as const), upTo: fc.integer({ min: 0, max: 200 }) }),
      fc.record({ kind: fc.constant('freeFirst' as const) }),
      fc.record({ kind: fc.constant('reset' as const) }),
    );
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 0, max: 120 }),
        fc.array(op, { maxLength: 200 }),
        (cap, maxBytes, ops) => {
          const inf = new Inflights(cap, maxBytes);
          let model: { index: number; bytes: number }[] = [];
          let next = 1;
          for (const o of ops) {
            if (o.kind === 'add') {
              if (inf.full()) continue;
              inf.add(next, o.bytes);
              model.push({ index: next, bytes: o.bytes });
              next++;
            } else if (o.kind === 'free') {
              inf.freeLE(o.upTo);
              model = model.filter((m) => m.index > o.upTo);
            } else if (o.kind === 'freeFirst') {
              inf.freeFirst();
              model = model.slice(1);
            } else {
              inf.reset();
              model = [];
            }
            const bytes = model.reduce((s, m) => s + m.bytes, 0);
            expect(inf.count).toBe(model.length);
            expect(inf.bytes).toBe(bytes);
            expect(inf.full()).toBe(model.length === cap || (maxBytes > 0 && bytes >= maxBytes));
            expect(inf.count).toBeLessThanOrEqual(cap);
          }
        },
      ),
    );
  });

  it('refuses to add beyond capacity', () => {
    const inf = new Inflights(2, 0);
    inf.add(1, 1);
    inf.add(2, 1);
    expect(() => inf.add(3, 1)).toThrow(/overflow/);
  });
});
