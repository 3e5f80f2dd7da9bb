import { describe, expect, it } from 'vitest';
import { pack, unpack } from '../../node/envelope.js';
import { encodeLeaseCommand, isLeaseCommand } from './codec.js';
import { LeaseStateMachine } from './lease-state-machine.js';
import { expectError, FakeLog } from './test-helpers.js';
import type { LeaseEvent } from './types.js';

describe('acquire', () => {
  it('grants the lowest never-used worker ID with token = log index and high-water 0', () => {
    const log = new FakeLog();
    const a = log.grant('orders', 'a', { ttlMs: 5000 });
    expect(a).toMatchObject({
      ok: true,
      app: 'orders',
      workerId: 0,
      datacenterId: 0,
      localWorkerId: 0,
      workerBits: 10,
      datacenterBits: 0,
      token: 1,
      nodeId: 'a',
      ttlMs: 5000,
      grantedAtMs: log.timeMs,
      expiresAtMs: log.timeMs + 5000,
      highWaterMs: 0,
      boundMs: 0,
      retried: false,
    });
    const b = log.grant('orders', 'b');
    expect([b.workerId, b.token]).toEqual([1, 2]);
    // Pools are per app: another app starts at 0 again.
    expect(log.grant('payments', 'a').workerId).toBe(0);
    expect(log.sm.pool('orders')).toMatchObject({ bits: 10, size: 1024, leased: 2 });
  });

  it('gives a returning nodeId its previous worker ID when it is free', () => {
    const log = new FakeLog();
    const ids = ['a', 'b', 'c'].map((n) => log.grant('app', n).workerId);
    expect(ids).toEqual([0, 1, 2]);
    const b = log.sm.lease('app', 1)!;
    log.run({ op: 'release', app: 'app', workerId: 1, token: b.token, lastTimestampMs: 0 });
    // A fresh ID (3) exists, yet b gets 1 back.
    const again = log.grant('app', 'b', { requestId: 'second-life' });
    expect(again.workerId).toBe(1);
    expect(again.token).toBeGreaterThan(b.token);
  });

  it('does not give a returning nodeId its old ID when someone else holds it', () => {
    const log = new FakeLog();
    log.run({ op: 'configurePool', app: 'app', bits: 1, datacenterBits: 0 }); // 2 IDs
    const a = log.grant('app', 'a');
    log.run({ op: 'release', app: 'app', workerId: a.workerId, token: a.token, lastTimestampMs: 0 });
    log.grant('app', 'x'); // fresh ID 1
    const y = log.grant('app', 'y'); // only 0 is free: a's old ID
    expect(y.workerId).toBe(0);
    const aBack = log.acquire('app', 'a', { requestId: 'again' });
    expect(expectError(aBack).code).toBe('pool_exhausted');
    // Once y leaves, a does not get 0 back by memory any more (y held it last) but 0 is simply free.
    log.run({ op: 'release', app: 'app', workerId: 0, token: y.token, lastTimestampMs: 0 });
    expect(log.sm.worker('app', 0)?.nodeId).toBe('y');
    expect(log.grant('app', 'a', { requestId: 'third' }).workerId).toBe(0);
  });

  it('prefers never-used IDs, then the ID free the longest', () => {
    const log = new FakeLog();
    log.run({ op: 'configurePool', app: 'app', bits: 2, datacenterBits: 0 }); // 4 IDs
    const a = log.grant('app', 'a');
    log.run({ op: 'release', app: 'app', workerId: a.workerId, token: a.token, lastTimestampMs: 0 });
    expect(log.grant('app', 'b').workerId).toBe(1); // never-used 1 before freed 0
    const c = log.grant('app', 'c');
    const d = log.grant('app', 'd');
    expect([c.workerId, d.workerId]).toEqual([2, 3]);
    log.run({ op: 'release', app: 'app', workerId: 3, token: d.token, lastTimestampMs: 0 });
    log.run({ op: 'release', app: 'app', workerId: 2, token: c.token, lastTimestampMs: 0 });
    // Free: 0 (freed first), 3, 2.
    expect(log.sm.freeOrder('app')).toEqual([0, 3, 2]);
    expect(['e', 'f', 'g'].map((n) => log.grant('app', n).workerId)).toEqual([0, 3, 2]);
  });

  it('is idempotent for the same requestId and refuses another requestId while the lease lives', () => {
    const log = new FakeLog();
    const first = log.grant('app', 'n1', { requestId: 'r1', incarnation: 'p1', boundMs: log.timeMs });
    const retry = log.grant('app', 'n1', { requestId: 'r1', incarnation: 'p1', ttlMs: 60_000 });
    expect(retry).toEqual({ ...first, retried: true });
    const other = expectError(log.acquire('app', 'n1', { requestId: 'r2' }));
    expect(other.code).toBe('lease_held');
    expect(other.message).toMatch(/"n1" already holds worker ID 0 in app app under another requestId/);
    expect(log.sm.pool('app')?.leased).toBe(1);
  });

  it('scenario (a): a cached requestId presented by another process incarnation gets lease_held, not the live grant', () => {
    const log = new FakeLog();
    const first = log.grant('app', 'n1', { requestId: 'cached', incarnation: 'proc-1' });
    expect(first).toMatchObject({ requestId: 'cached', incarnation: 'proc-1', retried: false });
    // The same process retrying (its reply was lost) gets the same grant back.
    expect(log.grant('app', 'n1', { requestId: 'cached', incarnation: 'proc-1' })).toEqual({
      ...first,
      retried: true,
    });
    // A second live process that read the same cache file: same nodeId and requestId, another incarnation.
    const second = expectError(log.acquire('app', 'n1', { requestId: 'cached', incarnation: 'proc-2' }));
    expect(second.code).toBe('lease_held');
    expect(second.message).toMatch(/another process incarnation/);
    // Without an incarnation (an older client, or RESP without INCARNATION) it is not the same process either.
    expect(expectError(log.acquire('app', 'n1', { requestId: 'cached' })).code).toBe('lease_held');
    expect(log.sm.pool('app')?.leased).toBe(1);
    // Review finding R1b: two processes that send no incarnation and one requestId. Without an incarnation a repeat
    // is never a retry: the second gets lease_held, not the first one's worker ID and token.
    const old = log.grant('app', 'n2', { requestId: 'r' });
    expect(old.incarnation).toBe('');
    const repeat = expectError(log.acquire('app', 'n2', { requestId: 'r' }));
    expect(repeat.code).toBe('lease_held');
    expect(repeat.message).toMatch(/without an incarnation a repeat is not recognised as a retry/);
    expect(expectError(log.acquire('app', 'n2', { requestId: 'r', incarnation: 'x' })).code).toBe(
      'lease_held',
    );
  });

  it('review finding R3: the first acquire naming a layout pins it for the app; another layout is refused, also after a snapshot', () => {
    const log = new FakeLog();
    // Unpinned until an acquire names a layout (raw clients without one are not checked).
    expect(log.grant('app', 'raw').layout).toBe('');
    const a = log.grant('app', 'a', { layout: 'e1/u1' });
    expect(a.layout).toBe('e1/u1');
    log.run({ op: 'release', app: 'app', workerId: a.workerId, token: a.token, lastTimestampMs: 5 });
    const other = expectError(log.acquire('app', 'b', { layout: 'e1/u10' }));
    expect(other.code).toBe('layout_mismatch');
    expect(other.message).toMatch(/pinned to ID layout e1\/u1; this acquire names e1\/u10/);
    expect(log.grant('app', 'b', { layout: 'e1/u1' }).layout).toBe('e1/u1');
    expect(log.grant('other-app', 'b', { layout: 'e1/u10' }).layout).toBe('e1/u10');
    const next = new FakeLog();
    next.sm.restore(log.sm.snapshot());
    next.index = log.index;
    expect(expectError(next.acquire('app', 'c', { layout: 'e1/u10' })).code).toBe('layout_mismatch');
    expect(expectError(next.acquire('app', 'c', { layout: '' })).code).toBe('invalid_argument');
  });

  it('validates the incarnation', () => {
    const log = new FakeLog();
    expect(expectError(log.acquire('app', 'n', { incarnation: '' })).message).toMatch(
      /^incarnation must be a string of 1..128/,
    );
    expect(expectError(log.acquire('app', 'n', { incarnation: 'x'.repeat(129) })).code).toBe(
      'invalid_argument',
    );
  });

  it('fills a 10-bit pool with 1,024 instances and refuses the next one clearly', () => {
    const log = new FakeLog();
    const seen = new Set<number>();
    for (let i = 0; i < 1024; i++) seen.add(log.grant('fill', `node-${i}`).workerId);
    expect(seen.size).toBe(1024);
    expect(Math.min(...seen)).toBe(0);
    expect(Math.max(...seen)).toBe(1023);
    const err = expectError(log.acquire('fill', 'node-1024'));
    expect(err.code).toBe('pool_exhausted');
    expect(err.message).toContain('app fill');
    expect(err.message).toContain('all 1024 IDs of its 10-bit pool are leased');
  });

  it('splits worker IDs into datacenter and worker bits', () => {
    const log = new FakeLog();
    const cfg = log.run({ op: 'configurePool', app: 'dc', bits: 10, datacenterBits: 5 });
    expect(cfg).toMatchObject({ ok: true, size: 1024, created: true });
    let last = log.grant('dc', 'n0');
    for (let i = 1; i <= 37; i++) last = log.grant('dc', `n${i}`);
    expect(last).toMatchObject({
      workerId: 37,
      datacenterId: 1,
      localWorkerId: 5,
      datacenterBits: 5,
      workerBits: 5,
    });
    expect(log.sm.worker('dc', 37)).toMatchObject({ datacenterId: 1, localWorkerId: 5, live: true });
  });

  it('validates ttl, app, nodeId, requestId and bound with errors naming the range', () => {
    const log = new FakeLog();
    expect(expectError(log.acquire('app', 'n', { ttlMs: 999 })).message).toBe(
      'ttlMs must be an integer in 1000..3600000, got 999',
    );
    expect(expectError(log.acquire('app', 'n', { ttlMs: 3_600_001 })).code).toBe('invalid_argument');
    expect(expectError(log.acquire('*', 'n')).message).toMatch(/^app must be 1..128 characters/);
    expect(expectError(log.acquire('app', '')).message).toMatch(/^nodeId must be a string of 1..256/);
    expect(expectError(log.acquire('app', 'n', { requestId: 'x'.repeat(129) })).message).toMatch(
      /^requestId must be a string of 1..128/,
    );
    const far = expectError(log.acquire('app', 'n', { boundMs: log.timeMs + 10 * 3_600_000 }));
    expect(far.message).toMatch(/boundMs \d+ is more than 3600000 ms ahead of the leader's clock/);
    expect(log.sm.pool('app')).toBeUndefined(); // nothing was created by refused commands
  });

  it('answers undecodable or unknown commands with bad_command and never throws', () => {
    const sm = new LeaseStateMachine();
    const ctx = { index: 1, term: 1, leaderTimeMs: 0 };
    expect(sm.apply(new Uint8Array([0xc1]), ctx)).toMatchObject({ ok: false, code: 'bad_command' });
    expect(sm.apply(pack({ ns: 'lease', op: 'steal' }), ctx)).toMatchObject({
      ok: false,
      code: 'bad_command',
      message: expect.stringContaining('unknown lease op "steal"'),
    });
    expect(sm.apply(pack({ ns: 'kv', op: 'acquire' }), ctx)).toMatchObject({ code: 'bad_command' });
    expect(sm.apply(pack([1, 2, 3]), ctx)).toMatchObject({ code: 'bad_command' });
    expect(sm.apply(pack({ ns: 'lease', op: 'expire', items: [] }), ctx)).toMatchObject({
      code: 'invalid_argument',
    });
  });

  it('tags every command with the lease namespace', () => {
    const bytes = encodeLeaseCommand({ op: 'expire', items: [['a', 1, 2]] });
    expect(isLeaseCommand(unpack(bytes))).toBe(true);
    expect(isLeaseCommand({ ns: 'auth' })).toBe(false);
  });
});

describe('renew, release and expire', () => {
  it('refuses a stale or wrong token without revealing the live one', () => {
    const log = new FakeLog();
    log.index = 70_000; // distinctive tokens, so the message check below means something
    const a = log.grant('app', 'a');
    log.run({ op: 'release', app: 'app', workerId: 0, token: a.token, lastTimestampMs: 0 });
    const b = log.grant('app', 'b', { requestId: 'rb' }); // gets ID 1 (fresh), then:
    expect(b.workerId).toBe(1);
    const c = log.grant('app', 'a', { requestId: 'ra2' }); // a returns to 0 with a new token
    expect(c.workerId).toBe(0);
    for (const token of [a.token, c.token + 1000]) {
      const renew = expectError(log.run({ op: 'renew', app: 'app', workerId: 0, token, boundMs: 1 }));
      expect(renew.code).toBe('stale_token');
      expect(renew.message).not.toMatch(new RegExp(`\\b${c.token}\\b`));
      const rel = expectError(log.run({ op: 'release', app: 'app', workerId: 0, token, lastTimestampMs: 1 }));
      expect(rel.code).toBe('stale_token');
    }
    expect(log.sm.lease('app', 0)?.token).toBe(c.token);
    const notHeld = expectError(log.run({ op: 'renew', app: 'app', workerId: 5, token: 1, boundMs: 1 }));
    expect(notHeld.code).toBe('not_held');
    const outOfRange = expectError(
      log.run({ op: 'renew', app: 'app', workerId: 5000, token: 1, boundMs: 1 }),
    );
    expect(outOfRange.message).toBe(
      'workerId must be an integer in 0..1023 for app app (10-bit pool), got 5000',
    );
  });

  it('never lowers the high-water mark and hands it to the next holder', () => {
    const log = new FakeLog();
    const t0 = log.timeMs;
    const a = log.grant('app', 'a', { boundMs: t0 + 500 });
    expect(a.highWaterMs).toBe(0); // the floor: nobody held ID 0 before
    expect(a.boundMs).toBe(t0 + 500);
    const r1 = log.run({ op: 'renew', app: 'app', workerId: 0, token: a.token, boundMs: t0 + 9000 });
    expect(r1).toMatchObject({ ok: true, boundMs: t0 + 9000 });
    const r2 = log.run({ op: 'renew', app: 'app', workerId: 0, token: a.token, boundMs: t0 + 100 });
    expect(r2).toMatchObject({ ok: true, boundMs: t0 + 9000 });
    const rel = log.run({ op: 'release', app: 'app', workerId: 0, token: a.token, lastTimestampMs: t0 + 50 });
    expect(rel).toMatchObject({ ok: true, highWaterMs: t0 + 9000, alreadyReleased: false });
    const b = log.grant('app', 'a', { requestId: 'again' });
    expect(b.highWaterMs).toBe(t0 + 9000);
    // A release that raises: the holder used timestamps above its last bound? No: within the bound.
    const rel2 = log.run({
      op: 'release',
      app: 'app',
      workerId: 0,
      token: b.token,
      lastTimestampMs: t0 + 9500,
    });
    expect(rel2).toMatchObject({ highWaterMs: t0 + 9500 });
  });

  it('treats a repeated release with the same token as done', () => {
    const log = new FakeLog();
    const a = log.grant('app', 'a');
    const cmd = { op: 'release' as const, app: 'app', workerId: 0, token: a.token, lastTimestampMs: 42 };
    expect(log.run(cmd)).toMatchObject({ ok: true, alreadyReleased: false });
    expect(log.run(cmd)).toMatchObject({ ok: true, alreadyReleased: true, highWaterMs: 42 });
    expect(log.sm.pool('app')?.leased).toBe(0);
  });

  it('expires only leases whose token matches, and the ID comes back with its high-water mark', () => {
    const log = new FakeLog();
    const a = log.grant('app', 'a', { boundMs: log.timeMs + 1000 });
    const b = log.grant('app', 'b');
    const res = log.run({
      op: 'expire',
      items: [
        ['app', 0, a.token],
        ['app', 1, b.token + 1], // wrong token: untouched
        ['nope', 0, 1], // no such pool
      ],
    });
    expect(res).toMatchObject({
      ok: true,
      expired: 1,
      items: [
        { workerId: 0, expired: true },
        { workerId: 1, expired: false },
        { app: 'nope', expired: false },
      ],
    });
    expect(log.sm.lease('app', 0)).toBeUndefined();
    expect(log.sm.lease('app', 1)?.token).toBe(b.token);
    expect(log.sm.worker('app', 0)).toMatchObject({ live: false, nodeId: 'a', freedAtIndex: log.index });
    const again = log.grant('app', 'a', { requestId: 'back' });
    expect(again.workerId).toBe(0);
    expect(again.highWaterMs).toBe(a.boundMs);
  });

  it('reports granted, renewed, released and expired events to subscribers', () => {
    const log = new FakeLog();
    const events: LeaseEvent['type'][] = [];
    const off = log.sm.subscribe((e) => events.push(e.type));
    log.sm.subscribe(() => {
      throw new Error('a broken listener must not break apply');
    });
    const a = log.grant('app', 'a');
    log.run({ op: 'renew', app: 'app', workerId: 0, token: a.token, boundMs: 5 });
    log.run({ op: 'release', app: 'app', workerId: 0, token: a.token, lastTimestampMs: 5 });
    const b = log.grant('app', 'b');
    log.run({ op: 'expire', items: [['app', b.workerId, b.token]] });
    off();
    log.grant('app', 'c');
    expect(events).toEqual(['granted', 'renewed', 'released', 'granted', 'expired']);
  });
});

describe('configurePool', () => {
  it('review finding F3: a pool whose worker IDs were used keeps its datacenter split (a resize would hand a used pair to another worker ID)', () => {
    const log = new FakeLog();
    expect(log.run({ op: 'configurePool', app: 'app', bits: 6, datacenterBits: 1 })).toMatchObject({
      ok: true,
    });
    const taken: number[] = [];
    // Lease worker IDs up to 32 (= datacenter 1, local worker 0 under 1 datacenter bit).
    for (let i = 0; i <= 32; i++) taken.push(log.grant('app', `n${i}`).workerId);
    expect(log.sm.lease('app', 32)?.datacenterId).toBe(1);
    for (const [i, w] of taken.entries()) {
      const l = log.sm.lease('app', w);
      log.run({ op: 'release', app: 'app', workerId: w, token: l!.token, lastTimestampMs: 1_000 + i });
    }
    // Before the fix: resized to 2 datacenter bits, worker 16 became (datacenter 1, local 0) with a floor of 0.
    const fixed = expectError(log.run({ op: 'configurePool', app: 'app', bits: 6, datacenterBits: 2 }));
    expect(fixed.code).toBe('pool_split_fixed');
    expect(fixed.message).toMatch(/used worker IDs under its split/);
    expect(expectError(log.run({ op: 'configurePool', app: 'app', bits: 7, datacenterBits: 1 })).code).toBe(
      'pool_split_fixed',
    );
    // A pool without a split keeps each worker ID's identity through any size: it may grow and shrink.
    const flat = new FakeLog();
    const l = flat.grant('flat', 'a');
    flat.run({ op: 'release', app: 'flat', workerId: l.workerId, token: l.token, lastTimestampMs: 0 });
    expect(flat.run({ op: 'configurePool', app: 'flat', bits: 12, datacenterBits: 0 })).toMatchObject({
      ok: true,
    });
    expect(flat.run({ op: 'configurePool', app: 'flat', bits: 4, datacenterBits: 0 })).toMatchObject({
      ok: true,
    });
    expect(expectError(flat.run({ op: 'configurePool', app: 'flat', bits: 4, datacenterBits: 1 })).code).toBe(
      'pool_split_fixed',
    );
  });

  it('refuses to resize a pool with live leases and allows it once empty', () => {
    const log = new FakeLog();
    const a = log.grant('app', 'a');
    expect(log.run({ op: 'configurePool', app: 'app', bits: 10, datacenterBits: 0 })).toMatchObject({
      ok: true,
      changed: false,
    });
    const busy = expectError(log.run({ op: 'configurePool', app: 'app', bits: 12, datacenterBits: 0 }));
    expect(busy.code).toBe('pool_busy');
    expect(busy.message).toMatch(/app app has 1 live lease/);
    expect(expectError(log.run({ op: 'configurePool', app: 'app', bits: 10, datacenterBits: 2 })).code).toBe(
      'pool_busy',
    );
    log.run({ op: 'release', app: 'app', workerId: 0, token: a.token, lastTimestampMs: 0 });
    expect(log.run({ op: 'configurePool', app: 'app', bits: 12, datacenterBits: 0 })).toMatchObject({
      ok: true,
      size: 4096,
      changed: true,
    });
    expect(
      expectError(log.run({ op: 'configurePool', app: 'app', bits: 23, datacenterBits: 0 })).message,
    ).toBe('bits must be an integer in 1..22, got 23');
    expect(
      expectError(log.run({ op: 'configurePool', app: 'app', bits: 4, datacenterBits: 5 })).message,
    ).toBe('datacenterBits must be an integer in 0..4, got 5');
  });

  it('keeps the high-water mark of IDs outside a shrunk pool and restores them when it grows', () => {
    const log = new FakeLog();
    const grants = ['a', 'b', 'c', 'd'].map((n) => log.grant('app', n, { boundMs: log.timeMs }));
    for (const g of grants) {
      log.run({ op: 'release', app: 'app', workerId: g.workerId, token: g.token, lastTimestampMs: 0 });
    }
    log.run({ op: 'configurePool', app: 'app', bits: 1, datacenterBits: 0 }); // IDs 0..1
    expect(log.sm.freeOrder('app')).toEqual([0, 1]);
    const d = log.acquire('app', 'd', { requestId: 'again' }); // d's old ID 3 is out of range
    expect(d).toMatchObject({ ok: true, workerId: 0, highWaterMs: grants[0]!.boundMs });
    log.run({
      op: 'release',
      app: 'app',
      workerId: 0,
      token: (d as { token: number }).token,
      lastTimestampMs: 0,
    });
    log.run({ op: 'configurePool', app: 'app', bits: 10, datacenterBits: 0 });
    // 2 and 3 are back with their marks; fresh IDs (4..) are preferred, so ask as the old holder of 2.
    const c = log.grant('app', 'c', { requestId: 'again' });
    expect(c.workerId).toBe(2);
    expect(c.highWaterMs).toBe(grants[2]!.boundMs);
    expect(log.grant('app', 'new').workerId).toBe(4);
  });
});

describe('snapshots', () => {
  it('restores the whole state, including the free order and who held what', () => {
    const log = new FakeLog();
    const ids = ['a', 'b', 'c', 'd', 'e'].map((n) => log.grant('app', n, { boundMs: log.timeMs }));
    log.run({ op: 'configurePool', app: 'dc', bits: 4, datacenterBits: 2 });
    log.grant('dc', 'z');
    for (const i of [3, 1, 4]) {
      const g = ids[i]!;
      log.run({ op: 'release', app: 'app', workerId: g.workerId, token: g.token, lastTimestampMs: 0 });
    }
    const copy = new LeaseStateMachine();
    copy.restore(log.sm.snapshot());
    expect(copy.snapshot()).toEqual(log.sm.snapshot());
    expect(copy.freeOrder('app')).toEqual([3, 1, 4]);
    expect(copy.leases('app')).toEqual(log.sm.leases('app'));
    expect(copy.poolList()).toEqual(log.sm.poolList());
    expect(copy.leaseCount).toBe(3);
    expect(copy.appliedIndex).toBe(log.index);
    // Behaviour continues identically: b returns to 1, a newcomer takes fresh 5.
    const next = new FakeLog(copy);
    next.index = log.index;
    next.timeMs = log.timeMs;
    expect(next.grant('app', 'b', { requestId: 'x' }).workerId).toBe(
      log.grant('app', 'b', { requestId: 'x' }).workerId,
    );
    expect(next.grant('app', 'new').workerId).toBe(5);
  });

  it("keeps each lease's incarnation across a snapshot, and restores a version-1 snapshot (no incarnations)", () => {
    const log = new FakeLog();
    log.grant('app', 'a', { requestId: 'ra', incarnation: 'inc-a' });
    log.grant('app', 'b', { requestId: 'rb' });
    const copy = new LeaseStateMachine();
    copy.restore(log.sm.snapshot());
    expect(copy.snapshot()).toEqual(log.sm.snapshot());
    const next = new FakeLog(copy);
    next.index = log.index;
    expect(next.grant('app', 'a', { requestId: 'ra', incarnation: 'inc-a' }).retried).toBe(true);
    expect(expectError(next.acquire('app', 'a', { requestId: 'ra', incarnation: 'other' })).code).toBe(
      'lease_held',
    );
    // A version-1 snapshot (11 fields per record, no incarnation) restores with incarnation ''.
    const v1 = unpack<{
      v: number;
      applied: number;
      pools: [string, number, number, number, unknown[], number[]][];
    }>(log.sm.snapshot());
    const per = v1.pools[0]![4].length / 2;
    v1.v = 1;
    v1.pools[0]![4] = v1.pools[0]![4].filter((_, i) => i % per !== per - 1);
    const old = new LeaseStateMachine();
    old.restore(pack(v1));
    expect(old.leases('app').map((l) => l.nodeId)).toEqual(['a', 'b']);
    const o = new FakeLog(old);
    o.index = log.index;
    // A version-1 lease has no incarnation: no repeat of its requestId is a retry (finding R1b).
    expect(expectError(o.acquire('app', 'b', { requestId: 'rb' })).code).toBe('lease_held');
    expect(expectError(o.acquire('app', 'a', { requestId: 'ra', incarnation: 'inc-a' })).code).toBe(
      'lease_held',
    );
  });

  it('refuses a snapshot of an unknown version', () => {
    expect(() => new LeaseStateMachine().restore(pack({ v: 99 }))).toThrow(/version 99 is not supported/);
  });
});
