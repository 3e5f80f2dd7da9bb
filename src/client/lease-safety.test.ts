// Issue 9, items 1-4 in the SDK: each test is named after the scenario it reproduces (fake cluster, virtual time).
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CeilingReachedError, defineLayout } from '../id/index.js';
import { FloeRequestError, LeaseLostError, LeaseRenewalLateError } from './errors.js';
import { FloeClient, type FloeClientOptions, type LeaseWorkerOptions } from './floe-client.js';
import type { LeaseCacheRecord } from './lease-cache.js';
import { FakeCluster, FakeTime, fakeClientOptions, leaseDriven, leaveDeadLock } from './test-doubles.js';

const WALL0 = Date.UTC(2026, 5, 1);

function setup(extra: Partial<FloeClientOptions> = {}, cluster = new FakeCluster(['10.0.0.1:7380'])) {
  const time = new FakeTime(WALL0);
  const client = (more: Partial<FloeClientOptions> = {}) =>
    new FloeClient(fakeClientOptions(cluster, time, { ...extra, ...more }));
  return { cluster, time, client: client(), newClient: client };
}

/** leaseWorker, driving virtual time until it settles. */
const lease = (s: { time: FakeTime }, c: FloeClient, o: Partial<LeaseWorkerOptions> = {}) =>
  leaseDriven(s.time, c, { app: 'orders', nodeId: 'n1', ttlMs: 3000, ...o });

const errorOf = async (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e as Error & { code?: string },
  );
const tmp = () => join(mkdtempSync(join(tmpdir(), 'floe-safety-')), 'lease.json');

describe('issue 9 item 1: every reply must match its request', () => {
  it("an acquire answered with another request's grant is an error, never a lease", async () => {
    for (const [field, value] of [
      ['nodeId', 'victim'],
      ['requestId', 'someone-else'],
      ['incarnation', 'other-process'],
      ['app', 'payments'],
      ['op', 'renew'],
      ['ttlMs', 60_000],
      ['token', 'x'],
    ] as const) {
      const s = setup();
      s.cluster.tamper = (path, body) => (path.endsWith('/acquire') ? { ...body, [field]: value } : body);
      const err = await errorOf(lease(s, s.client));
      expect(err?.code, field).toBe('ERR_REPLY_MISMATCH');
      expect(err?.message).toContain(field);
    }
  });

  it('a renewal answered for another worker or token is not used: the deadline stays, the lease ends at it', async () => {
    const s = setup();
    const l = await lease(s, s.client);
    const deadline = l.deadlineMono;
    const failed: Error[] = [];
    l.on('renewFailed', (e: Error) => failed.push(e));
    s.cluster.tamper = (path, body) =>
      path.endsWith('/renew') ? { ...body, token: Number(body.token) + 1 } : body;
    await s.time.advance(1100);
    expect(failed.length).toBeGreaterThan(0);
    expect((failed[0] as Error & { code?: string }).code).toBe('ERR_REPLY_MISMATCH');
    expect(l.deadlineMono).toBe(deadline);
    await s.time.advance(deadline - s.time.t);
    expect(l.valid).toBe(false);
  });

  it('a release answered for another worker is an error', async () => {
    const s = setup();
    const l = await lease(s, s.client);
    s.cluster.tamper = (path, body) => (path.endsWith('/release') ? { ...body, workerId: 7 } : body);
    const p = errorOf(l.release());
    await s.time.advance(10);
    expect((await p)?.code).toBe('ERR_REPLY_MISMATCH');
  });
});

describe('issue 9 item 2: two live processes never get one lease', () => {
  it('scenario (a): a second process with the same cache path cannot touch the cache; it fails naming the path and the holder pid', async () => {
    const cachePath = tmp();
    const s = setup();
    const first = await lease(s, s.client, { cachePath });
    const firstRecord = readFileSync(cachePath, 'utf8');
    const second = s.newClient({ incarnation: 'second-process' });
    const err = await errorOf(lease(s, second, { cachePath, cacheLockWaitMs: 500 }));
    expect(err?.code).toBe('ERR_CACHE_LOCKED');
    expect(err?.message).toContain(cachePath);
    expect(err?.message).toContain(`pid ${process.pid}`);
    // It sent nothing and left the cache alone; the first lease goes on.
    expect(s.cluster.requests.filter((r) => r.path.endsWith('/acquire'))).toHaveLength(1);
    expect(first.valid).toBe(true);
    expect(JSON.parse(readFileSync(cachePath, 'utf8')).token).toBe(JSON.parse(firstRecord).token);
  });

  it('scenario (a) without a shared cache: another incarnation presenting the same requestId gets lease_held, not the live lease', async () => {
    const s = setup();
    const first = await lease(s, s.client, { requestId: 'cached-id' });
    const second = s.newClient({ incarnation: 'second-process' });
    const err = await errorOf(lease(s, second, { requestId: 'cached-id', acquireTimeoutMs: 500 }));
    expect((err as { serverCode?: string })?.serverCode).toBe('lease_held');
    expect(s.cluster.nextToken).toBe(first.token + 1);
  });

  it("scenario (b): a restart from a crashed predecessor's cache ends that lease and starts a fresh token above everything it used", async () => {
    const cachePath = tmp();
    const s = setup();
    const crashed = await lease(s, s.client, { cachePath });
    crashed.snowflake('floe').next();
    const rec = JSON.parse(readFileSync(cachePath, 'utf8')) as LeaseCacheRecord;
    // The predecessor died without releasing: a lock naming a dead pid is left behind.
    leaveDeadLock(cachePath);
    const restarted = s.newClient({ incarnation: 'restarted' });
    const l = await lease(s, restarted, { cachePath });
    expect(l.workerId).toBe(crashed.workerId); // stable worker ID
    expect(l.token).toBeGreaterThan(crashed.token); // never the predecessor's token
    expect(l.floorMs).toBeGreaterThanOrEqual(rec.usedUpToMs);
    expect(s.cluster.lease('orders', crashed.workerId)?.token).toBe(l.token);
  });

  it('two generators on one lease: the same layout returns the same generator, another layout is refused', async () => {
    const s = setup();
    const l = await lease(s, s.client);
    const a = l.snowflake('floe');
    const b = l.snowflake('floe');
    const seen = new Set<bigint>();
    for (let i = 0; i < 1000; i++) {
      seen.add(a.next());
      seen.add(b.next());
    }
    expect(seen.size).toBe(2000);
    expect(() => l.snowflake('floe', { onSequenceExhausted: 'borrow' })).toThrow(/one generator per lease/);
    expect(() => l.snowflake('twitter')).toThrow(/layout this lease was acquired for/);
  });
});

describe('review finding R3: one ID layout per app', () => {
  const fine = defineLayout({
    name: 'custom-ms',
    epochMs: Date.UTC(2026, 0, 1),
    unitMs: 1,
    timestampBits: 41,
    datacenterBits: 0,
    workerBits: 10,
    sequenceBits: 12,
  });
  const tenMs = defineLayout({ ...fine, name: 'custom-10ms', unitMs: 10 });

  it('a later holder of the app with another layout is refused, so it cannot walk into the first holder’s ticks', async () => {
    const s = setup();
    const a = await lease(s, s.client, { layout: fine });
    const gen = a.snowflake();
    expect(gen.layout.name).toBe('custom-ms');
    gen.next();
    await a.release();
    // Before the pin, B (10 ms ticks, same bits) got the worker with a floor in ms that its layout maps to a tick
    // below A's ticks, and re-issued all of A's IDs.
    const err = await lease(s, s.newClient(), { layout: tenMs }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FloeRequestError);
    expect((err as FloeRequestError).serverCode).toBe('layout_mismatch');
    // The app's own layout still leases.
    const c = await lease(s, s.newClient(), { layout: fine });
    expect(c.workerId).toBe(a.workerId);
    await c.release();
  });

  it('review finding C2: a layout that cannot encode every worker ID of the pool is refused at the first acquire', async () => {
    const s = setup();
    // The fake pool is 10 bits without a datacenter split; twitter has 5 datacenter + 5 worker bits.
    const err = await lease(s, s.client, { layout: 'twitter' }).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/room for every worker ID of app orders's pool, 10 bits/);
    // The worker ID went back.
    expect(s.cluster.requests.filter((r) => r.path.endsWith('/release'))).toHaveLength(1);
  });

  it('a lease generates only with the layout it was acquired for', async () => {
    const s = setup();
    const l = await lease(s, s.client, { layout: fine });
    expect(() => l.snowflake(tenMs)).toThrow(/layout this lease was acquired for/);
    expect(() => l.snowflake('twitter')).toThrow(/layout this lease was acquired for/);
    expect(l.snowflake(fine).layout.name).toBe('custom-ms');
  });
});

describe('issue 9 item 3: coarse ticks never outlive the deadline', () => {
  const coarse = defineLayout({
    name: 'coarse',
    epochMs: Date.UTC(2026, 0, 1),
    unitMs: 1000,
    timestampBits: 31,
    datacenterBits: 0,
    workerBits: 10,
    sequenceBits: 22,
  });

  it('unitMs 1000, TTL 2 s, margin 300 ms: no ID is returned after the deadline, inside a tick', async () => {
    const s = setup();
    const l = await lease(s, s.client, { ttlMs: 2000, safetyMarginMs: 300, layout: coarse });
    const gen = l.snowflake(coarse);
    s.cluster.leader = undefined; // no renewal from now on
    const deadline = l.deadlineMono; // 1,700 ms after the acquire was sent at 0
    // Start a tick shortly before the deadline (the wall clock is at a tick start at WALL0 + k s).
    await s.time.advance(deadline - 150 - s.time.t);
    // A busy caller: time passes, but no timer gets to run (the event loop is never free).
    let last = -1;
    expect(() => {
      for (let i = 0; i < 100; i++) {
        gen.next();
        last = s.time.t;
        s.time.t += 10;
      }
    }).toThrow(/^lease on worker ID/); // LeaseRenewalLateError in the last tick, LeaseLostError after the deadline
    expect(last).toBeLessThan(deadline);
  });

  it('after waiting for the next tick, next() checks the deadline again', async () => {
    const tiny = defineLayout({ ...coarse, name: 'tiny', workerBits: 31, sequenceBits: 1 });
    const s = setup();
    const l = await lease(s, s.client, { ttlMs: 2000, safetyMarginMs: 300, layout: tiny });
    const gen = l.snowflake(tiny);
    s.cluster.leader = undefined;
    await s.time.advance(300);
    let issuedAfter = 0;
    expect(() => {
      for (let i = 0; i < 20; i++) {
        gen.next(); // two per tick; then it waits (the fake wall clock jumps to the next tick)
        if (s.time.wall.now() - WALL0 >= l.deadlineMono) issuedAfter++;
      }
    }).toThrow(/^lease on worker ID/);
    expect(issuedAfter).toBe(0);
  });

  it('inside the last tick before the deadline the refusal is transient: the lease renews on and the generator resumes (swarm seed 1030)', async () => {
    // Before (FS-16), the generator threw LeaseLostError here while the lease stayed valid and kept renewing: a caller
    // that did what the error says ("lease again") met its own live lease (lease_held, or its own cache lock) for as
    // long as the process lived (full simulation, every-client liveness).
    const s = setup();
    const l = await lease(s, s.client, { ttlMs: 3000, safetyMarginMs: 300, layout: coarse });
    const gen = l.snowflake(coarse);
    s.cluster.leader = undefined; // renewals fail for a while
    await s.time.advance(l.deadlineMono - 500 - s.time.t);
    expect(l.valid).toBe(true); // inside the last tick before the deadline
    expect(() => gen.next()).toThrow(LeaseRenewalLateError);
    expect(l.endedBecause).toBeUndefined();
    s.cluster.leader = s.cluster.hosts[0]; // the cluster is back: the next renewal is acknowledged
    let renewed = false;
    l.once('renewed', () => {
      renewed = true;
    });
    for (let i = 0; i < 50 && !renewed; i++) await s.time.advance(10);
    expect(renewed).toBe(true);
    expect(l.valid).toBe(true);
    expect(typeof gen.next()).toBe('bigint');
  });

  it('past the deadline, before its timer ran (a busy caller), LeaseLostError means the lease has ended: no more renewals', async () => {
    const s = setup();
    const l = await lease(s, s.client, { ttlMs: 3000, safetyMarginMs: 300, layout: coarse });
    const gen = l.snowflake(coarse);
    s.cluster.leader = undefined;
    await s.time.advance(l.deadlineMono - 500 - s.time.t);
    s.time.t += 600; // the event loop is busy: no timer runs across the deadline
    expect(() => gen.next()).toThrow(LeaseLostError);
    expect(l.endedBecause).toBe('deadline');
    s.cluster.leader = s.cluster.hosts[0];
    const renewals = () => s.cluster.requests.filter((r) => r.path.endsWith('/renew')).length;
    await s.time.advance(l.ttlMs); // a renewal already in flight may still retry within its budget; its answer is ignored
    const before = renewals();
    await s.time.advance(5000);
    expect(renewals()).toBe(before);
    s.cluster.expire('orders', l.workerId); // so the cluster expires it (no renewal for more than a TTL)
    const again = await lease(s, s.client, { ttlMs: 3000, safetyMarginMs: 300, layout: coarse });
    expect(again.valid).toBe(true);
    expect(again.token).not.toBe(l.token);
  });

  it('refuses a layout whose tick leaves no time between renewals, naming the option', async () => {
    const s = setup();
    const l = await lease(s, s.client, { ttlMs: 1000, layout: coarse });
    expect(() => l.snowflake(coarse)).toThrow(/unitMs/);
  });
});

describe('issue 9 item 4: clocks the deadline must not trust', () => {
  it('a restart with a per-process monotonic clock does not trust the cached monotonic deadline', async () => {
    const cachePath = tmp();
    const s = setup();
    const ttlMs = 10_000;
    const l = await lease(s, s.client, { cachePath, ttlMs });
    l.snowflake('floe').next();
    s.cluster.leader = undefined;
    // The process dies; 17.5 s of wall time later a new one starts, whose own clock begins at 0 again.
    await s.time.advance(17_500);
    leaveDeadLock(cachePath, 'boot-1', ttlMs);
    const startedAt = s.time.t;
    const fresh = s.newClient({ monotonic: () => s.time.t - startedAt, incarnation: 'restarted' });
    const err = await errorOf(lease(s, fresh, { cachePath, ttlMs, acquireTimeoutMs: 300 }));
    expect(err?.code).toBe('ERR_UNAVAILABLE');
  });

  it('a suspended machine: the monotonic clock stood still, the wall clock did not; generation stops', async () => {
    const s = setup();
    const l = await lease(s, s.client, { ttlMs: 3000 });
    const gen = l.snowflake('floe');
    gen.next();
    s.cluster.leader = undefined;
    s.time.wall.offset += 5000; // suspended for 5 s (> TTL): CLOCK_MONOTONIC did not advance, the bound is 30 s ahead
    expect(() => gen.next()).toThrow(LeaseLostError);
    expect(l.valid).toBe(false);
  });

  it('validates safetyMarginMs and renewEveryMs together, naming the option', async () => {
    const s = setup();
    const e0 = await errorOf(lease(s, s.client, { safetyMarginMs: 0 }));
    expect(e0?.message).toMatch(/safetyMarginMs = 0/);
    const flap = await errorOf(lease(s, s.client, { ttlMs: 2000, safetyMarginMs: 1000, renewEveryMs: 1000 }));
    expect(flap?.message).toMatch(/renewEveryMs = 1000/);
    // The longest TTL works with every default (the waits derived from it stay in range).
    expect((await lease(s, s.client, { ttlMs: 3_600_000, nodeId: 'long' })).ttlMs).toBe(3_600_000);
  });

  it('the committed bound still stops generation (CeilingReachedError) while renewals succeed without raising it', async () => {
    const s = setup();
    s.cluster.ignoreBounds = true; // renewals succeed but never raise the bound
    const l = await lease(s, s.client, { ttlMs: 3000, boundWindowMs: 4000 });
    const gen = l.snowflake('floe');
    await s.time.advance(4500);
    expect(l.valid).toBe(true);
    expect(() => gen.next()).toThrow(CeilingReachedError);
  });
});

describe('issue 13: holder health (the SDK side)', () => {
  it('a failing health check ends the lease at once and hands the worker ID back; a healthy one renews', async () => {
    const s = setup();
    let healthy = true;
    const l = await lease(s, s.client, { ttlMs: 3000, healthCheck: () => healthy });
    const gen = l.snowflake();
    gen.next();
    const renewals = () => s.cluster.requests.filter((r) => r.path.endsWith('/renew')).length;
    await s.time.advance(1001); // one renewal period (TTL/3)
    expect(renewals()).toBe(1);
    expect(l.valid).toBe(true);
    const lost: string[] = [];
    l.on('lost', (e: LeaseLostError) => lost.push(e.reason));
    healthy = false;
    await s.time.advance(1001);
    expect(lost).toEqual(['unhealthy']);
    expect(renewals()).toBe(1); // no renewal after the failed check
    expect(() => gen.next()).toThrow(LeaseLostError);
    const releases = s.cluster.requests.filter((r) => r.path.endsWith('/release'));
    expect(releases).toHaveLength(1);
    expect(releases[0]?.body).toMatchObject({ token: l.token });
  });

  it('a health check that throws or never answers counts as failed', async () => {
    for (const check of [
      () => {
        throw new Error('database gone');
      },
      () => new Promise<boolean>(() => {}),
    ]) {
      const s = setup();
      const l = await lease(s, s.client, { ttlMs: 3000, healthCheck: check, healthCheckTimeoutMs: 200 });
      const lost: LeaseLostError[] = [];
      l.on('lost', (e: LeaseLostError) => lost.push(e));
      await s.time.advance(1300);
      expect(lost.map((e) => e.reason)).toEqual(['unhealthy']);
      expect(lost[0]?.message).toMatch(/database gone|no answer within 200 ms/);
    }
  });
});

describe('full simulator, swarm seed 400777: a retried acquire whose lease just expired', () => {
  it('lease_expired on an acquire is followed by a fresh grant under the same requestId, not an error', async () => {
    const s = setup();
    s.cluster.faults.push('leaseExpired410');
    const l = await lease(s, s.client);
    expect(l.valid).toBe(true);
    const acquires = s.cluster.requests.filter((r) => r.path.endsWith('/acquire'));
    expect(acquires).toHaveLength(2);
    expect(acquires[1]?.body.requestId).toBe(acquires[0]?.body.requestId);
  });
});
