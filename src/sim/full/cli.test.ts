import { describe, expect, it } from 'vitest';
import { decodeSeedShare, encodeSeedShare } from './cli.js';

describe('sim:full worker seed shares', () => {
  it('a 47,000-seed sweep over 2 jobs passes each worker its share in a few bytes (E2BIG before)', () => {
    const seeds = Array.from({ length: 47_000 }, (_, i) => 400_000 + i);
    for (let job = 0; job < 2; job++) {
      const share = seeds.filter((_, i) => i % 2 === job);
      const text = encodeSeedShare(share);
      expect(text.length).toBeLessThan(40);
      expect(decodeSeedShare(text)).toEqual(share);
    }
  });

  it('round-trips shares that are not one progression', () => {
    for (const share of [[7], [1, 2, 3, 10, 20, 30, 31], [5, 5, 9], [100, 50, 0]]) {
      expect(decodeSeedShare(encodeSeedShare(share))).toEqual(share);
    }
  });
});
