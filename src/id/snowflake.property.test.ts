import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decode } from './codec.js';
import { CeilingReachedError, ClockMovedBackwardsError } from './errors.js';
import { defineLayout, type Layout } from './layout.js';
import { PRESETS } from './presets.js';
import { Snowflake } from './snowflake.js';
import { ManualClock } from './time-source.js';

const START = Date.parse('2026-06-01T00:00:00.000Z');

/** Small sequences so exhaustion, waiting and borrowing happen often; several tick lengths. */
const layouts: Layout[] = [
  PRESETS.twitter,
  PRESETS.sonyflake,
  defineLayout({
    name: 'seq2',
    epochMs: Date.UTC(2020, 0, 1),
    unitMs: 1,
    timestampBits: 41,
    datacenterBits: 0,
    workerBits: 20,
    sequenceBits: 2,
  }),
  defineLayout({
    name: 'seq1-10ms',
    epochMs: Date.UTC(2020, 0, 1),
    unitMs: 10,
    timestampBits: 40,
    datacenterBits: 2,
    workerBits: 20,
    sequenceBits: 1,
    order: 'sequence-node',
  }),
  defineLayout({
    name: 'seq3-1s',
    epochMs: Date.UTC(2020, 0, 1),
    unitMs: 1000,
    timestampBits: 36,
    datacenterBits: 0,
    workerBits: 24,
    sequenceBits: 3,
  }),
];

/** One step of a clock script, applied before a call. */
type Step =
  | { op: 'stall' }
  | { op: 'forward'; ms: number }
  | { op: 'back'; ms: number }
  | { op: 'resync'; ms: number }
  | { op: 'floor'; ahead: number }
  | { op: 'ceiling'; ahead: number }
  | { op: 'batch'; n: number };

const arbStep: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<Step>({ op: 'stall' }) },
  { weight: 3, arbitrary: fc.integer({ min: 1, max: 5 }).map((ms): Step => ({ op: 'forward', ms })) },
  { weight: 1, arbitrary: fc.integer({ min: 100, max: 5000 }).map((ms): Step => ({ op: 'forward', ms })) },
  { weight: 2, arbitrary: fc.integer({ min: 1, max: 12 }).map((ms): Step => ({ op: 'back', ms })) },
  { weight: 1, arbitrary: fc.integer({ min: 13, max: 3000 }).map((ms): Step => ({ op: 'back', ms })) },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: 3 }).map((ms): Step => ({ op: 'resync', ms })) },
  { weight: 1, arbitrary: fc.integer({ min: -20, max: 20 }).map((ahead): Step => ({ op: 'floor', ahead })) },
  {
    weight: 1,
    arbitrary: fc.integer({ min: -5, max: 200 }).map((ahead): Step => ({ op: 'ceiling', ahead })),
  },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 40 }).map((n): Step => ({ op: 'batch', n })) },
);

const arbConfig = fc
  .record({
    layout: fc.constantFrom(...layouts),
    onClockBackwards: fc.constantFrom('wait' as const, 'borrow' as const),
    onSequenceExhausted: fc.constantFrom('wait' as const, 'borrow' as const),
    backwardsToleranceMs: fc.integer({ min: 0, max: 10 }),
    maxLeadMs: fc.integer({ min: 0, max: 30 }),
    floorAhead: fc.option(fc.integer({ min: -50, max: 8 }), { nil: undefined }),
    ceilingAhead: fc.option(fc.integer({ min: 0, max: 5000 }), { nil: undefined }),
  })
  .map((c) => ({
    ...c,
    // A ceiling below the floor is refused at construction (tested elsewhere): keep it at or above.
    ceilingAhead: c.ceilingAhead === undefined ? undefined : c.ceilingAhead + Math.max(0, c.floorAhead ?? 0),
  }));

describe('Snowflake under random clock scripts (property)', () => {
  it('IDs strictly increase; floor, ceiling and lead bounds hold; errors only when due', () => {
    fc.assert(
      fc.property(
        arbConfig,
        fc.array(arbStep, { minLength: 1, maxLength: 200, size: 'max' }),
        (cfg, script) => {
          const clock = new ManualClock(START);
          const g = new Snowflake({
            layout: cfg.layout,
            clock,
            onClockBackwards: cfg.onClockBackwards,
            onSequenceExhausted: cfg.onSequenceExhausted,
            backwardsToleranceMs: cfg.backwardsToleranceMs,
            maxLeadMs: cfg.maxLeadMs,
            floor: cfg.floorAhead === undefined ? undefined : START + cfg.floorAhead,
            ceiling: cfg.ceilingAhead === undefined ? undefined : START + cfg.ceilingAhead,
          });
          // What the generator has seen: every clock value is read (each call reads first), waits only move forwards.
          let maxSeen = START;
          let last = -1n;
          const unit = cfg.layout.unitMs;
          const borrowsTicks = cfg.onSequenceExhausted === 'borrow';
          const borrowsBackwards = cfg.onClockBackwards === 'borrow';
          // How far an ID's tick may start after the clock's time when it is returned.
          const maxLead =
            (borrowsTicks ? cfg.maxLeadMs : 0) + (borrowsBackwards ? cfg.backwardsToleranceMs : 0);

          for (const step of script) {
            let n = 1;
            switch (step.op) {
              case 'forward':
                clock.advance(step.ms);
                break;
              case 'back':
                clock.advance(-step.ms);
                break;
              case 'resync': // NTP puts the clock right again: just past the latest time it showed
                clock.set(maxSeen + step.ms);
                break;
              case 'floor': {
                const target = clock.now() + step.ahead;
                const ok = target >= (g.floor ?? 0) && target <= (g.ceiling ?? Number.POSITIVE_INFINITY);
                if (ok) g.setFloor(target);
                else expect(() => g.setFloor(target)).toThrow(/floor .* refused/);
                break;
              }
              case 'ceiling': {
                const target = clock.now() + step.ahead;
                const ok = target >= (g.ceiling ?? 0) && target >= (g.floor ?? 0);
                if (ok) g.setCeiling(target);
                else expect(() => g.setCeiling(target)).toThrow(/ceiling .* refused/);
                break;
              }
              case 'batch':
                n = step.n;
                break;
            }
            const before = clock.now();
            const reference = Math.max(maxSeen, g.floor ?? Number.NEGATIVE_INFINITY);
            let ids: bigint[];
            try {
              ids = n === 1 ? [g.next()] : [...g.nextBatch(n)];
            } catch (err) {
              if (err instanceof ClockMovedBackwardsError) {
                // Refused only when the clock was behind its reference by more than the tolerance, by exactly that.
                expect(before).toBe(clock.now());
                expect(err.movedMs).toBe(reference - before);
                expect(err.movedMs).toBeGreaterThan(cfg.backwardsToleranceMs);
              } else if (err instanceof CeilingReachedError) {
                expect(g.ceiling).toBeDefined();
                // Refused only when no tick <= ceiling is left: the clock is past it, or the last tick used is its tick.
                const ceilingTick = Math.floor((g.ceiling! - cfg.layout.epochMs) / unit);
                const clockTick = Math.floor((clock.now() - cfg.layout.epochMs) / unit);
                const lastTick =
                  g.lastTimestamp === undefined ? -1 : (g.lastTimestamp - cfg.layout.epochMs) / unit;
                const floorTick =
                  g.floor === undefined ? -1 : Math.floor((g.floor - cfg.layout.epochMs) / unit);
                expect(clockTick > ceilingTick || Math.max(lastTick, floorTick) >= ceilingTick).toBe(true);
              } else {
                throw err;
              }
              maxSeen = Math.max(maxSeen, clock.now());
              continue;
            }
            maxSeen = Math.max(maxSeen, clock.now());
            for (const id of ids) {
              expect(id > last).toBe(true);
              last = id;
              const ts = decode(id, cfg.layout).timestamp;
              if (g.floor !== undefined) expect(ts).toBeGreaterThan(g.floor);
              if (g.ceiling !== undefined) expect(ts).toBeLessThanOrEqual(g.ceiling);
              expect(ts - clock.now()).toBeLessThanOrEqual(maxLead);
            }
            expect(g.lastTimestamp).toBe(decode(last, cfg.layout).timestamp);
          }
        },
      ),
      { numRuns: 400 },
    );
  });
});
