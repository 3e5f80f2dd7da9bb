import { describe, expect, it } from 'vitest';
import { LayoutError, UnknownLayoutError } from './errors.js';
import { defineLayout, type LayoutSpec } from './layout.js';
import { getLayout, PRESET_NAMES, PRESETS, resolveLayout } from './presets.js';

const base: LayoutSpec = {
  epochMs: 0,
  unitMs: 1,
  timestampBits: 41,
  datacenterBits: 5,
  workerBits: 5,
  sequenceBits: 12,
};

describe('presets', () => {
  it('twitter is 41/5/5/12 at 1 ms from 1288834974657, 4,096,000 IDs/s, 1024 generators', () => {
    const l = PRESETS.twitter;
    expect([l.timestampBits, l.datacenterBits, l.workerBits, l.sequenceBits]).toEqual([41, 5, 5, 12]);
    expect(l.epochMs).toBe(1288834974657);
    expect(l.unitMs).toBe(1);
    expect(l.idsPerSecond).toBe(4_096_000);
    expect(l.maxGenerators).toBe(1024);
    expect(l.endOfLifeMs).toBe(1288834974657 + 2 ** 41);
    expect([l.sequenceShift, l.workerShift, l.datacenterShift, l.timestampShift]).toEqual([0, 12, 17, 22]);
  });

  it('sonyflake puts the 8-bit sequence above the 16-bit machine id, 10 ms ticks from 2014-09-01', () => {
    const l = PRESETS.sonyflake;
    expect(l.epochMs).toBe(Date.parse('2014-09-01T00:00:00Z'));
    expect(l.unitMs).toBe(10);
    expect([l.timestampBits, l.sequenceBits, l.workerBits]).toEqual([39, 8, 16]);
    expect([l.workerShift, l.sequenceShift, l.timestampShift]).toEqual([0, 16, 24]);
    expect(l.idsPerSecond).toBe(25_600);
  });

  it('baidu is 28-bit seconds / 22-bit worker / 13-bit sequence from 2016-05-20, running out in 2024', () => {
    const l = PRESETS.baidu;
    expect(l.epochMs).toBe(Date.parse('2016-05-20T00:00:00Z'));
    expect([l.timestampBits, l.workerBits, l.sequenceBits, l.unitMs]).toEqual([28, 22, 13, 1000]);
    expect(new Date(l.endOfLifeMs).getUTCFullYear()).toBe(2024);
  });

  it('floe is 41/0/10/12 at 1 ms from 2026-01-01', () => {
    const l = PRESETS.floe;
    expect([l.timestampBits, l.datacenterBits, l.workerBits, l.sequenceBits]).toEqual([41, 0, 10, 12]);
    expect(l.epochMs).toBe(Date.parse('2026-01-01T00:00:00Z'));
    expect(new Date(l.endOfLifeMs).getUTCFullYear()).toBe(2095);
  });

  it('getLayout finds presets case-insensitively and names the known layouts otherwise', () => {
    expect(getLayout('Twitter')).toBe(PRESETS.twitter);
    expect(() => getLayout('nope')).toThrow(UnknownLayoutError);
    expect(() => getLayout('nope')).toThrow(
      /unknown layout "nope"; known layouts: floe, twitter, sonyflake, baidu/,
    );
    expect(PRESET_NAMES).toEqual(['floe', 'twitter', 'sonyflake', 'baidu']);
    expect(() => getLayout('toString')).toThrow(UnknownLayoutError);
  });

  it('resolveLayout validates raw specs and passes validated layouts through', () => {
    expect(resolveLayout(PRESETS.baidu)).toBe(PRESETS.baidu);
    expect(resolveLayout(base).idsPerSecond).toBe(4_096_000);
    expect(() => resolveLayout({ ...base, sequenceBits: 13 })).toThrow(LayoutError);
  });
});

describe('defineLayout refuses invalid layouts, naming the field and the allowed range', () => {
  // Patches may hold wrongly typed values on purpose (as from untyped JSON config).
  const cases: Array<[string, Record<string, unknown>, RegExp]> = [
    ['widths not summing to 63', { sequenceBits: 11 }, /sum|exactly 63/],
    [
      'negative worker bits',
      { workerBits: -1, sequenceBits: 18 },
      /workerBits = -1; allowed: an integer in \[0, 31\]/,
    ],
    [
      '32 sequence bits',
      { sequenceBits: 32, timestampBits: 21 },
      /sequenceBits = 32; allowed: an integer in \[0, 31\]/,
    ],
    [
      'fractional datacenter bits',
      { datacenterBits: 4.5 },
      /datacenterBits = 4.5; allowed: an integer in \[0, 31\]/,
    ],
    [
      'zero timestamp bits',
      { timestampBits: 0, sequenceBits: 53 },
      /timestampBits = 0; allowed: an integer in \[1, 63\]/,
    ],
    ['zero unit', { unitMs: 0 }, /unitMs = 0; allowed: an integer in \[1, /],
    ['fractional unit', { unitMs: 1.5 }, /unitMs = 1.5/],
    ['negative epoch', { epochMs: -1 }, /epochMs = -1; allowed: an integer in \[0, /],
    ['string epoch', { epochMs: '2020' }, /epochMs = "2020"; allowed/],
    [
      'unknown order',
      { order: 'time-first' },
      /order = "time-first"; allowed: 'node-sequence' or 'sequence-node'/,
    ],
    [
      'time bits outliving the Date range',
      { timestampBits: 53, datacenterBits: 0, workerBits: 0, sequenceBits: 10 },
      /timestampBits = 53; allowed: at most 52 with unitMs 1/,
    ],
  ];
  for (const [what, patch, message] of cases) {
    it(what, () => {
      let caught: unknown;
      try {
        defineLayout({ ...base, ...patch } as LayoutSpec);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(LayoutError);
      expect((caught as Error).message).toMatch(message);
    });
  }

  it('accepts 1-bit timestamps and 0-bit sequences', () => {
    const l = defineLayout({
      ...base,
      timestampBits: 33,
      datacenterBits: 0,
      workerBits: 30,
      sequenceBits: 0,
    });
    expect(l.maxSequence).toBe(0);
    expect(l.idsPerSecond).toBe(1000);
  });

  it('returns a frozen layout', () => {
    const l = defineLayout(base);
    expect(Object.isFrozen(l)).toBe(true);
  });
});
