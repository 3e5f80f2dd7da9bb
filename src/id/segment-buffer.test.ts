import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { OptionError, SegmentRangeError, SegmentUnavailableError } from './errors.js';
import { SegmentBuffer, type SegmentBufferOptions, type SegmentRange } from './segment-buffer.js';
import { ManualClock } from './time-source.js';

/** A fetch whose calls the test settles by hand, in any order it likes. */
class ManualFetch {
  readonly calls: Array<{
    step: number;
    resolve: (r: SegmentRange) => void;
    reject: (e: unknown) => void;
    settled: boolean;
  }> = [];
  inFlight = 0;
  maxInFlight = 0;
  /** Next unreserved value of the simulated counter. */
  next = 0;

  readonly fetch = (step: number): Promise<SegmentRange> => {
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    return new Promise<SegmentRange>((resolve, reject) => {
      this.calls.push({ step, resolve, reject, settled: false });
    });
  };

  get pending() {
    return this.calls.filter((c) => !c.settled);
  }

  /** Settle the oldest pending call with the next `size` values of the counter (default: its step). */
  grant(size?: number): SegmentRange {
    const call = this.take();
    const range = { start: this.next, end: this.next + (size ?? call.step) };
    this.next = range.end;
    call.resolve(range);
    return range;
  }

  /** Settle the oldest pending call with an arbitrary range. */
  respond(range: SegmentRange): void {
    this.take().resolve(range);
  }

  fail(err: unknown = new Error('store unreachable')): void {
    this.take().reject(err);
  }

  private take() {
    const call = this.pending[0];
    if (!call) throw new Error('no fetch pending');
    call.settled = true;
    this.inFlight--;
    return call;
  }
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

function buffer(f: ManualFetch, options: Partial<SegmentBufferOptions> = {}) {
  return new SegmentBuffer({
    key: 'orders',
    fetch: f.fetch,
    clock: new ManualClock(0),
    minStep: 10,
    ...options,
  });
}

describe('SegmentBuffer', () => {
  it('hands out a range in order, waiting for the first fetch', async () => {
    const f = new ManualFetch();
    const b = buffer(f);
    expect(b.tryNextSync()).toBeUndefined();
    const first = b.next();
    expect(f.pending.map((c) => c.step)).toEqual([10]);
    f.grant();
    expect(await first).toBe(0);
    const rest = [];
    for (let v = b.tryNextSync(); v !== undefined && v < 7; v = b.tryNextSync()) rest.push(v);
    expect(rest).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('prefetches the next range once 20% or less of the current one remains, with one fetch in flight', async () => {
    const f = new ManualFetch();
    const b = buffer(f, { minStep: 100, maxStep: 100 });
    const p = b.next();
    f.grant(); // [0, 100)
    await p;
    for (let v = 1; v < 80; v++) expect(b.tryNextSync()).toBe(v);
    expect(f.calls.length).toBe(1); // 20 left, none fetched yet
    expect(b.tryNextSync()).toBe(80); // the call that finds 20 left starts the prefetch
    expect(f.calls.length).toBe(2);
    for (let v = 81; v < 100; v++) expect(b.tryNextSync()).toBe(v);
    expect(b.tryNextSync()).toBeUndefined(); // still in flight: no second fetch
    expect(f.calls.length).toBe(2);
    f.grant();
    await flush();
    expect(b.tryNextSync()).toBe(100);
    expect(f.maxInFlight).toBe(1);
  });

  it('switches to the standby range without waiting (double buffer)', async () => {
    const f = new ManualFetch();
    const b = buffer(f, { minStep: 10, maxStep: 10 });
    const p = b.next();
    f.grant(); // [0, 10)
    await p;
    for (let i = 1; i < 9; i++) b.tryNextSync();
    f.grant(); // [10, 20) arrives while 0..9 is still being used
    await flush();
    expect(b.stats.standby).toBe(10);
    expect([b.tryNextSync(), b.tryNextSync(), b.tryNextSync()]).toEqual([9, 10, 11]);
    expect(b.stats.standby).toBe(0);
  });

  it('doubles the step when segments go fast and halves it when they go slowly, within min and max', async () => {
    const f = new ManualFetch();
    const clock = new ManualClock(0);
    const b = new SegmentBuffer({
      key: 'k',
      fetch: f.fetch,
      clock,
      minStep: 10,
      maxStep: 40,
      targetDurationMs: 1000,
    });
    const drain = async () => {
      while (b.stats.remaining + b.stats.standby > 0 || f.pending.length === 0) {
        if (b.tryNextSync() === undefined) break;
      }
      if (f.pending.length > 0) f.grant();
      await flush();
    };
    await Promise.all([b.next(), (async () => f.grant())()]);
    const steps = [f.calls[0]!.step];
    for (let i = 0; i < 4; i++) {
      clock.advance(10); // fast
      await drain();
      steps.push(f.calls.at(-1)!.step);
    }
    for (let i = 0; i < 4; i++) {
      clock.advance(5000); // slow
      await drain();
      steps.push(f.calls.at(-1)!.step);
    }
    expect(steps).toEqual([10, 20, 40, 40, 40, 20, 10, 10, 10]);
  });

  it('refuses a range that overlaps or goes back; waiters get SegmentUnavailableError with the range error as cause', async () => {
    const f = new ManualFetch();
    const b = buffer(f);
    const p = b.next();
    f.respond({ start: 100, end: 110 });
    expect(await p).toBe(100);
    for (let i = 0; i < 9; i++) b.tryNextSync();
    const waiting = b.next();
    f.respond({ start: 105, end: 120 }); // overlaps [100, 110)
    const err = await waiting.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SegmentUnavailableError);
    expect((err as SegmentUnavailableError).reason).toBe('fetch-failed');
    expect((err as Error).message).toMatch(/segment "orders" unavailable \(fetch-failed\)/);
    expect((err as Error).cause).toBeInstanceOf(SegmentRangeError);
    expect(((err as Error).cause as Error).message).toBe(
      'segment "orders": fetched range [105, 120) refused; allowed: safe integers with 0 <= start < end and start >= 110 (the end of the ranges accepted so far)',
    );
    // Empty, backwards, unsafe ranges are refused too; a good one is then accepted.
    for (const bad of [
      { start: 110, end: 110 },
      { start: 50, end: 60 },
      { start: 2 ** 53, end: 2 ** 53 + 10 },
      { start: -5n, end: 10n },
      { start: 1.5, end: 9 },
    ]) {
      const w = b.next();
      f.respond(bad);
      await expect(w).rejects.toThrow(SegmentUnavailableError);
    }
    const ok = b.next();
    f.respond({ start: 110n, end: 120n });
    expect(await ok).toBe(110);
  });

  it('rejects every waiter with the key and cause when nothing is cached and the fetch fails; then recovers', async () => {
    const f = new ManualFetch();
    const b = buffer(f);
    const waiters = [b.next(), b.next(), b.nextBatch(3)];
    expect(f.calls.length).toBe(1);
    f.fail(new Error('etcd timeout'));
    const results = await Promise.allSettled(waiters);
    for (const r of results) {
      expect(r.status).toBe('rejected');
      const reason = (r as PromiseRejectedResult).reason as SegmentUnavailableError;
      expect(reason).toBeInstanceOf(SegmentUnavailableError);
      expect(reason.key).toBe('orders');
      expect(reason.message).toBe(
        'segment "orders" unavailable (fetch-failed): no cached values and the fetch failed: etcd timeout',
      );
      expect((reason.cause as Error).message).toBe('etcd timeout');
    }
    const again = b.next();
    f.grant();
    expect(await again).toBe(0);
    expect(b.stats.failures).toBe(1);
  });

  it('a fetch that throws synchronously counts as a failure', async () => {
    const b = new SegmentBuffer({
      key: 'sync-throw',
      fetch: () => {
        throw new Error('boom');
      },
    });
    await expect(b.next()).rejects.toThrow(/segment "sync-throw" unavailable \(fetch-failed\).*boom/);
  });

  it('retries a failed prefetch when half of what was left is used, without refetching on every value', async () => {
    const f = new ManualFetch();
    const b = buffer(f, { minStep: 100, maxStep: 100 });
    const p = b.next();
    f.grant();
    await p;
    for (let i = 1; i <= 80; i++) b.tryNextSync(); // taking 80 started the prefetch
    expect(f.calls.length).toBe(2);
    f.fail();
    await flush();
    const left = b.stats.remaining;
    expect(left).toBe(19);
    for (let i = 0; i < left - Math.floor(left / 2); i++) expect(b.tryNextSync()).toBeDefined();
    expect(f.calls.length).toBe(2); // half of 19 still left: no retry yet
    expect(b.tryNextSync()).toBe(91);
    expect(f.calls.length).toBe(3);
    f.grant();
    await flush();
    const values = [];
    for (let i = 0; i < 13; i++) values.push(b.tryNextSync());
    expect(values).toEqual([92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104]);
  });

  it('a slow fetch keeps callers waiting in order, and they all get distinct values', async () => {
    const f = new ManualFetch();
    const b = buffer(f);
    const waiting = Array.from({ length: 25 }, () => b.next());
    f.grant(10);
    await flush();
    expect(f.pending.length).toBe(1); // the queue still needs values: next fetch started
    f.grant(10);
    await flush();
    f.grant(10);
    expect(await Promise.all(waiting)).toEqual(Array.from({ length: 25 }, (_, i) => i));
  });

  it('bounds the waiters queue: excess callers are rejected with queue-full', async () => {
    const f = new ManualFetch();
    const b = buffer(f, { maxWaiters: 2 });
    const a = b.next();
    const c = b.next();
    await expect(b.next()).rejects.toThrow(
      /segment "orders" unavailable \(queue-full\): 2 callers are already waiting/,
    );
    await expect(b.nextBatch(2)).rejects.toThrow(/queue-full/);
    f.grant();
    expect(await Promise.all([a, c])).toEqual([0, 1]);
  });

  it('close rejects waiters and hands out nothing more', async () => {
    const f = new ManualFetch();
    const b = buffer(f);
    const w = b.next();
    b.close();
    await expect(w).rejects.toThrow(/unavailable \(closed\)/);
    f.grant();
    await flush();
    expect(b.tryNextSync()).toBeUndefined();
    await expect(b.next()).rejects.toThrow(/closed/);
  });

  it('nextBatch spans ranges and returns values in order', async () => {
    const f = new ManualFetch();
    const b = buffer(f, { minStep: 10, maxStep: 10 });
    const batch = b.nextBatch(25);
    f.grant();
    await flush();
    f.grant();
    await flush();
    f.grant();
    expect(await batch).toEqual(Array.from({ length: 25 }, (_, i) => i));
    expect(await b.nextBatch(0)).toEqual([]);
    await expect(b.nextBatch(-1)).rejects.toThrow(OptionError);
  });

  it('validates options, naming the field and the range', () => {
    const fetch = async () => ({ start: 0, end: 1 });
    expect(() => new SegmentBuffer({ key: '', fetch })).toThrow(/key = ""; allowed: a non-empty string/);
    expect(() => new SegmentBuffer({ key: 'k', fetch, minStep: 0 })).toThrow(
      /minStep = 0; allowed: an integer in \[1, /,
    );
    expect(() => new SegmentBuffer({ key: 'k', fetch, minStep: 10, maxStep: 5 })).toThrow(
      /maxStep = 5; allowed: an integer in \[10, /,
    );
    expect(() => new SegmentBuffer({ key: 'k', fetch, prefetchRatio: 1 })).toThrow(
      /prefetchRatio = 1; allowed: a number in \(0, 1\)/,
    );
    expect(() => new SegmentBuffer({ key: 'k', fetch, maxWaiters: 0 })).toThrow(/maxWaiters = 0/);
  });
});

/** One action of a random schedule against a buffer with a hand-settled fetch. */
type Action =
  | { a: 'next'; k: number }
  | { a: 'batch'; n: number }
  | { a: 'sync'; k: number }
  | { a: 'grant'; size: number }
  | { a: 'gap'; skip: number; size: number }
  | { a: 'fail' }
  | { a: 'bad' }
  | { a: 'flush' };

const arbAction: fc.Arbitrary<Action> = fc.oneof(
  fc.integer({ min: 1, max: 8 }).map((k): Action => ({ a: 'next', k })),
  fc.integer({ min: 0, max: 30 }).map((n): Action => ({ a: 'batch', n })),
  fc.integer({ min: 1, max: 40 }).map((k): Action => ({ a: 'sync', k })),
  fc.integer({ min: 1, max: 25 }).map((size): Action => ({ a: 'grant', size })),
  fc
    .record({ skip: fc.integer({ min: 1, max: 50 }), size: fc.integer({ min: 1, max: 25 }) })
    .map((r): Action => ({ a: 'gap', ...r })),
  fc.constant<Action>({ a: 'fail' }),
  fc.constant<Action>({ a: 'bad' }),
  fc.constant<Action>({ a: 'flush' }),
);

describe('SegmentBuffer under random schedules (property)', () => {
  it('never hands a value out twice, never hands out what was not granted, and never leaves a caller hanging', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(arbAction, { minLength: 1, maxLength: 80, size: 'max' }),
        fc.integer({ min: 1, max: 3 }),
        async (schedule, maxWaitersFactor) => {
          const f = new ManualFetch();
          const b = new SegmentBuffer({
            key: 'prop',
            fetch: f.fetch,
            clock: new ManualClock(0),
            minStep: 4,
            maxStep: 16,
            maxWaiters: 4 * maxWaitersFactor,
          });
          const granted: Array<[number, number]> = [];
          const seen = new Set<number>();
          let lastSync = -1;
          const take = (v: number) => {
            expect(seen.has(v)).toBe(false);
            seen.add(v);
            expect(granted.some(([s, e]) => v >= s && v < e)).toBe(true);
          };
          const promises: Array<Promise<void>> = [];
          const track = (p: Promise<number | number[]>) => {
            promises.push(
              p.then(
                (v) => {
                  for (const x of Array.isArray(v) ? v : [v]) take(x);
                },
                (err: unknown) => {
                  expect(err).toBeInstanceOf(SegmentUnavailableError);
                },
              ),
            );
          };
          for (const act of schedule) {
            switch (act.a) {
              case 'next':
                for (let i = 0; i < act.k; i++) track(b.next());
                break;
              case 'batch':
                track(b.nextBatch(act.n));
                break;
              case 'sync':
                for (let i = 0; i < act.k; i++) {
                  const v = b.tryNextSync();
                  if (v === undefined) break;
                  expect(v).toBeGreaterThan(lastSync);
                  lastSync = v;
                  take(v);
                }
                break;
              case 'grant':
                if (f.pending.length > 0) granted.push(toPair(f.grant(act.size)));
                break;
              case 'gap':
                if (f.pending.length > 0) {
                  f.next += act.skip;
                  granted.push(toPair(f.grant(act.size)));
                }
                break;
              case 'fail':
                if (f.pending.length > 0) f.fail();
                break;
              case 'bad':
                // A range overlapping what was already granted (as a buggy or stale store might return), or empty.
                if (f.pending.length > 0) {
                  const lastEnd = granted.at(-1)?.[1];
                  f.respond(
                    lastEnd === undefined ? { start: 3, end: 3 } : { start: lastEnd - 1, end: lastEnd + 5 },
                  );
                }
                break;
              case 'flush':
                await flush();
                break;
            }
            expect(f.maxInFlight).toBeLessThanOrEqual(1);
          }
          // Let everything settle: keep granting until no fetch is pending. Every caller must then be settled.
          for (let i = 0; i < 1000; i++) {
            await flush();
            if (f.pending.length === 0) break;
            granted.push(toPair(f.grant(16)));
          }
          expect(f.pending.length).toBe(0);
          expect(b.stats.waiters).toBe(0);
          let settled = 0;
          await Promise.race([
            Promise.all(promises.map((p) => p.then(() => settled++))),
            flush().then(flush),
          ]);
          expect(settled).toBe(promises.length);
        },
      ),
      { numRuns: 300 },
    );
  });
});

function toPair(r: SegmentRange): [number, number] {
  return [Number(r.start), Number(r.end)];
}
