// Unit tests of the simulator's own parts: scheduler, clocks, processes, network, oracle.
import { describe, expect, it } from 'vitest';
import { compose } from '../../id/index.js';
import { encodeEnvelope, pack } from '../../node/envelope.js';
import type { Message } from '../../raft/types.js';
import { Prng } from '../prng.js';
import { FLOE_LAYOUT } from './config.js';
import { FailStopOracle } from './fail-stop-oracle.js';
import { leaseReplyMismatch } from './http-router.js';
import { IdOracle, IdSet } from './id-oracle.js';
import { LeaseLedger } from './lease-ledger.js';
import { checkedPayload, QUIET_NET, VirtualNetwork, withChecksum } from './network.js';
import { Machine, MachineClock, SimProcess } from './process.js';
import { ReadContextOracle } from './read-context-oracle.js';
import { Scheduler } from './scheduler.js';
import { SeqOracle } from './seq-workload.js';
import { testWorld } from './test-world.js';

const world = testWorld;

function proc(sched: Scheduler, rate = 1, name = 'p'): SimProcess {
  return new SimProcess(
    sched,
    new Machine(name, new MachineClock(sched, rate, 1000, Date.UTC(2026, 5, 1))),
    `${name}#1`,
    1,
  );
}

describe('scheduler and processes', () => {
  it('runs events in time order, ties in insertion order, and drains async work per event', async () => {
    const s = new Scheduler();
    const out: string[] = [];
    s.after(20, undefined, 'b', () => out.push('b'));
    s.after(10, undefined, 'a', () => {
      out.push('a');
      void Promise.resolve().then(() => setImmediate(() => out.push('a-immediate')));
    });
    s.after(20, undefined, 'c', () => out.push('c'));
    await s.runUntil(100);
    expect(out).toEqual(['a', 'a-immediate', 'b', 'c']);
    expect(s.nowUs).toBe(100);
  });

  it('holds a paused process back and runs its events in order on resume; drops a dead one', async () => {
    const s = new Scheduler();
    const p = proc(s);
    const out: number[] = [];
    p.setTimeout(() => out.push(1), 1);
    p.setTimeout(() => out.push(2), 2);
    p.pause();
    await s.runUntil(10_000);
    expect(out).toEqual([]);
    p.resume();
    await s.runUntil(20_000);
    expect(out).toEqual([1, 2]);
    p.setTimeout(() => out.push(3), 1);
    p.kill();
    await s.runUntil(40_000);
    expect(out).toEqual([1, 2]);
  });

  it('timers follow the machine clock rate, and a suspend stops the monotonic clock but not the wall clock', async () => {
    const s = new Scheduler();
    const slow = proc(s, 0.5);
    let firedAt = -1;
    slow.setTimeout(() => (firedAt = s.nowUs), 10); // 10 ms at half speed: 20 ms of global time
    await s.runUntil(100_000);
    expect(firedAt).toBe(20_000);

    const p = proc(s, 1, 'q');
    const mono0 = p.monoMs();
    const wall0 = p.wallMs();
    p.machine.suspend();
    let fired = false;
    p.setTimeout(() => (fired = true), 5);
    await s.runUntil(200_000);
    expect(fired).toBe(false);
    expect(p.monoMs()).toBe(mono0);
    expect(p.wallMs()).toBeCloseTo(wall0 + 100, 6);
    p.machine.resume();
    await s.runUntil(206_000);
    expect(fired).toBe(true);
  });

  it('a busy-waiting process reads its clocks at the end of its wait and its events wait for it', async () => {
    const s = new Scheduler();
    const p = proc(s);
    const target = p.wallMs() + 50;
    p.busyWaitUntilWall(target);
    expect(p.wallMs()).toBeGreaterThanOrEqual(target);
    let ranAt = -1;
    s.after(10, p, 'x', () => (ranAt = s.nowUs));
    await s.runUntil(100_000);
    expect(ranAt).toBe(50_000);
  });
});

describe('virtual network', () => {
  it('checksums catch a flipped bit', () => {
    const f = withChecksum(Buffer.from('hello raft'));
    expect(checkedPayload(f)?.toString()).toBe('hello raft');
    f[3] = (f[3] as number) ^ 4;
    expect(checkedPayload(f)).toBeUndefined();
  });

  it('delivers decoded copies in FIFO order per link, drops corrupted frames and reports lost snapshots', async () => {
    const s = new Scheduler();
    const w = world(s);
    const net = new VirtualNetwork(s, new Prng(3), { ...QUIET_NET }, () => {});
    const a = proc(s, 1, 'a');
    const b = proc(s, 1, 'b');
    const got: Message[] = [];
    const status: boolean[] = [];
    const ta = net.attach(1, a, {
      onMessage: () => {},
      onUnreachable: () => {},
      onSnapshotStatus: (_p, ok) => status.push(ok),
    });
    net.attach(2, b, { onMessage: (m) => got.push(m), onUnreachable: () => {}, onSnapshotStatus: () => {} });
    ta.addPeer(2, 'b');
    const hb = (commit: number): Message => ({
      type: 'heartbeat',
      from: 1,
      to: 2,
      term: 1,
      commit,
      context: new Uint8Array(0),
    });
    const first = hb(1);
    ta.send([first, hb(2), hb(3)]);
    await s.runUntil(1_000_000);
    expect(got.map((m) => (m as { commit: number }).commit)).toEqual([1, 2, 3]);
    expect(got[0]).not.toBe(first);
    net.conditions = { ...QUIET_NET, corrupt: 1 };
    ta.send([hb(4)]);
    await s.runUntil(2_000_000);
    expect(got).toHaveLength(3);
    expect(net.stats.corrupted).toBe(1);
    net.conditions = { ...QUIET_NET };
    net.setBlocked([[1, 2]]);
    ta.send([
      {
        type: 'snap',
        from: 1,
        to: 2,
        term: 1,
        snapshot: {
          metadata: { index: 5, term: 1, conf: { voters: [1, 2], learners: [] } },
          data: new Uint8Array(3),
        },
      },
    ]);
    await s.runUntil(3_000_000);
    expect(status).toEqual([false]);
    expect(w.failures).toEqual([]);
  });
});

describe('ID oracle', () => {
  const L = FLOE_LAYOUT;
  const id = (ts: number, worker: number, seq: number) =>
    compose({ timestamp: ts, worker, sequence: seq }, L);
  const T0 = Date.UTC(2026, 5, 1);
  const grant = (o: IdOracle, workerId: number, token: number, index = token) =>
    o.leaseEvent({
      type: 'granted',
      app: 'a',
      workerId,
      token,
      nodeId: 'x',
      ttlMs: 1000,
      index,
      leaderTimeMs: T0,
    });
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
    });

  it('accepts two holders one after the other above the floor', () => {
    const w = world();
    const o = new IdOracle(w);
    grant(o, 1, 10);
    o.issued('c1#1', 'a', 1, 10, L, id(T0 + 5, 1, 0), 100);
    o.issued('c1#1', 'a', 1, 10, L, id(T0 + 6, 1, 0), 200);
    free(o, 1, 10, T0 + 100, 11);
    grant(o, 1, 12);
    o.issued('c2#1', 'a', 1, 12, L, id(T0 + 101, 1, 0), 300);
    expect(w.failures).toEqual([]);
    expect(o.stats).toMatchObject({ ids: 3, holders: 2, grants: 2, reusedWorkers: 1 });
  });

  it('catches a duplicate, an overlap in time, an ID below the floor and overlapping timestamp ranges', () => {
    const dup = world();
    const o1 = new IdOracle(dup);
    grant(o1, 1, 10);
    o1.issued('c1#1', 'a', 1, 10, L, id(T0 + 5, 1, 0), 100);
    o1.issued('c1#1', 'a', 1, 10, L, id(T0 + 5, 1, 0), 101);
    expect(dup.failures.map((f) => f.kind)).toEqual(['duplicate-id']);

    const overlap = world();
    const o2 = new IdOracle(overlap);
    grant(o2, 1, 10);
    o2.issued('c1#1', 'a', 1, 10, L, id(T0 + 5, 1, 0), 100);
    free(o2, 1, 10, T0 + 100, 11);
    grant(o2, 1, 12);
    o2.issued('c2#1', 'a', 1, 12, L, id(T0 + 200, 1, 0), 150);
    o2.issued('c1#1', 'a', 1, 10, L, id(T0 + 6, 1, 0), 200);
    expect(overlap.failures.map((f) => f.kind)).toEqual(['lease-overlap']);

    const low = world();
    const o3 = new IdOracle(low);
    free(o3, 1, 5, T0 + 100, 6);
    grant(o3, 1, 10);
    o3.issued('c1#1', 'a', 1, 10, L, id(T0 + 100, 1, 0), 100);
    expect(low.failures.map((f) => f.kind)).toEqual(['below-floor']);

    const ranges = world();
    const o4 = new IdOracle(ranges);
    grant(o4, 1, 10);
    o4.issued('c1#1', 'a', 1, 10, L, id(T0 + 50, 1, 0), 100);
    free(o4, 1, 10, T0 + 10, 11); // a high-water mark below what the holder used (a broken release)
    grant(o4, 1, 12);
    o4.issued('c2#1', 'a', 1, 12, L, id(T0 + 20, 1, 0), 300);
    expect(ranges.failures.map((f) => f.kind)).toEqual(['timestamp-ranges-overlap']);
  });

  it('exempts from P1 (but not from P2) a holder whose machine hid a suspend with a backward wall step', async () => {
    const s = new Scheduler();
    const w = world(s);
    const o = new IdOracle(w);
    const m = proc(s, 1, 'c1').machine;
    grant(o, 1, 10);
    o.leased('c1#1', 10, m, 0);
    o.issued('c1#1', 'a', 1, 10, L, id(T0 + 5, 1, 0), 100);
    m.suspend();
    m.jumpWall(-3_000);
    s.after(2_000, undefined, 'wake', () => m.resume());
    await s.runUntil(5_000);
    free(o, 1, 10, T0 + 100, 11);
    grant(o, 1, 12);
    o.issued('c2#1', 'a', 1, 12, L, id(T0 + 200, 1, 0), 5_000);
    o.issued('c1#1', 'a', 1, 10, L, id(T0 + 6, 1, 0), 6_000);
    expect(w.failures).toEqual([]);
    expect(o.stats.exemptOverlaps).toBe(1);
    o.issued('c1#1', 'a', 1, 10, L, id(T0 + 300, 1, 0), 7_000); // beyond its committed range: P2 breaks
    expect(w.failures.map((f) => f.kind)).toEqual(['timestamp-ranges-overlap']);
  });

  // The exemption is bounded by what the OLDER holder's machine hid (re-review of stop 22): longer overstays fail.
  const machine = (s: Scheduler, name: string) => new Machine(name, new MachineClock(s, 1, 1000, T0));

  /** c1#1 holds token 10 of worker 1 and has issued one ID (t=100 µs). */
  const oldHolder = (s: Scheduler) => {
    const w = world(s);
    const o = new IdOracle(w);
    const m1 = machine(s, 'c1');
    grant(o, 1, 10);
    o.leased('c1#1', 10, m1, 0);
    o.issued('c1#1', 'a', 1, 10, L, id(T0 + 5, 1, 0), 100);
    return { w, o, m1 };
  };
  /** Token 10 of worker 1 expires and token 12 is granted. */
  const handOver = (o: IdOracle) => {
    free(o, 1, 10, T0 + 100, 11);
    grant(o, 1, 12);
  };

  it('a 5 s overstay by the old holder around a new holder that issued once is not excused by a 1 ms hidden suspend', async () => {
    const s = new Scheduler();
    const { w, o, m1 } = oldHolder(s);
    m1.suspend();
    m1.jumpWall(-1);
    s.after(1_000, undefined, 'wake', () => m1.resume()); // 1 ms suspended, 1 ms step back
    await s.runUntil(10_000_000);
    handOver(o);
    o.issued('c2#1', 'a', 1, 12, L, id(T0 + 100_000, 1, 0), 2_000_000); // new holder: one ID at t=2 s
    for (let k = 1; k <= 10; k++)
      o.issued('c1#1', 'a', 1, 10, L, id(T0 + 6 + k, 1, 0), 2_000_000 + k * 500_000); // old holder goes on for 5 s
    expect(w.failures[0]?.kind).toBe('lease-overlap'); // overlap once measured as min(last)-max(first) = 0
  });

  it("the new holder's hidden suspend does not excuse the old holder's overstay", async () => {
    const s = new Scheduler();
    const { w, o } = oldHolder(s);
    const m2 = machine(s, 'c2');
    handOver(o);
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
    const { w, o, m1 } = oldHolder(s);
    const m2 = machine(s, 'c2');
    m1.suspend();
    m1.jumpWall(-3_000);
    s.after(3_000_000, undefined, 'wake', () => m1.resume()); // 3 s suspended, 3 s step back: 3 s hidden
    await s.runUntil(3_500_000);
    handOver(o);
    o.leased('c2#1', 12, m2, 1_000_000);
    o.issued('c2#1', 'a', 1, 12, L, id(T0 + 200_000, 1, 0), 1_000_000);
    o.issued('c1#1', 'a', 1, 10, L, id(T0 + 6, 1, 0), 3_000_000); // 2 s after c2 began: within the 3 s hidden
    expect(w.failures).toEqual([]);
    o.issued('c1#1', 'a', 1, 10, L, id(T0 + 7, 1, 0), 4_500_000); // 3.5 s after: more than the suspend hid
    expect(w.failures[0]?.kind).toBe('lease-overlap');
  });

  it('a process that resumed a lease across a backward wall step may outstay it by the step, no more (swarm seed 483619)', async () => {
    for (const resumed of [true, false]) {
      const s = new Scheduler();
      const w = world(s);
      const o = new IdOracle(w);
      const m1 = machine(s, 'c1');
      grant(o, 1, 10);
      s.after(500_000, undefined, 'step', () => m1.jumpWall(-3_000)); // after the grant, before the restart
      await s.runUntil(1_000_000);
      o.leased('c1#2', 10, m1, 1_000_000, resumed);
      o.issued('c1#2', 'a', 1, 10, L, id(T0 + 5, 1, 0), 1_000_000);
      free(o, 1, 10, T0 + 100, 11);
      grant(o, 1, 12);
      o.issued('c2#1', 'a', 1, 12, L, id(T0 + 200_000, 1, 0), 1_500_000);
      o.issued('c1#2', 'a', 1, 10, L, id(T0 + 6, 1, 0), 3_500_000); // 2 s into c2's lease
      expect(w.failures.length, `resumed ${resumed}`).toBe(resumed ? 0 : 1);
      o.issued('c1#2', 'a', 1, 10, L, id(T0 + 7, 1, 0), 5_000_000); // 3.5 s: more than the step
      expect(w.failures[0]?.kind, `resumed ${resumed}`).toBe('lease-overlap');
    }
  });

  it("checks a stretch of the newest holder against an older holder's use recorded later in its future (busy wait)", () => {
    // An ID is recorded at its process's effective time, which a busy wait puts in the future: c1 (token 10) finished a
    // wait at t=5 s and issued there, recorded before c2 (token 12) issued at t=1 s. c2's next ID, at t=6 s, stretches
    // c2's use over c1's: the fast path (c2 issued the previous ID and holds the newest token) once skipped that check.
    const w = world();
    const o = new IdOracle(w);
    grant(o, 1, 10);
    o.issued('c1#1', 'a', 1, 10, L, id(T0 + 5, 1, 0), 5_000_000);
    free(o, 1, 10, T0 + 100, 11);
    grant(o, 1, 12);
    o.issued('c2#1', 'a', 1, 12, L, id(T0 + 200, 1, 0), 1_000_000);
    expect(w.failures).toEqual([]);
    o.issued('c2#1', 'a', 1, 12, L, id(T0 + 201, 1, 0), 6_000_000);
    expect(w.failures.map((f) => f.kind)).toEqual(['lease-overlap']);
  });

  it('takes each lease event once, whichever replica applies it first', () => {
    const w = world();
    const o = new IdOracle(w);
    grant(o, 1, 10);
    grant(o, 1, 10);
    expect(o.stats.grants).toBe(1);
  });
});

describe("ID set (the oracle's record of every ID)", () => {
  it('holds exactly the IDs added, whatever their high and low bits, and values outside 0..MAX_ID apart', () => {
    const s = new IdSet();
    const seen = new Set<bigint>();
    const rng = new Prng(7);
    const max = (1n << 63n) - 1n;
    const odd = [-1n, -(1n << 20n), 1n << 63n, (1n << 80n) + 5n];
    const pool: bigint[] = [0n, 1n, (1n << 20n) - 1n, 1n << 20n, max, max - 1n, ...odd];
    // IDs sharing their high bits (a burst), and ones that differ only above or only below bit 20.
    for (let i = 0; i < 300; i++) {
      const hi = BigInt(rng.nextU32()) * 4096n + BigInt(rng.int(4));
      pool.push((hi << 20n) | BigInt(rng.int(1 << 20)), (hi << 20n) | BigInt(i % 7));
    }
    for (let round = 0; round < 2; round++)
      for (const v of pool) {
        expect(s.has(v)).toBe(seen.has(v));
        expect(s.add(v)).toBe(!seen.has(v));
        seen.add(v);
        expect(s.has(v)).toBe(true);
        expect(s.size).toBe(seen.size);
      }
    expect(s.has(2n)).toBe(false);
    expect(s.has((5n << 20n) | 1n)).toBe(seen.has((5n << 20n) | 1n));
  });
});

describe('lease reply check', () => {
  it('accepts a matching acquire reply and names the field of one that does not match', () => {
    const req = JSON.stringify({ nodeId: 'svc-1', requestId: 'r1', incarnation: 'c1#1' });
    const ok = JSON.stringify({
      ok: true,
      op: 'acquire',
      app: 'svc',
      nodeId: 'svc-1',
      requestId: 'r1',
      incarnation: 'c1#1',
    });
    expect(leaseReplyMismatch('/v1/apps/svc/workers/acquire', req, ok)).toBeUndefined();
    const other = JSON.stringify({
      ok: true,
      op: 'acquire',
      app: 'svc',
      nodeId: 'svc-1',
      requestId: 'r0',
      incarnation: 'c1#1',
    });
    expect(leaseReplyMismatch('/v1/apps/svc/workers/acquire', req, other)).toMatch(/requestId/);
    const renew = JSON.stringify({ ok: true, op: 'renew', app: 'svc', workerId: 3, token: 8 });
    expect(leaseReplyMismatch('/v1/apps/svc/workers/3/renew', JSON.stringify({ token: 9 }), renew)).toMatch(
      /token/,
    );
    expect(leaseReplyMismatch('/v1/kv/x', '{}', '{}')).toBeUndefined();
  });
});

describe('lease ledger: replies and accepted leases against the committed lease state', () => {
  const T0 = Date.UTC(2026, 5, 1);
  /** The acquire command committed at `index`, as a node's log holds it. */
  const acquireEntry = (index: number, requestId: string, incarnation: string) => ({
    type: 'normal' as const,
    index,
    term: 1,
    data: encodeEnvelope({
      origin: 1,
      seq: 1,
      leaderTimeMs: T0,
      kind: 'app',
      payload: pack({
        ns: 'lease',
        op: 'acquire',
        app: 'svc',
        nodeId: 'svc-1',
        ttlMs: 1000,
        requestId,
        incarnation,
      }),
    }),
  });
  const ledger = () => {
    const l = new LeaseLedger();
    // token 7 of worker 3 granted to svc-1 for (r1, c1#1); an earlier holder left the mark at T0 + 50
    l.leaseEvent(
      {
        type: 'expired',
        app: 'svc',
        workerId: 3,
        token: 2,
        nodeId: 'x',
        highWaterMs: T0 + 50,
        index: 5,
        leaderTimeMs: T0,
      },
      () => undefined,
    );
    l.leaseEvent(
      {
        type: 'granted',
        app: 'svc',
        workerId: 3,
        token: 7,
        nodeId: 'svc-1',
        ttlMs: 1000,
        index: 7,
        leaderTimeMs: T0,
      },
      (i) => acquireEntry(i, 'r1', 'c1#1'),
    );
    return l;
  };
  const acquireReply = (over: Record<string, unknown> = {}) =>
    JSON.stringify({
      ok: true,
      op: 'acquire',
      app: 'svc',
      nodeId: 'svc-1',
      workerId: 3,
      token: 7,
      requestId: 'r1',
      incarnation: 'c1#1',
      highWaterMs: T0 + 50,
      ...over,
    });
  const acq = '/v1/apps/svc/workers/acquire';

  it('accepts an acquire reply that is the committed grant, and names what differs from it', () => {
    const l = ledger();
    const req = (requestId: string) => JSON.stringify({ nodeId: 'svc-1', requestId, incarnation: 'c1#1' });
    expect(leaseReplyMismatch(acq, req('r1'), acquireReply(), undefined, l)).toBeUndefined();
    // echoes its own request, but carries the token committed for another requestId
    expect(leaseReplyMismatch(acq, req('r2'), acquireReply({ requestId: 'r2' }), undefined, l)).toMatch(
      /requestId is "r2", the grant committed at token 7 has "r1"/,
    );
    expect(leaseReplyMismatch(acq, req('r1'), acquireReply({ workerId: 4 }), undefined, l)).toMatch(
      /workerId/,
    );
    expect(leaseReplyMismatch(acq, req('r1'), acquireReply({ token: 8 }), undefined, l)).toMatch(
      /never committed/,
    );
    expect(leaseReplyMismatch(acq, req('r1'), acquireReply({ highWaterMs: T0 + 10 }), undefined, l)).toMatch(
      /below the worker's committed mark/,
    );
  });

  it("checks a renew reply's token and bound, and a release reply against the committed free", () => {
    const l = ledger();
    const renew = (token: number, boundMs: number) =>
      JSON.stringify({ ok: true, op: 'renew', app: 'svc', workerId: 3, token, boundMs });
    const rp = '/v1/apps/svc/workers/3/renew';
    expect(
      leaseReplyMismatch(rp, JSON.stringify({ token: 7, boundMs: T0 + 90 }), renew(7, T0 + 90), undefined, l),
    ).toBeUndefined();
    expect(
      leaseReplyMismatch(rp, JSON.stringify({ token: 7, boundMs: T0 + 90 }), renew(7, T0 + 80), undefined, l),
    ).toMatch(/below the bound/);
    expect(leaseReplyMismatch(rp, JSON.stringify({ token: 6 }), renew(6, T0), undefined, l)).toMatch(
      /never committed/,
    );
    const release = (highWaterMs: number, alreadyReleased = false) =>
      JSON.stringify({ ok: true, op: 'release', app: 'svc', workerId: 3, highWaterMs, alreadyReleased });
    const rl = '/v1/apps/svc/workers/3/release';
    const body = JSON.stringify({ token: 7, lastTimestampMs: T0 + 100 });
    expect(leaseReplyMismatch(rl, body, release(T0 + 100), undefined, l)).toMatch(
      /no free of it is committed/,
    );
    l.leaseEvent(
      {
        type: 'released',
        app: 'svc',
        workerId: 3,
        token: 7,
        nodeId: 'svc-1',
        highWaterMs: T0 + 100,
        index: 9,
        leaderTimeMs: T0,
      },
      () => undefined,
    );
    expect(leaseReplyMismatch(rl, body, release(T0 + 100), undefined, l)).toBeUndefined();
    expect(leaseReplyMismatch(rl, body, release(T0 + 120), undefined, l)).toMatch(
      /committed free of token 7/,
    );
    expect(leaseReplyMismatch(rl, body, release(T0 + 90, true), undefined, l)).toMatch(/below the request's/);
  });

  it("fails a lease a process takes from a reply to another process's request (a swapped reply taken as its own)", () => {
    const w = testWorld();
    const o = new IdOracle(w);
    const l = ledger();
    o.ledger = l;
    l.acquireSent('c1#1', JSON.stringify({ nodeId: 'svc-1', requestId: 'r1', incarnation: 'c1#1' }));
    l.acquireSent('c2#1', JSON.stringify({ nodeId: 'svc-2', requestId: 'r9', incarnation: 'c2#1' }));
    const m = new Machine('c', new MachineClock(w.sched, 1, 1000, T0));
    o.leased('c1#1', 7, m, 0);
    o.leased('c2#1', 7, m, 0, true); // resumed from its cache: no reply to compare
    expect(w.failures).toEqual([]);
    o.leased('c2#1', 7, m, 0);
    expect(w.failures.map((f) => f.kind)).toEqual(['reply-mismatch']);
    expect(w.failures[0]?.detail).toMatch(/c2#1 took token 7 of svc\/3, committed for requestId "r1"/);
  });
});

describe('read-context oracle (issue 9 item 1b)', () => {
  const ctx = (...b: number[]) => Uint8Array.from(b);

  it('accepts answers to contexts one process asked with, retries included', () => {
    const failures: string[] = [];
    const o = new ReadContextOracle((d) => failures.push(d));
    o.asked(1, 1, ctx(1, 2));
    o.asked(1, 1, ctx(1, 2)); // the same process asks again (a new leader)
    o.asked(1, 2, ctx(1, 3)); // its successor, another context
    o.asked(2, 1, ctx(1, 2)); // another node, the same bytes
    o.answered(1, 1, ctx(1, 2), 5);
    o.answered(1, 2, ctx(1, 3), 6);
    o.answered(2, 1, ctx(1, 2), 7);
    o.answered(1, 2, ctx(9), 8); // nobody asked: the node drops it
    expect(failures).toEqual([]);
    expect(o.answers).toBe(4);
  });

  it('fails an answer that reaches one of two processes of a node that asked with one context', () => {
    const failures: string[] = [];
    const o = new ReadContextOracle((d) => failures.push(d));
    o.asked(3, 1, ctx(0xab));
    o.asked(3, 2, ctx(0xab));
    o.answered(3, 3, ctx(0xab), 4); // a third process never asked: it ignores the answer
    expect(failures).toEqual([]);
    o.answered(3, 2, ctx(0xab), 4);
    expect(failures).toEqual([
      'n3#2 received a ReadIndex answer (index 4) for context ab, which processes #1, #2 of n3 asked with: it cannot tell whose read it answers',
    ]);
  });
});

describe('fail-stop oracle', () => {
  it('fails a node process that acts after its fsync EIO, or never halts; passes one that halts', () => {
    const w = testWorld();
    const o = new FailStopOracle(w);
    o.acted('n1#1', 'sent app to n2'); // no EIO yet: anything goes
    o.fsyncFailed('n1#1', '/var/lib/floe/n1/wal/1.wal');
    o.fsyncFailed('n2#1', '/var/lib/floe/n2/wal/1.wal');
    o.stopped('n2#1');
    o.checkHalted(() => false); // n1#1 died: fine
    expect(w.failures).toEqual([]);
    o.checkHalted((p) => p === 'n1#1');
    expect(w.failures[0]?.detail).toMatch(/n1#1 still runs at the end, never halted/);
    o.acted('n1#1', 'acknowledged a save (1 entries, sync true)');
    expect(w.failures.map((f) => f.kind)).toEqual(['fail-stop', 'fail-stop']);
    expect(w.failures[1]?.detail).toMatch(
      /n1#1 acknowledged a save .* after its fsync of .*1.wal failed with EIO/,
    );
  });

  // Regression (swarm seeds 801760, 802028): a node removed from the cluster stops, then an fsync in its storage's
  // close fails. It halted before the EIO; the oracle used to say it never halted.
  it('counts a process that stopped before its EIO (in the close after a removal) as halted', () => {
    const w = world();
    const o = new FailStopOracle(w);
    o.stopped('n3#4');
    o.fsyncFailed('n3#4', '/var/lib/floe/n3');
    o.checkHalted(() => true);
    expect(w.failures).toEqual([]);
    expect(o.stats).toEqual({ eios: 1, halted: 1 });
  });
});

describe('sequence oracle', () => {
  it('fails a value given twice, across INCRBY ranges and segments', () => {
    const w = world();
    const o = new SeqOracle(w);
    o.values('k', 1n, 3n, 'a');
    o.values('k', 4n, 9n, 'b (segment)');
    o.values('other', 3n, 3n, 'c');
    expect(w.failures).toEqual([]);
    o.values('k', 9n, 10n, 'd');
    expect(w.failures[0]?.kind).toBe('duplicate-id');
    expect(w.failures[0]?.detail).toMatch(/value 9 given to d and before to b/);
  });

  it('checks strict real-time order: a call sent after a reply arrived gets larger values', () => {
    const o = new SeqOracle(world());
    // Overlapping calls may come back in any order; a call sent after a reply must be above it.
    o.strict.push({ client: 'a', invokeUs: 0, returnUs: 10, first: 5n, last: 6n });
    o.strict.push({ client: 'b', invokeUs: 5, returnUs: 8, first: 1n, last: 1n });
    o.strict.push({ client: 'c', invokeUs: 11, returnUs: 20, first: 7n, last: 9n });
    expect(o.checkOrder()).toBeUndefined();
    o.strict.push({ client: 'd', invokeUs: 21, returnUs: 30, first: 8n, last: 8n });
    expect(o.checkOrder()).toMatch(/d's call sent at 21 µs got 8..8, but c's call answered at 20 µs/);
  });
});
