import { Snowflake as SapphireSnowflake } from '@sapphire/snowflake';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compose, decode, MAX_ID, toHex, toId } from './codec.js';
import { DatacenterIdRangeError, IdPartRangeError, InvalidIdError, WorkerIdRangeError } from './errors.js';
import { defineLayout, type Layout, MAX_DATE_MS } from './layout.js';
import { PRESET_NAMES, PRESETS } from './presets.js';

/** Random valid layouts: widths summing to 63 (each non-time field <= 31), ending within the Date range. */
const arbLayout: fc.Arbitrary<Layout> = fc
  .record({
    datacenterBits: fc.integer({ min: 0, max: 8 }),
    workerBits: fc.integer({ min: 0, max: 16 }),
    sequenceBits: fc.integer({ min: 0, max: 22 }),
    unitMs: fc.constantFrom(1, 2, 7, 10, 1000, 60_000),
    epochMs: fc.integer({ min: 0, max: 2_000_000_000_000 }),
    sequenceNode: fc.boolean(),
  })
  .map((r) => {
    const bits = [r.datacenterBits, r.workerBits, r.sequenceBits];
    let timestampBits = 63 - bits[0]! - bits[1]! - bits[2]!;
    // Move surplus time bits into the other fields (each capped at 31) until the layout ends within the Date range.
    for (let i = 0; i < 3; i++) {
      while (r.epochMs + 2 ** timestampBits * r.unitMs > MAX_DATE_MS && bits[i]! < 31) {
        timestampBits--;
        bits[i]!++;
      }
    }
    return defineLayout({
      name: 'random',
      epochMs: r.epochMs,
      unitMs: r.unitMs,
      timestampBits,
      datacenterBits: bits[0]!,
      workerBits: bits[1]!,
      sequenceBits: bits[2]!,
      order: r.sequenceNode ? 'sequence-node' : 'node-sequence',
    });
  });

/** Parts that fit `layout`, with a tick-aligned timestamp. */
function arbParts(layout: Layout) {
  return fc.record({
    tick: fc.integer({ min: 0, max: layout.maxTick }),
    datacenter: fc.integer({ min: 0, max: layout.maxDatacenter }),
    worker: fc.integer({ min: 0, max: layout.maxWorker }),
    sequence: fc.integer({ min: 0, max: layout.maxSequence }),
  });
}

describe('compose / decode', () => {
  it('round-trips parts for every preset', () => {
    for (const name of PRESET_NAMES) {
      const layout = PRESETS[name];
      fc.assert(
        fc.property(arbParts(layout), (p) => {
          const timestamp = layout.epochMs + p.tick * layout.unitMs;
          const id = compose({ ...p, timestamp }, name);
          expect(id).toBeGreaterThanOrEqual(0n);
          expect(id).toBeLessThanOrEqual(MAX_ID);
          const back = decode(id, name);
          expect(back).toEqual({ ...p, tick: undefined, timestamp, time: new Date(timestamp) });
          expect(compose(back, name)).toBe(id);
        }),
        { numRuns: 300 },
      );
    }
  });

  it('round-trips parts and IDs for random valid layouts', () => {
    fc.assert(
      fc.property(
        arbLayout.chain((l) => fc.tuple(fc.constant(l), arbParts(l), fc.bigInt({ min: 0n, max: MAX_ID }))),
        ([layout, p, anyId]) => {
          const timestamp = layout.epochMs + p.tick * layout.unitMs;
          const id = compose(
            { timestamp, datacenter: p.datacenter, worker: p.worker, sequence: p.sequence },
            layout,
          );
          const d = decode(id, layout);
          expect([d.timestamp, d.datacenter, d.worker, d.sequence]).toEqual([
            timestamp,
            p.datacenter,
            p.worker,
            p.sequence,
          ]);
          // Every 63-bit value is some layout's ID: decode then compose is the identity.
          expect(compose(decode(anyId, layout), layout)).toBe(anyId);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('agrees with @sapphire/snowflake on the twitter layout', () => {
    const sapphire = new SapphireSnowflake(PRESETS.twitter.epochMs);
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: MAX_ID }), (id) => {
        const theirs = sapphire.deconstruct(id);
        const ours = decode(id, 'twitter');
        expect(BigInt(ours.timestamp)).toBe(theirs.timestamp);
        expect(BigInt(ours.datacenter)).toBe(theirs.workerId);
        expect(BigInt(ours.worker)).toBe(theirs.processId);
        expect(BigInt(ours.sequence)).toBe(theirs.increment);
      }),
    );
  });

  it('lays sonyflake out as time | sequence | machine', () => {
    const epoch = PRESETS.sonyflake.epochMs;
    expect(compose({ timestamp: epoch + 50, sequence: 3, worker: 7 }, 'sonyflake')).toBe(
      (5n << 24n) | (3n << 16n) | 7n,
    );
  });

  it('rounds timestamps down to the tick and accepts Dates', () => {
    const epoch = PRESETS.baidu.epochMs;
    const id = compose({ timestamp: new Date(epoch + 2999), worker: 1 }, 'baidu');
    expect(decode(id, 'baidu').timestamp).toBe(epoch + 2000);
  });

  it('refuses parts out of range, naming the part and its range', () => {
    const t = PRESETS.twitter.epochMs;
    expect(() => compose({ timestamp: t, worker: 32 }, 'twitter')).toThrow(WorkerIdRangeError);
    expect(() => compose({ timestamp: t, worker: 32 }, 'twitter')).toThrow(
      'worker 32 is out of range: worker must be an integer in [0, 31] for layout twitter',
    );
    expect(() => compose({ timestamp: t, datacenter: -1 }, 'twitter')).toThrow(DatacenterIdRangeError);
    expect(() => compose({ timestamp: t, datacenter: -1 }, 'twitter')).toThrow(
      /datacenter must be an integer in \[0, 31\]/,
    );
    expect(() => compose({ timestamp: t, sequence: 4096 }, 'twitter')).toThrow(
      /sequence must be an integer in \[0, 4095\]/,
    );
    expect(() => compose({ timestamp: t - 1 }, 'twitter')).toThrow(IdPartRangeError);
    expect(() => compose({ timestamp: t - 1 }, 'twitter')).toThrow(
      `timestamp ${t - 1} is out of range: timestamp must be an integer in [${t}, ${t + 2 ** 41 - 1}]`,
    );
    expect(() => compose({ timestamp: Number.NaN }, 'twitter')).toThrow(/timestamp NaN is out of range/);
    expect(() => compose({ timestamp: t, worker: 1.5 }, 'twitter')).toThrow(WorkerIdRangeError);
  });
});

describe('toId', () => {
  it('parses decimal and hex text, numbers and bigints', () => {
    expect(toId(' 42 ')).toBe(42n);
    expect(toId('0x2A')).toBe(42n);
    expect(toId(42)).toBe(42n);
    expect(toId(MAX_ID)).toBe(MAX_ID);
    expect(toId(MAX_ID.toString())).toBe(MAX_ID);
    expect(toHex(42n)).toBe('0x000000000000002a');
  });

  it('refuses what is not an id, saying why and what an id is', () => {
    for (const bad of ['', 'abc', '-1', '1e5', '12.5', '0x', ' ', '１２']) {
      expect(() => toId(bad)).toThrow(InvalidIdError);
    }
    expect(() => toId('abc')).toThrow(
      /invalid id "abc": not a decimal or 0x-hex integer; an id is an integer in \[0, 2\^63 - 1\]/,
    );
    expect(() => toId((MAX_ID + 1n).toString())).toThrow(/larger than 2\^63 - 1/);
    expect(() => toId(-1n)).toThrow(/negative/);
    expect(() => toId(2 ** 60)).toThrow(/not a safe integer/);
    expect(() => toId(1.5)).toThrow(InvalidIdError);
    expect(() => decode('x1', 'twitter')).toThrow(InvalidIdError);
  });
});
