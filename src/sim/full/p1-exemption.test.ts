// The P1 (one-holder) exemption is bounded by what the OLDER holder's machine hid (re-review of stop 22): these
// overstays are violations.
import { describe, expect, it } from 'vitest';
import { compose } from '../../id/index.js';
import { FLOE_LAYOUT } from './config.js';
import { IdOracle } from './id-oracle.js';
import { Machine, MachineClock } from './process.js';
import { Scheduler } from './scheduler.js';
import { testWorld } from './test-world.js';

const L = FLOE_LAYOUT;
const T0 = Date.UTC(2026, 5, 1);
const id = (ts: number, worker: number, seq: number) => compose({ timestamp: ts, worker, sequence: seq }, L);
const grant = (o: IdOracle, workerId: number, token: number, index = token) =>
  o.leaseEvent({ type: 'granted', app: 'a', workerId, token, nodeId: 'x', index, leaderTimeMs: T0 } as never);
const free = (o: IdOracle, workerId: number, token: number, highWaterMs: number, index: number) =>
  o.leaseEvent({
    type: 'expired',
    app: 'a',
    workerId,
    token,
    nodeId: 'x',
    highWaterMs,
    index,
    leaderTimeMs: T0,
  } as never);
const machine = (s: Scheduler, name: string) => new Machine(name, new MachineClock(s, 1, 1000, T0));

describe('id oracle: the bounded P1 exemption', () => {
  it('a 5 s overstay by the old holder around a new holder that issued once is not excused by a 1 ms hidden suspend', async () => {
    const s = new Scheduler();
    const w = testWorld(s);
    const o = new IdOracle(w);
    const m1 = machine(s, 'c1');
    grant(o, 1, 10);
    o.leased('c1#1', 10, m1, 0);
    o.issued('c1#1', 'a', 1, 10, L, id(T0 + 5, 1, 0), 100);
    m1.suspend();
    m1.jumpWall(-1);
    s.after(1_000, undefined, 'wake', () => m1.resume()); // 1 ms suspended, 1 ms step back
    await s.runUntil(10_000_000);
    free(o, 1, 10, T0 + 100, 11);
    grant(o, 1, 12);
    o.issued('c2#1', 'a', 1, 12, L, id(T0 + 100_000, 1, 0), 2_000_000); // new holder: one ID at t=2 s
    for (let k = 1; k <= 10; k++)
      o.issued('c1#1', 'a', 1, 10, L, id(T0 + 6 + k, 1, 0), 2_000_000 + k * 500_000); // old holder goes on for 5 s
    expect(w.failures[0]?.kind).toBe('lease-overlap'); // overlap once measured as min(last)-max(first) = 0
  });

  it("the new holder's hidden suspend does not excuse the old holder's overstay", async () => {
    const s = new Scheduler();
    const w = testWorld(s);
    const o = new IdOracle(w);
    const m1 = machine(s, 'c1');
    const m2 = machine(s, 'c2');
    grant(o, 1, 10);
    o.leased('c1#1', 10, m1, 0);
    o.issued('c1#1', 'a', 1, 10, L, id(T0 + 5, 1, 0), 100);
    free(o, 1, 10, T0 + 100, 11);
    grant(o, 1, 12);
    o.leased('c2#1', 12, m2, 1_000_000);
    o.issued('c2#1', 'a', 1, 12, L, id(T0 + 200_000, 1, 0), 1_000_000);
    await s.runUntil(1_000_000);
    m2.suspend();
    m2.jumpWall(-3_000);
    s.after(3_000_000, undefined, 'wake', () => m2.resume());
    await s.runUntil(4_500_000);
    o.issued('c2#1', 'a', 1, 12, L, id(T0 + 200_001, 1, 0), 4_500_000);
    // the old holder c1 (no clock event on its machine) issues 2 s after c2 started
    o.issued('c1#1', 'a', 1, 10, L, id(T0 + 6, 1, 0), 3_000_000);
    expect(w.failures[0]?.kind).toBe('lease-overlap'); // c2's suspend once excused c1's overstay
  });

  it("the old holder's own hidden suspend excuses an overstay no longer than it (documented, docs/client.md)", async () => {
    const s = new Scheduler();
    const w = testWorld(s);
    const o = new IdOracle(w);
    const m1 = machine(s, 'c1');
    const m2 = machine(s, 'c2');
    grant(o, 1, 10);
    o.leased('c1#1', 10, m1, 0);
    o.issued('c1#1', 'a', 1, 10, L, id(T0 + 5, 1, 0), 100);
    m1.suspend();
    m1.jumpWall(-3_000);
    s.after(3_000_000, undefined, 'wake', () => m1.resume()); // 3 s suspended, 3 s step back: 3 s hidden
    await s.runUntil(3_500_000);
    free(o, 1, 10, T0 + 100, 11);
    grant(o, 1, 12);
    o.leased('c2#1', 12, m2, 1_000_000);
    o.issued('c2#1', 'a', 1, 12, L, id(T0 + 200_000, 1, 0), 1_000_000);
    o.issued('c1#1', 'a', 1, 10, L, id(T0 + 6, 1, 0), 3_000_000); // 2 s after c2 began: within the 3 s hidden
    expect(w.failures).toEqual([]);
    o.issued('c1#1', 'a', 1, 10, L, id(T0 + 7, 1, 0), 4_500_000); // 3.5 s after: more than the suspend hid
    expect(w.failures[0]?.kind).toBe('lease-overlap');
  });
});
