import { describe, expect, it } from 'vitest';
import { FloeClient } from './floe-client.js';
import type { FetchLike } from './http-transport.js';

/** A cluster that allocates segments of one sequence and records the count of every allocation asked. */
function allocCluster() {
  let next = 0n;
  const asked: number[] = [];
  const fetch: FetchLike = async (_url, init) => {
    const { count } = JSON.parse(init.body ?? '{}') as { count: number };
    asked.push(count);
    const start = next;
    next += BigInt(count);
    const body = JSON.stringify({ key: 'orders', start: String(start), end: String(next) });
    return { status: 200, headers: { get: () => null }, text: async () => body };
  };
  return { fetch, asked };
}

describe('FloeSequence adaptive step', () => {
  it('times its segments on the client monotonic clock, not the real one: a segment that lasted 3x the target halves the step', async () => {
    const c = allocCluster();
    let mono = 1_000;
    const client = new FloeClient({
      endpoints: ['10.0.0.1:7380'],
      fetch: c.fetch,
      clock: { now: () => Date.UTC(2026, 5, 1) },
      monotonic: () => mono,
      random: () => 0.5,
      bootId: 'boot-1',
    });
    // A tiny watermark: the next segment is fetched when the last value of the current one is taken.
    const seq = client.sequence('orders', {
      step: 8,
      minStep: 1,
      maxStep: 64,
      targetDurationMs: 1_000,
      prefetchRatio: 0.01,
    });
    expect(await seq.nextBatch(7)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(c.asked).toEqual([8]);
    // The segment "lasted" 3 s on the client's clock (the test takes a few real ms): Leaf's rule halves the step.
    mono += 3_000;
    expect(await seq.nextBatch(2)).toEqual([7, 8]);
    expect(c.asked).toEqual([8, 4]);
    // Drained at once (no monotonic time passes): the step doubles.
    await seq.nextBatch(3);
    expect(c.asked).toEqual([8, 4, 8]);
  });
});
