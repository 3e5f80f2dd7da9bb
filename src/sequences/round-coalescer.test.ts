import { describe, expect, it } from 'vitest';
import { RoundCoalescer } from './round-coalescer.js';

/** Rounds that complete when the test says so, on a clock the test moves. */
function harness(maxInFlight: number) {
  let clock = 0;
  let term = 1;
  const rounds: Array<{ startedAt: number; resolve(): void; reject(e: unknown): void }> = [];
  const c = new RoundCoalescer(
    () =>
      new Promise<void>((resolve, reject) => {
        rounds.push({ startedAt: clock, resolve, reject });
      }),
    () => clock,
    () => term,
    maxInFlight,
  );
  const turn = () => new Promise<void>((r) => setImmediate(r)); // rounds start at the end of a turn
  return {
    c,
    rounds,
    turn,
    tick: (ms = 1) => {
      clock += ms;
      return clock;
    },
    setTerm: (t: number) => {
      term = t;
    },
  };
}

/** Which of the promises have settled (after the microtask queue drained). */
async function settled(ps: Promise<void>[]): Promise<boolean[]> {
  const state = ps.map(() => false);
  for (const [i, p] of ps.entries()) {
    const mark = () => {
      state[i] = true;
    };
    p.then(mark, mark);
  }
  await new Promise<void>((r) => setImmediate(r));
  return state;
}

describe('RoundCoalescer', () => {
  it('answers a request only with a round that started at or after its arrival, under its tag', async () => {
    const h = harness(2);
    const a = h.tick();
    const pa = h.c.confirm({ at: a, tag: 1 });
    await h.turn();
    expect(h.rounds).toHaveLength(1);
    const b = h.tick(); // arrives after round 0 started: round 0 must not answer it
    const pb = h.c.confirm({ at: b, tag: 1 });
    h.rounds[0]!.resolve();
    expect(await settled([pa, pb])).toEqual([true, false]);
    await h.turn();
    expect(h.rounds).toHaveLength(2);
    expect(h.rounds[1]!.startedAt).toBeGreaterThanOrEqual(b);
    h.rounds[1]!.resolve();
    expect(await settled([pb])).toEqual([true]);
    // A request that arrived before round 1 started, answered after it confirmed: no new round.
    expect(h.c.confirmedSince({ at: b, tag: 1 })).toBe(true);
    expect(h.c.confirmedSince({ at: h.tick(), tag: 1 })).toBe(false);
    // Another term: a confirmed round of term 1 does not answer it.
    h.setTerm(2);
    expect(h.c.confirmedSince({ at: b, tag: 2 })).toBe(false);
  });

  it('runs up to maxInFlight rounds at once and starts the waiting one when a round ends', async () => {
    const h = harness(2);
    const p: Promise<void>[] = [];
    for (let i = 0; i < 3; i++) {
      p.push(h.c.confirm({ at: h.tick(), tag: 1 }));
      await h.turn();
    }
    expect(h.rounds).toHaveLength(2); // the third waits
    // The second round (younger) completes first: it answers the first two requests, not the third.
    h.rounds[1]!.resolve();
    expect(await settled(p)).toEqual([false, true, false]);
    expect(h.rounds).toHaveLength(3);
    expect(h.rounds[2]!.startedAt).toBeGreaterThanOrEqual(3);
    // The first request is still waiting on its own round (0): its failure is its own.
    h.rounds[0]!.reject(new Error('lost leadership'));
    await expect(p[0]).rejects.toThrow('lost leadership');
    h.rounds[2]!.resolve();
    expect(await settled([p[2]!])).toEqual([true]);
  });

  it('without `since`, always waits for a round started after the call', async () => {
    const h = harness(1);
    const first = h.c.confirm();
    await h.turn();
    const second = h.c.confirm(); // round 0 is in flight: it started before this call
    h.rounds[0]!.resolve();
    expect(await settled([first, second])).toEqual([true, false]);
    expect(h.rounds).toHaveLength(2);
    h.rounds[1]!.resolve();
    expect(await settled([second])).toEqual([true]);
    expect(h.c.stats.rounds).toBe(2);
  });

  it('shares one round among every request of a turn', async () => {
    const h = harness(2);
    const at = h.tick();
    const ps = Array.from({ length: 50 }, () => h.c.confirm({ at, tag: 1 }));
    await h.turn();
    expect(h.rounds).toHaveLength(1);
    h.rounds[0]!.resolve();
    expect((await settled(ps)).every(Boolean)).toBe(true);
  });

  it('refuses a bad maxInFlight', () => {
    expect(() => new RoundCoalescer(async () => {}, undefined, undefined, 0)).toThrow(/maxInFlight/);
  });
});
