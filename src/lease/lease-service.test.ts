import { describe, expect, it } from 'vitest';
import { encodeLeaseCommand } from '../state/leases/codec.js';
import { LeaseStateMachine } from '../state/leases/lease-state-machine.js';
import type { AcquireOk, LeaseResult } from '../state/leases/types.js';
import {
  LeaseNotLeaderError,
  LeaseReplyMismatchError,
  LeaseService,
  type LeaseServiceOptions,
} from './lease-service.js';
import { FakeTime, flush, InstantNode } from './test-doubles.js';

const TTL = 10_000;

function setup(opts: { leader?: boolean; service?: Partial<LeaseServiceOptions> } = {}) {
  const time = new FakeTime();
  const sm = new LeaseStateMachine();
  const node = new InstantNode(sm, time, opts.leader ?? true);
  const errors: string[] = [];
  const svc = new LeaseService({
    node,
    state: sm,
    clock: time,
    timers: time,
    defaultTtlMs: TTL,
    onError: (what) => errors.push(what),
    ...opts.service,
  });
  return { time, sm, node, svc, errors };
}

async function granted(svc: LeaseService, app: string, nodeId: string, extra: { boundMs?: number } = {}) {
  const r = await svc.acquire({ app, nodeId, requestId: `req-${nodeId}`, incarnation: 'proc-1', ...extra });
  if (!r.ok) throw new Error(`acquire failed: ${r.message}`);
  return r;
}

describe('LeaseService: deadlines on the leader', () => {
  it('gives every existing lease a full TTL from its own election before expiring any', async () => {
    const { time, sm, node, svc } = setup({ leader: false });
    // An earlier leader granted three leases long ago (its timestamps say they "expired" an hour ago).
    let index = 0;
    for (const n of ['a', 'b', 'c']) {
      sm.apply(encodeLeaseCommand({ op: 'acquire', app: 'app', nodeId: n, ttlMs: TTL, requestId: n }), {
        index: ++index,
        term: 1,
        leaderTimeMs: time.wallMs() - 3_600_000,
      });
    }
    node.index = index;
    await time.advance(60_000); // as a follower: nothing is tracked, nothing expires
    expect(svc.trackedCount).toBe(0);
    expect(node.ops('expire')).toBe(0);

    time.wallOffsetMs += 86_400_000; // the new leader's wall clock is a day off: it must not matter
    node.setLeader(true);
    await flush();
    expect(svc.ready).toBe(true);
    expect(svc.trackedCount).toBe(3);
    await time.advance(TTL - 1);
    expect(node.ops('expire')).toBe(0);
    expect(sm.leaseCount).toBe(3);
    await time.advance(1);
    expect(node.ops('expire')).toBe(1); // one batch
    expect(sm.leaseCount).toBe(0);
    expect(svc.stats.expiredLeases).toBe(3);
  });

  it('expires an abandoned lease after its TTL; the ID comes back with its high-water mark', async () => {
    const { time, sm, node, svc } = setup();
    await flush();
    const bound = time.wallMs() + 2_000;
    const a = await granted(svc, 'app', 'a', { boundMs: bound });
    await time.advance(TTL - 1);
    expect(sm.lease('app', a.workerId)).toBeDefined();
    await time.advance(1);
    expect(sm.lease('app', a.workerId)).toBeUndefined();
    expect(node.ops('expire')).toBe(1);
    expect(sm.worker('app', a.workerId)).toMatchObject({ live: false, highWaterMs: bound });
    const again = await svc.acquire({ app: 'app', nodeId: 'a', requestId: 'second' });
    expect(again).toMatchObject({ ok: true, workerId: a.workerId, highWaterMs: bound });
    expect((again as AcquireOk).token).toBeGreaterThan(a.token);
  });

  it('forgets every deadline when it stops leading, and refuses leader-only calls', async () => {
    const { time, node, svc, sm } = setup();
    await flush();
    const a = await granted(svc, 'app', 'a');
    node.setLeader(false);
    expect(svc.trackedCount).toBe(0);
    expect(time.pendingTimers).toBe(0);
    await time.advance(5 * TTL);
    expect(node.ops('expire')).toBe(0);
    expect(sm.lease('app', a.workerId)).toBeDefined();
    await expect(svc.renew({ app: 'app', workerId: a.workerId, token: a.token })).rejects.toBeInstanceOf(
      LeaseNotLeaderError,
    );
    await expect(svc.acquire({ app: 'app', nodeId: 'z' })).rejects.toThrow(/not the leader/);
  });

  it('a retried acquire applied just before its lease expires, in the same batch, is refused lease_expired, never answered with the lease', async () => {
    // Full simulator, swarm seed 400777: the expiry applied after the retry in one batch, the answer said "granted",
    // and the caller counted a fresh TTL on a worker ID the leader granted to someone else 160 ms later.
    const { time, sm, node, svc } = setup();
    await flush();
    const a = await granted(svc, 'app', 'a');
    const propose = node.propose.bind(node);
    node.propose = async (cmd) => {
      const r = await propose(cmd); // the retry, applied while the lease is live: retried, unchanged
      sm.apply(encodeLeaseCommand({ op: 'expire', items: [['app', a.workerId, a.token]] }), {
        index: ++node.index,
        term: 1,
        leaderTimeMs: time.wallMs(),
      });
      return r;
    };
    const retry = await svc.acquire({ app: 'app', nodeId: 'a', requestId: 'req-a', incarnation: 'proc-1' });
    expect(retry).toMatchObject({ ok: false, code: 'lease_expired' });
    node.propose = propose;
    const fresh = await svc.acquire({ app: 'app', nodeId: 'a', requestId: 'req-a', incarnation: 'proc-1' });
    expect(fresh).toMatchObject({ ok: true, retried: false });
    expect((fresh as AcquireOk).token).toBeGreaterThan(a.token);
  });

  it('extends the deadline when an acquire is retried with the same requestId', async () => {
    const { time, sm, svc } = setup();
    await flush();
    const a = await granted(svc, 'app', 'a');
    await time.advance(8_000);
    const retry = await svc.acquire({ app: 'app', nodeId: 'a', requestId: 'req-a', incarnation: 'proc-1' });
    expect(retry).toMatchObject({ ok: true, retried: true, token: a.token });
    await time.advance(TTL - 1); // 18 s after the grant, 10 s - 1 ms after the retry
    expect(sm.lease('app', a.workerId)).toBeDefined();
    await time.advance(1);
    expect(sm.lease('app', a.workerId)).toBeUndefined();
  });

  it('retries a failed expire proposal later', async () => {
    const { time, sm, node, svc, errors } = setup({ service: { expireRetryMs: 500 } });
    await flush();
    const a = await granted(svc, 'app', 'a');
    node.failNext.add('expire');
    await time.advance(TTL);
    expect(node.ops('expire')).toBe(1);
    expect(sm.lease('app', a.workerId)).toBeDefined();
    expect(errors).toEqual(['expire proposal for 1 lease(s) failed; retrying']);
    // Being expired: renewals are refused although the log still shows the lease.
    const late = await svc.renew({ app: 'app', workerId: a.workerId, token: a.token });
    expect(late).toMatchObject({ ok: false, code: 'lease_expired' });
    await time.advance(499);
    expect(node.ops('expire')).toBe(1);
    await time.advance(1);
    expect(node.ops('expire')).toBe(2);
    expect(sm.lease('app', a.workerId)).toBeUndefined();
  });

  it('retries taking over the deadlines when the first linearizable read fails', async () => {
    const { time, node, svc, errors } = setup({ leader: false, service: { seedRetryMs: 200 } });
    node.readMode = 'fail';
    node.setLeader(true);
    await flush();
    expect(svc.ready).toBe(false);
    expect(errors.length).toBe(1);
    node.readMode = 'open';
    await time.advance(200);
    expect(svc.ready).toBe(true);
  });
});

describe('LeaseService: renewals', () => {
  it('answers a renewal that raises nothing from memory after a ReadIndex round, with no log entry', async () => {
    const { time, sm, node, svc } = setup();
    await flush();
    const a = await granted(svc, 'app', 'a', { boundMs: time.wallMs() + 5_000 });
    const proposals = node.proposals;
    const reads = node.reads;
    await time.advance(6_000);
    for (const boundMs of [undefined, time.wallMs() - 1_000]) {
      const r = await svc.renew({
        app: 'app',
        workerId: a.workerId,
        token: a.token,
        ...(boundMs ? { boundMs } : {}),
      });
      expect(r).toMatchObject({ ok: true, logged: false, token: a.token, ttlMs: TTL, boundMs: a.boundMs });
    }
    expect(node.proposals).toBe(proposals);
    expect(node.reads).toBe(reads + 2);
    expect(svc.stats.localRenewals).toBe(2);
    // The deadline moved: 6 s + 10 s from the grant.
    await time.advance(TTL - 1);
    expect(sm.lease('app', a.workerId)).toBeDefined();
    await time.advance(1);
    expect(sm.lease('app', a.workerId)).toBeUndefined();
    expect(svc.stats.reschedules).toBe(1); // re-keyed once when its old deadline came up
  });

  it('logs a renewal that raises the bound', async () => {
    const { time, sm, node, svc } = setup();
    await flush();
    const a = await granted(svc, 'app', 'a');
    const before = node.ops('renew');
    const boundMs = time.wallMs() + 20_000;
    const r = await svc.renew({ app: 'app', workerId: a.workerId, token: a.token, boundMs });
    expect(r).toMatchObject({ ok: true, logged: true, boundMs });
    expect(node.ops('renew')).toBe(before + 1);
    expect(sm.highWaterMs('app', a.workerId)).toBe(boundMs);
    expect(svc.stats.loggedRenewals).toBe(1);
  });

  it('answers a renewal only after the linearizable read resolves, and fails it if the read fails', async () => {
    const { time, sm, node, svc } = setup();
    await flush();
    const a = await granted(svc, 'app', 'a');
    node.readMode = 'hold';
    let settled = false;
    const p = svc.renew({ app: 'app', workerId: a.workerId, token: a.token }).finally(() => {
      settled = true;
    });
    await time.advance(5_000);
    expect(settled).toBe(false);
    node.releaseReads();
    await expect(p).resolves.toMatchObject({ ok: true, logged: false });

    // A failed read: the renewal fails and the deadline does not move.
    await time.advance(1_000); // t = 6 s; deadline now 15 s
    const q = svc.renew({ app: 'app', workerId: a.workerId, token: a.token });
    node.releaseReads(true);
    await expect(q).rejects.toThrow(/read failed/);
    await time.advance(9_000 - 1);
    expect(sm.lease('app', a.workerId)).toBeDefined();
    await time.advance(1);
    expect(sm.lease('app', a.workerId)).toBeUndefined();
  });

  it('shares ReadIndex rounds between concurrent renewals', async () => {
    const { node, svc } = setup();
    await flush();
    const grants = [];
    for (let i = 0; i < 50; i++) grants.push(await granted(svc, 'app', `n${i}`));
    const reads = node.reads;
    node.readMode = 'hold';
    const all = Promise.all(
      grants.map((g) => svc.renew({ app: 'app', workerId: g.workerId, token: g.token })),
    );
    expect(node.reads).toBe(reads + 1);
    node.releaseReads(); // answers the first renewal; the other 49 arrived later and need a new round
    await flush();
    expect(node.reads).toBe(reads + 2);
    node.releaseReads();
    const results = await all;
    expect(results.every((r) => r.ok)).toBe(true);
    expect(svc.readStats.rounds).toBe(2);
    expect(svc.stats.localRenewals).toBe(50);
  });

  it('refuses a renewal whose leader deadline passed, even before the expiry pump ran', async () => {
    const { time, node, svc } = setup();
    await flush();
    const a = await granted(svc, 'app', 'a');
    time.now += TTL; // time passes but no timer fired yet (a busy event loop)
    const r = await svc.renew({ app: 'app', workerId: a.workerId, token: a.token });
    expect(r).toMatchObject({ ok: false, code: 'lease_expired' });
    expect(node.ops('expire')).toBe(0);
  });

  it('does not acknowledge a logged renewal that raced with the lease’s expiry', async () => {
    const { time, sm, node, svc } = setup();
    await flush();
    const a = await granted(svc, 'app', 'a');
    await time.advance(TTL - 10);
    node.holdProposals = true;
    const p = svc.renew({ app: 'app', workerId: a.workerId, token: a.token, boundMs: time.wallMs() + 1 });
    await time.advance(10); // deadline passes: the pump proposes expire behind the renewal
    expect(node.heldCount).toBe(2);
    node.releaseHeld(1); // the renewal applies (and raises the mark); the expire is still in flight
    await expect(p).resolves.toMatchObject({ ok: false, code: 'lease_expired' });
    expect(sm.lease('app', a.workerId)).toBeDefined();
    node.releaseHeld();
    await flush();
    expect(sm.lease('app', a.workerId)).toBeUndefined();
    expect(sm.highWaterMs('app', a.workerId)).toBeGreaterThan(0);
  });

  it('refuses stale tokens and unknown leases without proposing', async () => {
    const { node, svc } = setup();
    await flush();
    const a = await granted(svc, 'app', 'a');
    const proposals = node.proposals;
    expect(await svc.renew({ app: 'app', workerId: a.workerId, token: a.token + 1 })).toMatchObject({
      ok: false,
      code: 'stale_token',
    });
    expect(await svc.renew({ app: 'app', workerId: 7, token: 3 })).toMatchObject({
      ok: false,
      code: 'not_held',
    });
    expect(await svc.renew({ app: 'bad app', workerId: 7, token: 3 })).toMatchObject({
      ok: false,
      code: 'invalid_argument',
    });
    expect(node.proposals).toBe(proposals);
  });

  it('tracks a lease granted before the new leader took over when it is renewed', async () => {
    const { sm, node, svc } = setup({ leader: false });
    node.readMode = 'hold'; // seeding waits
    node.setLeader(true);
    sm.apply(encodeLeaseCommand({ op: 'acquire', app: 'app', nodeId: 'a', ttlMs: TTL, requestId: 'r' }), {
      index: 1,
      term: 1,
      leaderTimeMs: 0,
    });
    // The grant was applied while leading, so it is already tracked from the event.
    expect(svc.trackedCount).toBe(1);
    node.readMode = 'open';
    const r = await svc.renew({ app: 'app', workerId: 0, token: 1 });
    expect(r).toMatchObject({ ok: true });
  });
});

describe('LeaseService: reads and release', () => {
  it('lists leases with the time left on the leader and releases them', async () => {
    const { time, svc, sm } = setup();
    await flush();
    const a = await granted(svc, 'app', 'a');
    await granted(svc, 'app', 'b');
    await time.advance(3_000);
    const list = await svc.list('app');
    expect(list.map((l) => [l.nodeId, l.remainingMs])).toEqual([
      ['a', 7_000],
      ['b', 7_000],
    ]);
    expect(await svc.get('app', a.workerId)).toMatchObject({ live: true, remainingMs: 7_000 });
    const rel = await svc.release({ app: 'app', workerId: a.workerId, token: a.token, lastTimestampMs: 5 });
    expect(rel).toMatchObject({ ok: true, highWaterMs: 5 });
    expect(svc.trackedCount).toBe(1);
    expect(await svc.get('app', a.workerId)).toMatchObject({ live: false, remainingMs: undefined });
    expect(await svc.get('app', 999)).toBeUndefined();
    expect(sm.leaseCount).toBe(1);
    expect(await svc.configurePool('other', 5, 2)).toMatchObject({ ok: true, size: 32 });
  });

  it('validates its options', () => {
    expect(() => setup({ service: { maxExpireBatch: 0 } })).toThrow(
      'LeaseService option maxExpireBatch must be an integer in 1..1024, got 0',
    );
    expect(() => setup({ service: { defaultTtlMs: 10 } })).toThrow(/defaultTtlMs must be an integer in 1000/);
  });
});

describe('LeaseService at scale', () => {
  it('tracks 100,000 leases in a heap and expires them in bounded batches', async () => {
    const { time, sm, node, svc } = setup({ service: { maxExpireBatch: 1024 } });
    await flush();
    const n = 100_000;
    await svc.configurePool('big', 17); // 131,072 IDs
    const leases: AcquireOk[] = [];
    for (let i = 0; i < n; i++) {
      const r = (await svc.acquire({ app: 'big', nodeId: `n${i}`, requestId: `r${i}` })) as LeaseResult;
      if (!r.ok || r.op !== 'acquire') throw new Error('acquire failed');
      leases.push(r);
    }
    expect(svc.trackedCount).toBe(n);
    expect(time.pendingTimers).toBe(1); // one timer, at the earliest deadline

    // Half of them renew halfway through their TTL (no log entries).
    await time.advance(TTL / 2);
    const proposalsBefore = node.proposals;
    for (let i = 0; i < n; i += 2) {
      const l = leases[i]!;
      const r = await svc.renew({ app: 'big', workerId: l.workerId, token: l.token });
      if (!r.ok) throw new Error('renew failed');
    }
    expect(node.proposals).toBe(proposalsBefore);
    expect(svc.stats.localRenewals).toBe(n / 2);

    // At the first deadline the other half expires, 1,024 per proposal; the renewed half is re-keyed once.
    await time.advance(TTL / 2);
    expect(sm.leaseCount).toBe(n / 2);
    expect(node.ops('expire')).toBe(Math.ceil(n / 2 / 1024));
    expect(svc.stats.reschedules).toBe(n / 2);
    await time.advance(TTL / 2);
    expect(sm.leaseCount).toBe(0);
    expect(svc.trackedCount).toBe(0);
    expect(node.ops('expire')).toBe(2 * Math.ceil(n / 2 / 1024));
    expect(svc.stats.expiredLeases).toBe(n);
    expect(svc.stats.reschedules).toBe(n / 2); // nothing re-keyed twice
  });
});

describe('LeaseService: every result must match the command it proposed (issue 9 item 1)', () => {
  it("a node that answers a new acquire with another proposal's grant gets an internal error, never a grant", async () => {
    const { svc, node } = setup();
    const victim = await granted(svc, 'app', 'victim');
    // The node hands bob's acquire the victim's (committed) grant.
    node.substitute.push(victim);
    const err = await svc.acquire({ app: 'app', nodeId: 'bob', requestId: 'bob-1' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LeaseReplyMismatchError);
    expect((err as Error).message).toMatch(/^internal: reply does not match request: nodeId/);
    // Same nodeId and requestId, another process incarnation: still not this request's grant.
    const mine = await svc.acquire({ app: 'app', nodeId: 'carol', requestId: 'c', incarnation: 'inc-1' });
    if (!mine.ok) throw new Error(mine.message);
    node.substitute.push(mine);
    await expect(
      svc.acquire({ app: 'app', nodeId: 'carol', requestId: 'c', incarnation: 'inc-2' }),
    ).rejects.toThrow(/reply does not match request: incarnation/);
    node.substitute.push(mine);
    await expect(
      svc.acquire({ app: 'app', nodeId: 'carol', requestId: 'c2', incarnation: 'inc-1' }),
    ).rejects.toThrow(/reply does not match request: requestId/);
    node.substitute.push({
      ok: true,
      op: 'renew',
      app: 'app',
      workerId: 0,
      token: 1,
      ttlMs: TTL,
      boundMs: 0,
    });
    await expect(svc.acquire({ app: 'app', nodeId: 'dave', requestId: 'd' })).rejects.toThrow(
      /reply does not match request: op/,
    );
  });

  it('checks renew, release, configurePool and expire results too', async () => {
    const { svc, node, time } = setup();
    const a = await granted(svc, 'app', 'a');
    const b = await granted(svc, 'app', 'b');
    const wrongRenew = {
      ok: true,
      op: 'renew',
      app: 'app',
      workerId: b.workerId,
      token: b.token,
      ttlMs: TTL,
      boundMs: 9,
    };
    node.substitute.push(wrongRenew);
    await expect(
      svc.renew({ app: 'app', workerId: a.workerId, token: a.token, boundMs: time.wallMs() + 5000 }),
    ).rejects.toBeInstanceOf(LeaseReplyMismatchError);
    node.substitute.push({
      ok: true,
      op: 'release',
      app: 'app',
      workerId: b.workerId,
      highWaterMs: 0,
      alreadyReleased: false,
    });
    await expect(svc.release({ app: 'app', workerId: a.workerId, token: a.token })).rejects.toThrow(
      /reply does not match request: workerId/,
    );
    node.substitute.push({ ok: true, op: 'configurePool', app: 'other', bits: 4, datacenterBits: 0 });
    await expect(svc.configurePool('app', 4)).rejects.toBeInstanceOf(LeaseReplyMismatchError);
    // A refusal cannot be attributed to a request, but is never a grant: it passes through.
    node.substitute.push({ ok: false, code: 'pool_exhausted', message: 'full' });
    expect(await svc.acquire({ app: 'app', nodeId: 'e', requestId: 'e' })).toMatchObject({ ok: false });
    // An expire answered with another command's result counts as failed and is tried again.
    node.substitute.push(wrongRenew);
    await time.advance(TTL + 1);
    expect(svc.stats.expiredLeases).toBe(0);
    await time.advance(2000);
    expect(svc.stats.expireProposals).toBeGreaterThanOrEqual(2);
    expect(svc.stats.expiredLeases).toBe(2);
  });
});

describe('LeaseService: refusals before the log (issue 15 item 2)', () => {
  it('a release of a worker ID never leased, or with another token, is refused without a log entry', async () => {
    const { svc, node } = setup();
    await flush();
    const a = await granted(svc, 'app', 'a');
    const before = node.proposals;
    expect(await svc.release({ app: 'app', workerId: 7, token: 1 })).toMatchObject({
      ok: false,
      code: 'not_held',
    });
    expect(await svc.release({ app: 'app', workerId: a.workerId, token: a.token + 1 })).toMatchObject({
      ok: false,
      code: 'stale_token',
    });
    expect(await svc.release({ app: 'nope', workerId: 0, token: 1 })).toMatchObject({
      ok: false,
      code: 'not_held',
    });
    expect(node.proposals).toBe(before);
    // Round 4: where apply would answer otherwise, apply decides (the same code as without the precheck).
    expect(await svc.release({ app: 'app', workerId: 5_000, token: 1 })).toMatchObject({
      ok: false,
      code: 'invalid_argument',
    });
    expect(
      await svc.release({
        app: 'app',
        workerId: a.workerId,
        token: a.token + 1,
        lastTimestampMs: Date.now() + 7_200_000,
      }),
    ).toMatchObject({ ok: false, code: 'invalid_argument' });
    // The live lease's release, and a retry of it, are still proposed (a retry may raise the mark).
    expect(await svc.release({ app: 'app', workerId: a.workerId, token: a.token })).toMatchObject({
      ok: true,
    });
    expect(
      await svc.release({ app: 'app', workerId: a.workerId, token: a.token, lastTimestampMs: 5 }),
    ).toMatchObject({ ok: true, alreadyReleased: true });
    expect(node.proposals).toBe(before + 4);
  });
});
