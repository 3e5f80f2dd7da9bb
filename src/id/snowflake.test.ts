import { describe, expect, it } from 'vitest';
import { decode } from './codec.js';
import {
  BoundError,
  CeilingReachedError,
  ClockMovedBackwardsError,
  DatacenterIdRangeError,
  EpochInFutureError,
  OptionError,
  TimestampOverflowError,
  WorkerIdRangeError,
} from './errors.js';
import { defineLayout, type LayoutSpec } from './layout.js';
import { PRESETS } from './presets.js';
import { Snowflake, type SnowflakeOptions } from './snowflake.js';
import { ManualClock } from './time-source.js';

const T0 = Date.parse('2026-06-01T00:00:00Z');

/** A twitter-layout generator on a manual clock at T0. */
function gen(options: SnowflakeOptions = {}, clock = new ManualClock(T0)) {
  return { clock, g: new Snowflake({ layout: 'twitter', clock, ...options }) };
}

/** 4 IDs per 1 ms tick: exhaustion is easy to reach. */
const tiny: LayoutSpec = {
  name: 'tiny',
  epochMs: Date.UTC(2020, 0, 1),
  unitMs: 1,
  timestampBits: 41,
  datacenterBits: 0,
  workerBits: 20,
  sequenceBits: 2,
};

function expectIncreasing(ids: readonly bigint[]): void {
  for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
}

describe('Snowflake: basics', () => {
  it('issues increasing IDs carrying the time, datacenter, worker and sequence', () => {
    const { g } = gen({ worker: 9, datacenter: 3 });
    const ids = [g.next(), g.next(), g.next()];
    expectIncreasing(ids);
    expect(ids.map((id) => decode(id, 'twitter'))).toEqual(
      [0, 1, 2].map((sequence) => ({
        timestamp: T0,
        time: new Date(T0),
        datacenter: 3,
        worker: 9,
        sequence,
      })),
    );
    expect(g.lastTimestamp).toBe(T0);
  });

  it('restarts the sequence at 0 in a new tick', () => {
    const { g, clock } = gen();
    g.next();
    g.next();
    clock.advance(1);
    expect(decode(g.next(), 'twitter')).toMatchObject({ timestamp: T0 + 1, sequence: 0 });
  });

  it('nextString is the decimal form', () => {
    const { g } = gen({ worker: 1 });
    const s = g.nextString();
    expect(s).toMatch(/^[0-9]+$/);
    expect(decode(s, 'twitter')).toMatchObject({ worker: 1, sequence: 0 });
  });

  it('uses the sonyflake layout with sequence above machine id', () => {
    const clock = new ManualClock(T0);
    const g = new Snowflake({ layout: 'sonyflake', worker: 0xbeef, clock });
    const a = g.next();
    const b = g.next();
    expect(b - a).toBe(1n << 16n);
    expect(decode(b, 'sonyflake')).toMatchObject({ worker: 0xbeef, sequence: 1, timestamp: T0 });
  });

  it('lastTimestamp is undefined until the first ID', () => {
    const { g } = gen();
    expect(g.lastTimestamp).toBeUndefined();
  });
});

describe('Snowflake: construction errors name the field and range', () => {
  it('worker and datacenter out of range', () => {
    expect(() => gen({ worker: 32 })).toThrow(WorkerIdRangeError);
    expect(() => gen({ worker: 32 })).toThrow(
      'worker 32 is out of range: worker must be an integer in [0, 31] for layout twitter',
    );
    expect(() => gen({ worker: -1 })).toThrow(WorkerIdRangeError);
    expect(() => gen({ worker: 1.5 })).toThrow(WorkerIdRangeError);
    expect(() => gen({ datacenter: 32 })).toThrow(DatacenterIdRangeError);
    expect(() => gen({ datacenter: 32 })).toThrow(/datacenter must be an integer in \[0, 31\]/);
    expect(() => new Snowflake({ layout: 'floe', datacenter: 1, clock: new ManualClock(T0) })).toThrow(
      /datacenter must be an integer in \[0, 0\] for layout floe/,
    );
  });

  it('epoch after the clock', () => {
    const clock = new ManualClock(PRESETS.floe.epochMs - 10);
    expect(() => new Snowflake({ layout: 'floe', clock })).toThrow(EpochInFutureError);
    expect(() => new Snowflake({ layout: 'floe', clock })).toThrow(
      /epochMs 2026-01-01T00:00:00.000Z is 10 ms after/,
    );
  });

  it('a layout that has already run out names the date', () => {
    const clock = new ManualClock(T0);
    expect(() => new Snowflake({ layout: 'baidu', clock })).toThrow(TimestampOverflowError);
    expect(() => new Snowflake({ layout: 'baidu', clock })).toThrow(
      `layout baidu ran out of time on ${new Date(PRESETS.baidu.endOfLifeMs).toISOString()}: its 28 timestamp bits are exhausted`,
    );
  });

  it('bad options', () => {
    expect(() => gen({ backwardsToleranceMs: -1 })).toThrow(OptionError);
    expect(() => gen({ backwardsToleranceMs: -1 })).toThrow(
      'backwardsToleranceMs = -1; allowed: a finite number >= 0',
    );
    expect(() => gen({ maxLeadMs: Number.NaN })).toThrow(/maxLeadMs = NaN/);
    expect(() => gen({ onClockBackwards: 'skip' as 'wait' })).toThrow(
      /onClockBackwards = "skip"; allowed: 'wait' or 'borrow'/,
    );
    expect(() => gen({ onSequenceExhausted: 'x' as 'wait' })).toThrow(/onSequenceExhausted/);
    expect(() => gen({}, new ManualClock(Number.NaN))).toThrow(
      /clock.now\(\) = NaN; allowed: a finite number of ms/,
    );
    expect(() => gen({ floor: T0 + 10, ceiling: T0 })).toThrow(BoundError);
  });
});

describe('Snowflake: sequence exhaustion', () => {
  it('wait mode waits for the next tick', () => {
    const clock = new ManualClock(T0);
    const g = new Snowflake({ layout: tiny, clock });
    const ids = Array.from({ length: 9 }, () => g.next());
    expectIncreasing(ids);
    expect(ids.map((id) => decode(id, tiny).timestamp)).toEqual([
      T0,
      T0,
      T0,
      T0,
      T0 + 1,
      T0 + 1,
      T0 + 1,
      T0 + 1,
      T0 + 2,
    ]);
    expect(clock.waits).toBeGreaterThanOrEqual(2);
    expect(clock.now()).toBe(T0 + 2); // the wait moved the clock; IDs never ran ahead of it
  });

  it('borrow mode takes the next tick at once, up to maxLeadMs ahead, then waits', () => {
    const clock = new ManualClock(T0);
    const g = new Snowflake({ layout: tiny, clock, onSequenceExhausted: 'borrow', maxLeadMs: 2 });
    const stamps: number[] = [];
    for (let i = 0; i < 12; i++) {
      stamps.push(decode(g.next(), tiny).timestamp);
      expect(stamps.at(-1)! - clock.now()).toBeLessThanOrEqual(2);
    }
    // ticks T0, T0+1, T0+2 without waiting, then the lead bound forces a wait.
    expect(stamps.slice(0, 12)).toEqual([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2].map((d) => T0 + d));
    expect(clock.waits).toBe(0);
    g.next();
    expect(clock.waits).toBeGreaterThan(0);
    expect(clock.now()).toBe(T0 + 1);
    expect(g.lastTimestamp).toBe(T0 + 3);
  });

  it('a 0-bit sequence issues one ID per tick', () => {
    const clock = new ManualClock(T0);
    const layout = defineLayout({ ...tiny, workerBits: 22, sequenceBits: 0 });
    const g = new Snowflake({ layout, clock });
    const ids = [g.next(), g.next(), g.next()];
    expectIncreasing(ids);
    expect(ids.map((id) => decode(id, layout).timestamp)).toEqual([T0, T0 + 1, T0 + 2]);
  });
});

describe('Snowflake: clock moving backwards', () => {
  it('wait mode waits (on the clock) when the clock moves back within the tolerance', () => {
    const { g, clock } = gen({ backwardsToleranceMs: 5 });
    const a = g.next();
    clock.advance(-3);
    const b = g.next();
    expect(b > a).toBe(true);
    expect(clock.waits).toBeGreaterThan(0);
    expect(clock.now()).toBe(T0);
  });

  it('borrow mode keeps counting in the last tick without waiting', () => {
    const { g, clock } = gen({ onClockBackwards: 'borrow', backwardsToleranceMs: 5 });
    const a = g.next();
    clock.advance(-4);
    const b = g.next();
    expect(b).toBe(a + 1n);
    expect(clock.waits).toBe(0);
  });

  it('refuses beyond the tolerance, saying by how much the clock moved, in both modes', () => {
    for (const mode of ['wait', 'borrow'] as const) {
      const { g, clock } = gen({ onClockBackwards: mode, backwardsToleranceMs: 5 });
      g.next();
      clock.advance(-50);
      let caught: unknown;
      try {
        g.next();
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(ClockMovedBackwardsError);
      expect((caught as ClockMovedBackwardsError).movedMs).toBe(50);
      expect((caught as Error).message).toBe(
        'clock moved backwards by 50 ms (tolerance 5 ms); refusing to generate ids',
      );
      // Once the clock is back, the generator carries on, still increasing.
      const before = g.lastTimestamp!;
      clock.advance(51);
      expect(decode(g.next(), 'twitter').timestamp).toBeGreaterThan(before);
    }
  });

  it('a clock that falls further back while waiting is refused, not waited for forever', () => {
    let reads = 0;
    const clock = {
      t: T0,
      now() {
        reads++;
        return this.t;
      },
      waitUntil() {
        this.t -= 100; // each wait makes things worse
      },
    };
    const g = new Snowflake({ layout: 'twitter', clock, backwardsToleranceMs: 5 });
    g.next();
    clock.t -= 2;
    expect(() => g.next()).toThrow(ClockMovedBackwardsError);
    expect(reads).toBeLessThan(10);
  });

  it('a clock returning NaN later is refused with an OptionError', () => {
    const { g, clock } = gen();
    g.next();
    clock.set(Number.NaN);
    expect(() => g.next()).toThrow(/clock.now\(\) = NaN/);
  });
});

describe('Snowflake: floor and ceiling', () => {
  it('never issues at or below the floor', () => {
    const { g } = gen({ floor: T0 });
    const first = decode(g.next(), 'twitter');
    expect(first.timestamp).toBeGreaterThan(T0);
  });

  it('a floor ahead of the clock within the tolerance: wait mode waits past it', () => {
    const { g, clock } = gen({ floor: T0 + 3, backwardsToleranceMs: 5 });
    expect(decode(g.next(), 'twitter').timestamp).toBe(T0 + 4);
    expect(clock.now()).toBe(T0 + 4);
  });

  it('a floor ahead of the clock within the tolerance: borrow mode starts above it at once', () => {
    const { g, clock } = gen({
      floor: T0 + 3,
      onClockBackwards: 'borrow',
      onSequenceExhausted: 'borrow',
      maxLeadMs: 10,
    });
    expect(decode(g.next(), 'twitter').timestamp).toBe(T0 + 4);
    expect(clock.now()).toBe(T0);
  });

  it('a floor far ahead of the clock is refused as the clock being behind the floor', () => {
    const { g } = gen({ floor: T0 + 1000, backwardsToleranceMs: 5 });
    expect(() => g.next()).toThrow(ClockMovedBackwardsError);
    expect(() => g.next()).toThrow(/clock is 1000 ms behind the floor/);
  });

  it('setFloor raises the floor: the rest of the current tick is skipped', () => {
    const { g, clock } = gen();
    g.next();
    g.setFloor(T0);
    clock.advance(0.5);
    expect(decode(g.next(), 'twitter').timestamp).toBe(T0 + 1);
    expect(g.floor).toBe(T0);
  });

  it('stops at the ceiling with CeilingReachedError, and goes on when it is raised', () => {
    const clock = new ManualClock(T0);
    const g = new Snowflake({ layout: tiny, clock, ceiling: T0 + 1 });
    for (let i = 0; i < 8; i++) g.next(); // ticks T0 and T0+1 used up
    let caught: unknown;
    try {
      g.next();
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(CeilingReachedError);
    expect((caught as Error).message).toMatch(
      /ceiling reached: the next id would have a timestamp after the ceiling/,
    );
    expect(clock.now()).toBe(T0 + 1); // refused rather than waiting for a tick it may not use
    expect(g.lastTimestamp).toBe(T0 + 1);
    g.setCeiling(T0 + 10);
    expect(decode(g.next(), tiny).timestamp).toBe(T0 + 2);
  });

  it('a clock past the ceiling is refused', () => {
    const { g, clock } = gen({ ceiling: T0 + 5 });
    g.next();
    clock.advance(6);
    expect(() => g.next()).toThrow(CeilingReachedError);
  });

  it('borrow mode does not borrow past the ceiling', () => {
    const clock = new ManualClock(T0);
    const g = new Snowflake({ layout: tiny, clock, ceiling: T0, onSequenceExhausted: 'borrow' });
    for (let i = 0; i < 4; i++) g.next();
    expect(() => g.next()).toThrow(CeilingReachedError);
  });

  it('floors and ceilings only go up, and the floor stays at or below the ceiling', () => {
    const { g } = gen({ floor: T0 - 10, ceiling: T0 + 10 });
    expect(() => g.setFloor(T0 - 11)).toThrow(BoundError);
    expect(() => g.setFloor(T0 - 11)).toThrow(
      `floor ${T0 - 11} refused: floor must be >= the current floor ${T0 - 10}`,
    );
    expect(() => g.setCeiling(T0 + 9)).toThrow(/ceiling must be >= the current ceiling/);
    expect(() => g.setFloor(T0 + 11)).toThrow(/floor must be <= the ceiling/);
    expect(() => g.setFloor(Number.NaN)).toThrow(/floor must be a finite number/);
    g.setFloor(T0 - 5);
    g.setCeiling(T0 + 20);
    expect([g.floor, g.ceiling]).toEqual([T0 - 5, T0 + 20]);
  });
});

describe('Snowflake: timestamp overflow', () => {
  it('names the date the layout ran out, and refuses instead of waiting', () => {
    const layout = defineLayout({
      ...tiny,
      name: 'short-lived',
      timestampBits: 4,
      workerBits: 57 - 31,
      datacenterBits: 31,
    });
    const clock = new ManualClock(layout.epochMs + 15);
    const g = new Snowflake({ layout, clock });
    for (let i = 0; i < 4; i++) g.next();
    expect(() => g.next()).toThrow(TimestampOverflowError);
    expect(() => g.next()).toThrow(
      `layout short-lived ran out of time on ${new Date(layout.epochMs + 16).toISOString()}`,
    );
    clock.advance(5);
    expect(() => g.next()).toThrow(TimestampOverflowError);
  });
});

describe('Snowflake: nextBatch', () => {
  it('returns increasing IDs continuing the sequence, across ticks', () => {
    const { g, clock } = gen({ worker: 5, datacenter: 1 });
    const first = g.next();
    const batch = g.nextBatch(10_000);
    expect(batch.length).toBe(10_000);
    expect(batch[0]).toBe(first + 1n);
    expectIncreasing([first, ...batch]);
    const parts = [...batch].map((id) => decode(id, 'twitter'));
    expect(parts.every((p) => p.worker === 5 && p.datacenter === 1)).toBe(true);
    expect(parts.at(-1)!.timestamp).toBe(T0 + 2); // 10,001 IDs at 4096 per tick
    expect(clock.now()).toBe(T0 + 2);
    expect(g.next() > batch.at(-1)!).toBe(true);
  });

  it('matches next() one by one', () => {
    const a = gen({ worker: 7 });
    const b = gen({ worker: 7 });
    const viaNext = Array.from({ length: 9000 }, () => a.g.next());
    const viaBatch = [...b.g.nextBatch(9000)];
    expect(viaBatch).toEqual(viaNext);
  });

  it('handles layouts whose sequence field crosses bit 32', () => {
    const layout = defineLayout({
      name: 'straddle',
      epochMs: Date.UTC(2020, 0, 1),
      unitMs: 1,
      timestampBits: 24,
      datacenterBits: 20,
      workerBits: 11,
      sequenceBits: 8,
      order: 'sequence-node',
    });
    const clock = new ManualClock(Date.UTC(2020, 0, 1, 1));
    const g = new Snowflake({ layout, clock, worker: 2047, datacenter: 12345 });
    const batch = g.nextBatch(1000);
    expectIncreasing([...batch]);
    const parts = [...batch].map((id) => decode(id, layout));
    expect(parts.map((p) => p.sequence)).toEqual(Array.from({ length: 1000 }, (_, i) => i % 256));
    expect(parts.every((p) => p.worker === 2047 && p.datacenter === 12345)).toBe(true);
  });

  it('fill writes a slice of a reused array', () => {
    const { g } = gen();
    const out = new BigInt64Array(10);
    g.fill(out, 2, 5);
    expect(out[0]).toBe(0n);
    expect(out[7]).toBe(0n);
    expectIncreasing([...out.subarray(2, 7)]);
    expect(() => g.fill(out, 8, 5)).toThrow(/count = 5; allowed: an integer in \[0, 2\]/);
    expect(() => g.nextBatch(-1)).toThrow(/n = -1; allowed/);
  });

  it('obeys borrow mode and the ceiling', () => {
    const clock = new ManualClock(T0);
    const g = new Snowflake({
      layout: tiny,
      clock,
      onSequenceExhausted: 'borrow',
      maxLeadMs: 100,
      ceiling: T0 + 2,
    });
    const batch = g.nextBatch(12);
    expect(decode(batch[11]!, tiny).timestamp).toBe(T0 + 2);
    expect(clock.waits).toBe(0);
    expect(() => g.nextBatch(1)).toThrow(CeilingReachedError);
  });
});

describe('Snowflake: guard hook', () => {
  it('is called with the clock reading on every slow path and after every wait, never on the fast path', () => {
    const seen: number[] = [];
    const { clock, g } = gen({ layout: tiny, guard: (now) => seen.push(now) });
    g.next(); // first ID: slow path
    expect(seen).toEqual([T0]);
    g.next();
    g.next();
    g.next(); // same tick, sequence left: fast path
    expect(seen).toEqual([T0]);
    g.next(); // tick used up: slow path, then a wait for the next tick, then the guard again
    expect(seen).toEqual([T0, T0, T0 + 1]);
    expect(clock.waits).toBe(1);
  });

  it('aborts a call when it throws, before any ID is issued, also after a wait and inside fill()', () => {
    let stopAt = Number.POSITIVE_INFINITY;
    const { clock, g } = gen({
      layout: tiny,
      guard: (now) => {
        if (now >= stopAt) throw new Error('stop');
      },
    });
    const first = g.next();
    stopAt = T0 + 1; // the next tick is past the stop: the wait ends in the guard
    g.next();
    g.next();
    g.next();
    expect(() => g.next()).toThrow('stop');
    expect(g.lastTimestamp).toBe(T0);
    expect(() => g.nextBatch(10)).toThrow('stop');
    expect(() => g.fill(new BigInt64Array(10))).toThrow('stop');
    expect(g.lastTimestamp).toBe(T0);
    stopAt = Number.POSITIVE_INFINITY;
    clock.set(T0 + 5);
    expect(g.next() > first).toBe(true);
  });

  it('recheck() sends the next call through the guard inside the current tick, once', () => {
    const seen: number[] = [];
    const { g } = gen({ guard: (now) => seen.push(now) });
    g.next();
    g.next();
    expect(seen).toHaveLength(1);
    g.recheck();
    g.next();
    expect(seen).toHaveLength(2);
    g.next(); // back on the fast path
    expect(seen).toHaveLength(2);
  });

  it('refuses a guard that is not a function', () => {
    expect(() => gen({ guard: 5 as unknown as () => void })).toThrow(OptionError);
  });
});
