import { existsSync, linkSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { decode } from '../id/index.js';
import { nodeCacheHost } from './cache-fs.js';
import { hrtimeMonotonic, readBootId } from './clocks.js';
import {
  CacheLockedError,
  FloeRequestError,
  FloeUnavailableError,
  LeaseLostError,
  LeaseRenewalLateError,
  ReplyMismatchError,
} from './errors.js';
import { FloeClient, type FloeClientOptions } from './floe-client.js';
import type { LeaseCacheRecord } from './lease-cache.js';
import { FakeCluster, FakeTime, fakeClientOptions, leaveDeadLock, settle } from './test-doubles.js';
import type { WorkerLease } from './worker-lease.js';

const WALL0 = Date.UTC(2026, 5, 1);
const TTL = 3000;
const MARGIN = TTL / 10 + 100; // the default safety margin

function setup(opts: { hosts?: string[]; user?: string; bootId?: string } = {}) {
  const cluster = new FakeCluster(opts.hosts ?? ['10.0.0.1:7380', '10.0.0.2:7380', '10.0.0.3:7380']);
  const time = new FakeTime(WALL0);
  return { cluster, time, client: clientOf(cluster, time, opts) };
}

/** A client on the fake cluster and virtual time (another one of the same process, when called again). */
function clientOf(cluster: FakeCluster, time: FakeTime, opts: { user?: string; bootId?: string } = {}) {
  return new FloeClient(
    fakeClientOptions(cluster, time, {
      bootId: opts.bootId ?? 'boot-1',
      ...(opts.user ? { user: opts.user, password: 'pw' } : {}),
    }),
  );
}

/** Starts leaseWorker and drives virtual time until it settles. */
async function lease(
  s: ReturnType<typeof setup>,
  extra: Partial<Parameters<FloeClient['leaseWorker']>[0]> = {},
): Promise<WorkerLease> {
  let done = false;
  const p = s.client.leaseWorker({ app: 'orders', nodeId: 'n1', ttlMs: TTL, ...extra }).finally(() => {
    done = true;
  });
  p.catch(() => {}); // observed by the caller; keeps the rejection handled while time is driven
  for (let i = 0; i < 200 && !done; i++) await s.time.advance(10);
  return p;
}

const renewals = (c: FakeCluster) => c.requests.filter((r) => r.path.endsWith('/renew'));

describe('FloeClient: finding the leader and retrying', () => {
  it('follows a 307 to the leader itself, keeping the Authorization header', async () => {
    const s = setup({ user: 'svc' });
    s.cluster.leader = '10.0.0.3:7380';
    const l = await lease(s);
    expect(l.workerId).toBe(0);
    const hosts = s.cluster.requests.map((r) => r.host);
    expect(hosts).toEqual(['10.0.0.1:7380', '10.0.0.3:7380']);
    const auth = `Basic ${Buffer.from('svc:pw').toString('base64')}`;
    expect(s.cluster.requests.every((r) => r.auth === auth)).toBe(true);
    // Later calls go straight to the leader.
    await s.time.advance(TTL / 3 + 1);
    expect(renewals(s.cluster).map((r) => r.host)).toEqual(['10.0.0.3:7380']);
  });

  it('retries an acquire whose answer was lost with the same requestId and gets the same lease', async () => {
    const s = setup();
    s.cluster.faults.push('applyThenDrop');
    const l = await lease(s);
    const acquires = s.cluster.requests.filter((r) => r.path.endsWith('/acquire'));
    // The lost answer, then (after a 307 from the next endpoint tried) the retry at the leader.
    expect(acquires.filter((r) => r.host === s.cluster.leader)).toHaveLength(2);
    expect(new Set(acquires.map((r) => r.body.requestId)).size).toBe(1);
    expect(l.token).toBe(10); // the one grant; the retry re-answered it
    expect(s.cluster.nextToken).toBe(11);
  });

  it('retries 503 not_leader, 504 timeout and network errors with backoff on other endpoints', async () => {
    const s = setup();
    s.cluster.faults.push('noLeader503', 'timeout504', 'network');
    const l = await lease(s);
    expect(l.token).toBe(10);
    expect(s.cluster.requests.length).toBeGreaterThanOrEqual(4); // 3 failures (+ redirects), then the grant
    expect(s.cluster.nextToken).toBe(11);
    expect(new Set(s.cluster.requests.map((r) => r.host)).size).toBeGreaterThan(1);
  });

  it('retries 503 not_committed (index taken by another leader) and 504 outcome_unknown with the same requestId', async () => {
    const s = setup();
    s.cluster.faults.push('notCommitted503', 'outcomeUnknown504');
    const l = await lease(s);
    expect(l.token).toBe(10);
    const acquires = s.cluster.requests.filter((r) => r.path.endsWith('/acquire'));
    expect(acquires.length).toBeGreaterThanOrEqual(3);
    expect(new Set(acquires.map((r) => r.body.requestId)).size).toBe(1);
    expect(s.cluster.nextToken).toBe(11);
  });

  // Regression (FS-17, full-stack simulator, swarm seed 702682): an acquire whose grant's every answer was lost gave
  // up, and each later acquire of the process, under a fresh requestId, met that unused lease (409 lease_held) until
  // it expired: on a lossy network the same thing happened again at the next grant, and the service never ran.
  it('sends the requestId of an acquire that got no answer with the next acquire, and gets the lease it left', async () => {
    const s = setup();
    s.cluster.faults.push('applyThenDrop', ...Array<'network'>(50).fill('network'));
    await expect(lease(s, { acquireTimeoutMs: 200 })).rejects.toBeInstanceOf(FloeUnavailableError);
    expect(s.cluster.lease('orders', 0)?.live).toBe(true); // granted, and nobody knows its token
    s.cluster.faults.length = 0;
    const l = await lease(s, { acquireTimeoutMs: 1000 });
    expect(l.token).toBe(10); // the grant the first call left, answered as a retry
    expect(s.cluster.nextToken).toBe(11);
    const ids = new Set(
      s.cluster.requests.filter((r) => r.path.endsWith('/acquire')).map((r) => r.body.requestId),
    );
    expect(ids.size).toBe(1);
    // A call that got an answer carries nothing: the next acquire (after a release) is a fresh request.
    await l.release();
    const m = await lease(s);
    expect(m.token).toBe(11);
    expect(s.cluster.requests.at(-1)?.body.requestId).not.toBe([...ids][0]);
    await m.release();
  });

  // Review of FS-17's fix, finding 1: the requestId was remembered per FloeClient object, but the incarnation and the
  // cluster's view are the process's: a service that made a new client after the failure met lease_held again.
  it('carries it to another FloeClient of the same process (a client made anew after the failure)', async () => {
    const s = setup();
    s.cluster.faults.push('applyThenDrop', ...Array<'network'>(50).fill('network'));
    await expect(lease(s, { acquireTimeoutMs: 200 })).rejects.toBeInstanceOf(FloeUnavailableError);
    s.cluster.faults.length = 0;
    const again = clientOf(s.cluster, s.time);
    const l = await lease({ ...s, client: again }, { acquireTimeoutMs: 1000 });
    expect(l.token).toBe(10);
    expect(s.cluster.nextToken).toBe(11);
    await l.release();
  });

  // Review of FS-17's fix, finding 2: a reply that names this very request but fails a later check is the node's
  // fault; resending the requestId would only renew a lease nobody can use, every call, for as long as it lasts.
  it('does not carry a requestId whose own reply failed a check (only a reply to another request means no answer)', async () => {
    const s = setup();
    s.cluster.tamper = (path, body) => (path.endsWith('/acquire') ? { ...body, workerBits: -1 } : body);
    await expect(lease(s, { acquireTimeoutMs: 200 })).rejects.toThrow(/workerBits/);
    s.cluster.tamper = undefined;
    const first = s.cluster.requests[0]?.body.requestId;
    const err = await lease(s, { acquireTimeoutMs: 600 }).catch((e: unknown) => e);
    expect((err as FloeRequestError).serverCode).toBe('lease_held'); // the bad grant expires in its own time
    expect(s.cluster.requests.at(-1)?.body.requestId).not.toBe(first);
  });

  it('carries no requestId the caller chose, nor one asked with another TTL', async () => {
    const s = setup();
    s.cluster.faults.push('applyThenDrop', ...Array<'network'>(50).fill('network'));
    await expect(lease(s, { acquireTimeoutMs: 200 })).rejects.toBeInstanceOf(FloeUnavailableError);
    s.cluster.faults.length = 0;
    const first = s.cluster.requests[0]?.body.requestId;
    const err = await lease(s, { acquireTimeoutMs: 600, ttlMs: TTL * 2 }).catch((e: unknown) => e);
    expect((err as FloeRequestError).serverCode).toBe('lease_held');
    expect(s.cluster.requests.at(-1)?.body.requestId).not.toBe(first);
  });

  it('gives up with FloeUnavailableError after the acquire budget, and reports final errors at once', async () => {
    const s = setup();
    s.cluster.leader = undefined;
    await expect(lease(s, { acquireTimeoutMs: 500 })).rejects.toBeInstanceOf(FloeUnavailableError);
    const t = setup();
    t.cluster.poolSize = 0;
    const err = await lease(t).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FloeRequestError);
    expect((err as FloeRequestError).serverCode).toBe('pool_exhausted');
    expect(t.cluster.requests).toHaveLength(1);
  });
});

describe('WorkerLease: renewals, deadline, bounds', () => {
  it('renews in the background about every TTL/3 and moves the deadline to send time + TTL - margin', async () => {
    const s = setup();
    const l = await lease(s);
    const events: number[] = [];
    l.on('renewed', (e: { deadlineMono: number }) => events.push(e.deadlineMono));
    const t0 = s.time.t;
    await s.time.advance(3 * TTL);
    expect(renewals(s.cluster).length).toBeGreaterThanOrEqual(8);
    expect(renewals(s.cluster).length).toBeLessThanOrEqual(10);
    expect(events.length).toBe(renewals(s.cluster).length);
    // The fake answers instantly: each deadline is the renewal's send time + TTL - margin.
    expect(l.deadlineMono).toBeGreaterThan(t0 + 3 * TTL);
    expect(l.deadlineMono).toBeLessThanOrEqual(s.time.t + TTL - MARGIN);
    expect(l.valid).toBe(true);
  });

  it.each([
    ['lease_expired', (c: FakeCluster) => c.expire('orders', 0)],
    [
      'stale_token',
      (c: FakeCluster) => {
        const x = c.lease('orders', 0);
        if (x) x.token = 999;
      },
    ],
  ] as const)('emits lost on %s and its generators throw LeaseLostError at once', async (code, fence) => {
    const s = setup();
    const l = await lease(s);
    const gen = l.snowflake('floe');
    gen.next();
    const lost: LeaseLostError[] = [];
    l.on('lost', (e: LeaseLostError) => lost.push(e));
    fence(s.cluster);
    await s.time.advance(TTL / 3 + 1);
    expect(lost).toHaveLength(1);
    expect(lost[0]?.reason).toBe(code);
    // Same tick as the last ID: the generator must still refuse.
    expect(() => gen.next()).toThrow(LeaseLostError);
    expect(() => l.snowflake('floe')).toThrow(LeaseLostError);
  });

  // Regression (full-stack simulator, nodes seed 211328): with a 1 s TTL a renewal may spend at most 800 ms (TTL less
  // the margin) from its send, and a node's 503 carries `Retry-After: 1`. The transport waited max(backoff, 1000 ms)
  // capped at what was left of the budget, i.e. all of it: one 503 (a balancer landing on a node never added, or
  // not_committed) cost the lease, every time, and the client never issued an ID again.
  it('a renewal answered 503 with Retry-After: 1 under a 1 s TTL is retried in time, and the lease lives on', async () => {
    const s = setup();
    const l = await lease(s, { ttlMs: 1000 });
    const lost: string[] = [];
    l.on('lost', (e: LeaseLostError) => lost.push(e.reason));
    s.cluster.faults.push('notCommitted503');
    await s.time.advance(1000);
    const r = renewals(s.cluster);
    expect(r.length).toBeGreaterThanOrEqual(2); // the refused one and its retry
    expect(lost).toEqual([]);
    expect(l.valid).toBe(true);
    expect(() => l.snowflake('floe').next()).not.toThrow();
  });

  it('emits lost on not_held (the cluster no longer knows the lease)', async () => {
    const s = setup();
    const l = await lease(s);
    const lost: string[] = [];
    l.on('lost', (e: LeaseLostError) => lost.push(e.reason));
    (s.cluster as unknown as { leases: Map<string, unknown> }).leases.clear();
    await s.time.advance(TTL / 3 + 1);
    expect(lost).toEqual(['not_held']);
  });

  it('stops generating at the deadline on its own monotonic clock when the cluster is unreachable', async () => {
    const s = setup();
    const l = await lease(s);
    const sentAt = s.cluster.requests.length === 1 ? 0 : Number.NaN; // acquire sent at virtual time 0
    expect(sentAt).toBe(0);
    const gen = l.snowflake('floe');
    s.cluster.leader = undefined; // every node answers 503 not_leader from now on
    const lost: LeaseLostError[] = [];
    l.on('lost', (e: LeaseLostError) => lost.push(e));
    const deadline = TTL - MARGIN;
    // The generator stops one tick (1 ms) before the deadline: its fast path may go on to the end of that tick.
    await s.time.advance(deadline - 2 - s.time.t);
    expect(l.valid).toBe(true);
    expect(typeof gen.next()).toBe('bigint'); // a tick and a ms before the deadline: still allowed
    await s.time.advance(1);
    // Inside the last tick before the deadline the lease is still valid: a transient refusal (FS-16).
    expect(() => gen.next()).toThrow(LeaseRenewalLateError);
    await s.time.advance(1);
    expect(() => gen.next()).toThrow(LeaseLostError);
    expect(lost).toHaveLength(1);
    expect(lost[0]?.reason).toBe('deadline');
    expect(s.time.t).toBeLessThan(TTL); // before the cluster could reassign the ID
  });

  it('checks the deadline even while the wall clock stands still (at least once per tick of IDs)', async () => {
    const s = setup();
    const l = await lease(s);
    const gen = l.snowflake('floe', { onSequenceExhausted: 'borrow', maxLeadMs: 1000 });
    s.cluster.leader = undefined;
    s.time.wall.offset -= TTL; // the wall clock will not move while the monotonic clock passes the deadline
    await s.time.advance(TTL);
    let issued = 0;
    expect(() => {
      for (let i = 0; i < 10_000; i++) {
        gen.next();
        issued++;
      }
    }).toThrow(LeaseLostError);
    expect(issued).toBeLessThanOrEqual(4096); // at most the rest of one tick
  });

  it('never issues a timestamp above the committed bound, and raises it ahead of need', async () => {
    const s = setup();
    const l = await lease(s, { boundWindowMs: 10_000 });
    const gen = l.snowflake('floe');
    expect(gen.ceiling).toBe(l.boundMs);
    expect(l.boundMs).toBe(WALL0 + 10_000); // promised at acquire: now + window
    // Renewals while headroom >= window/2 promise nothing (not logged).
    await s.time.advance(TTL / 3 + 1);
    expect(renewals(s.cluster)[0]?.body.boundMs).toBeUndefined();
    // Past half the window, a renewal promises now + window.
    await s.time.advance(5000);
    const raised = renewals(s.cluster).filter((r) => r.body.boundMs !== undefined);
    expect(raised.length).toBeGreaterThanOrEqual(1);
    expect(gen.ceiling).toBe(l.boundMs);
    expect(l.boundMs).toBeGreaterThan(WALL0 + 10_000);
    // A wall clock that jumps past the bound (as after a suspend): the lease is over, no ID above the bound.
    s.time.wall.offset += 60_000;
    expect(() => gen.next()).toThrow(LeaseLostError);
  });

  it('starts strictly above the high-water mark, even one ahead of its own clock', async () => {
    const s = setup();
    s.cluster.setHighWater('orders', 0, WALL0 + 7000); // a crashed holder promised 7 s ahead
    const l = await lease(s);
    expect(l.floorMs).toBe(WALL0 + 7000);
    expect(l.leadMs).toBeGreaterThan(0);
    const gen = l.snowflake('floe');
    const first = decode(gen.next(), 'floe');
    expect(first.timestamp).toBeGreaterThan(WALL0 + 7000);
    expect(first.worker).toBe(0);
    // The bound was raised before leaseWorker returned: plenty of headroom above the floor.
    expect(l.boundMs).toBeGreaterThan(WALL0 + 7000 + 10_000);
  });

  it('release reports the last timestamp, emits released, and stops generation at once', async () => {
    const s = setup();
    const dir = mkdtempSync(join(tmpdir(), 'floe-client-'));
    const cachePath = join(dir, 'lease.json');
    const l = await lease(s, { cachePath });
    const gen = l.snowflake('floe');
    gen.next();
    const released: unknown[] = [];
    l.on('released', (e) => released.push(e));
    const p = l.release();
    expect(() => gen.next()).toThrow(LeaseLostError); // same tick, before the answer
    await s.time.advance(10);
    const r = await p;
    expect(r.lastTimestampMs).toBe(gen.lastTimestamp);
    const req = s.cluster.requests.at(-1);
    expect(req?.path).toBe('/v1/apps/orders/workers/0/release');
    expect(req?.body.lastTimestampMs).toBe(gen.lastTimestamp);
    expect(released).toHaveLength(1);
    expect(existsSync(cachePath)).toBe(false);
    expect(existsSync(`${cachePath}.lock`)).toBe(false);
    expect(await l.release()).toBe(r); // idempotent
  });
});

describe('WorkerLease: on-disk cache', () => {
  const restartedClient = (s: ReturnType<typeof setup>, bootId = 'boot-1') =>
    new FloeClient({
      endpoints: s.cluster.hosts,
      fetch: s.cluster.fetch,
      clock: s.time.wall,
      monotonic: s.time.mono,
      setTimer: s.time.setTimer,
      sleep: s.time.sleep,
      bootId,
      incarnation: `restarted-${bootId}`,
    });

  it('writes the lease durably under a lock; a restart ends the cached lease and starts above what was used', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'floe-client-'));
    const cachePath = join(dir, 'lease.json');
    const s = setup();
    const l = await lease(s, { cachePath });
    const gen = l.snowflake('floe');
    gen.next();
    const rec = JSON.parse(readFileSync(cachePath, 'utf8')) as LeaseCacheRecord;
    expect(rec).toMatchObject({
      app: 'orders',
      nodeId: 'n1',
      workerId: 0,
      token: l.token,
      requestId: l.requestId,
      systemMonotonic: false,
    });
    expect(JSON.parse(readFileSync(`${cachePath}.lock`, 'utf8')).pid).toBe(process.pid);
    expect(rec.usedUpToMs).toBeLessThanOrEqual(rec.boundMs);
    expect(gen.ceiling).toBe(rec.usedUpToMs); // the generator never goes past what is on disk
    expect(gen.lastTimestamp).toBeLessThanOrEqual(rec.usedUpToMs);

    // "Crash and restart": the lock names a dead process; the new one ends the cached lease and acquires again.
    leaveDeadLock(cachePath);
    const l2 = await lease({ ...s, client: restartedClient(s) }, { cachePath });
    expect(l2.workerId).toBe(l.workerId);
    expect(l2.token).toBeGreaterThan(l.token);
    expect(l2.floorMs).toBeGreaterThanOrEqual(rec.usedUpToMs);
    expect(decode(l2.snowflake('floe').next(), 'floe').timestamp).toBeGreaterThan(rec.usedUpToMs);
    const releases = s.cluster.requests.filter(
      (r) => r.path.endsWith('/release') && r.host === s.cluster.leader,
    );
    expect(releases.map((r) => r.body)).toEqual([{ token: l.token, lastTimestampMs: rec.usedUpToMs }]);
    // The old lease learns it was fenced at its next renewal, and leaves the new process's cache alone.
    const lost: string[] = [];
    l.on('lost', (e: LeaseLostError) => lost.push(e.reason));
    await s.time.advance(TTL / 3 + 1);
    expect(lost).toEqual(['stale_token']); // the worker ID was granted again, with a new token
    expect(JSON.parse(readFileSync(cachePath, 'utf8')).token).toBe(l2.token);
  });

  it('resumes from the cache alone while the cluster is away, only until the cached deadline', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'floe-client-'));
    const cachePath = join(dir, 'lease.json');
    const s = setup();
    const l = await lease(s, { cachePath });
    l.snowflake('floe').next();
    const rec = JSON.parse(readFileSync(cachePath, 'utf8')) as LeaseCacheRecord;
    s.cluster.leader = undefined; // the cluster is unreachable from now on
    leaveDeadLock(cachePath);
    const again = () => lease({ ...s, client: restartedClient(s) }, { cachePath, acquireTimeoutMs: 300 });
    const r = await again();
    expect(r.resumedFromCache).toBe(true);
    expect(r.token).toBe(l.token);
    // A monotonic clock the user supplied is not trusted across processes: the wall-clock deadline, less TTL/10.
    expect(r.deadlineWallMs).toBe(rec.deadlineWallMs - TTL / 10);
    expect(r.deadlineMono - s.time.t).toBe(r.deadlineWallMs - s.time.wall.now());
    const ts = decode(r.snowflake('floe').next(), 'floe').timestamp;
    expect(ts).toBeGreaterThan(rec.usedUpToMs);
    expect(ts).toBeLessThanOrEqual(rec.boundMs);
    await s.time.advance(r.deadlineMono - s.time.t + 1);
    expect(r.valid).toBe(false);
    await expect(again()).rejects.toBeInstanceOf(FloeUnavailableError);
  });

  it('with the built-in monotonic clock on the same boot, resumes on the cached monotonic deadline (and the wall one)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'floe-client-'));
    const cachePath = join(dir, 'lease.json');
    const cluster = new FakeCluster(['10.0.0.1:7380']);
    const time = new FakeTime(WALL0);
    const real = () =>
      new FloeClient({
        endpoints: cluster.hosts,
        fetch: cluster.fetch,
        clock: { now: () => Date.now() },
        setTimer: time.setTimer,
        sleep: time.sleep,
        bootId: 'boot-1',
        incarnation: `real-${Math.random()}`,
      });
    const l = await real().leaseWorker({ app: 'orders', nodeId: 'n1', ttlMs: TTL, cachePath });
    const rec = JSON.parse(readFileSync(cachePath, 'utf8')) as LeaseCacheRecord;
    expect(rec.systemMonotonic).toBe(true);
    cluster.leader = undefined;
    leaveDeadLock(cachePath);
    const p = real().leaseWorker({ app: 'orders', nodeId: 'n1', ttlMs: TTL, cachePath, acquireTimeoutMs: 0 });
    const r = await p;
    expect(r.resumedFromCache).toBe(true);
    expect(r.token).toBe(l.token);
    expect(r.deadlineMono).toBe(rec.deadlineMono);
    expect(r.deadlineWallMs).toBe(rec.deadlineWallMs);
  });

  it('a supplied clock declared monotonicIsSystemWide is trusted as the built-in one: same boot, cached deadlines', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'floe-client-'));
    const cachePath = join(dir, 'lease.json');
    const s = setup();
    const machine = (bootId: string, more: Partial<FloeClientOptions> = {}) =>
      new FloeClient({
        endpoints: s.cluster.hosts,
        fetch: s.cluster.fetch,
        clock: s.time.wall,
        monotonic: s.time.mono, // one clock for every process of the "machine"
        monotonicIsSystemWide: true,
        setTimer: s.time.setTimer,
        sleep: s.time.sleep,
        bootId,
        incarnation: `machine-${bootId}-${Math.random()}`,
        // Each a process of its own (its requestId claims), on this test's PID (the lock is left dead between them).
        cacheHost: { ...nodeCacheHost, requestIds: new Set(), unansweredAcquires: new Map() },
        ...more,
      });
    const l = await lease({ ...s, client: machine('boot-1') }, { cachePath });
    const rec = JSON.parse(readFileSync(cachePath, 'utf8')) as LeaseCacheRecord;
    expect(rec.systemMonotonic).toBe(true);
    s.cluster.leader = undefined;
    leaveDeadLock(cachePath);
    const r = await lease({ ...s, client: machine('boot-1') }, { cachePath, acquireTimeoutMs: 300 });
    expect(r.resumedFromCache).toBe(true);
    expect(r.token).toBe(l.token);
    expect(r.deadlineMono).toBe(rec.deadlineMono);
    expect(r.deadlineWallMs).toBe(rec.deadlineWallMs); // no cacheWallMarginMs: the monotonic deadline is trusted
    // Another boot, or a process that does not declare its clock the machine's: the wall deadline less the margin.
    for (const client of [machine('boot-2'), machine('boot-1', { monotonicIsSystemWide: false })]) {
      writeFileSync(cachePath, `${JSON.stringify(rec)}\n`);
      leaveDeadLock(cachePath);
      const w = await lease({ ...s, client }, { cachePath, acquireTimeoutMs: 300 });
      expect(w.resumedFromCache).toBe(true);
      expect(w.deadlineWallMs).toBe(rec.deadlineWallMs - TTL / 10);
    }
    expect(
      () =>
        new FloeClient({ endpoints: s.cluster.hosts, monotonicIsSystemWide: 'yes' as unknown as boolean }),
    ).toThrow(/monotonicIsSystemWide/);
    // A supplied clock declared the machine's needs the boot its readings belong to, and on this machine's own boot
    // must read as CLOCK_MONOTONIC does: a per-process clock declared system-wide is refused (review of F1).
    const declared = (more: Partial<FloeClientOptions>) => () =>
      new FloeClient({ endpoints: s.cluster.hosts, monotonicIsSystemWide: true, ...more });
    expect(declared({ monotonic: s.time.mono })).toThrow(/monotonicIsSystemWide.*bootId/);
    const thisBoot = readBootId();
    if (thisBoot !== undefined) {
      expect(declared({ monotonic: () => hrtimeMonotonic() - 5000, bootId: thisBoot })).toThrow(
        /CLOCK_MONOTONIC.*ms away/,
      );
      expect(declared({ monotonic: () => hrtimeMonotonic(), bootId: thisBoot })).not.toThrow();
    }
  });

  it('after a reboot (other boot ID) trusts the cached wall-clock deadline only with an extra margin', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'floe-client-'));
    const cachePath = join(dir, 'lease.json');
    const s = setup();
    await lease(s, { cachePath });
    const rec = JSON.parse(readFileSync(cachePath, 'utf8')) as LeaseCacheRecord;
    s.cluster.leader = undefined;
    leaveDeadLock(cachePath, 'boot-1'); // left by the previous boot
    const r = await lease(
      { ...s, client: restartedClient(s, 'boot-2') },
      { cachePath, acquireTimeoutMs: 300 },
    );
    const wallLeft = rec.deadlineWallMs - s.time.wall.now();
    expect(r.deadlineMono - s.time.t).toBeLessThanOrEqual(wallLeft - TTL / 10);
    await settle();
  });
});

describe('FloeClient: one requestId, one lease per process (review finding R1)', () => {
  it('refuses a second leaseWorker call with the requestId of a live lease of this process, even from another client', async () => {
    const s = setup();
    const a = await lease(s, { requestId: 'orders-n1' });
    const other = clientOf(s.cluster, s.time);
    expect(other.incarnation).toBe(s.client.incarnation); // one process, one incarnation
    await expect(
      other.leaseWorker({ app: 'orders', nodeId: 'n1', ttlMs: TTL, requestId: 'orders-n1' }),
    ).rejects.toThrow(/requestId.*orders-n1|orders-n1.*requestId/s);
    // Before the fix the second call got the same worker ID and token and its generator repeated a's IDs.
    expect(a.valid).toBe(true);
    await a.release();
    // Released (the cluster confirmed): the requestId is free again, and names a fresh lease.
    const b = await lease(s, { requestId: 'orders-n1' });
    expect(b.token).not.toBe(a.token);
    await b.release();
  });

  it('frees the requestId of a call that failed, so the caller can retry with it', async () => {
    const s = setup();
    const leader = s.cluster.leader;
    s.cluster.leader = undefined;
    await expect(lease(s, { requestId: 'retry-me', acquireTimeoutMs: 100 })).rejects.toBeInstanceOf(
      FloeUnavailableError,
    );
    s.cluster.leader = leader;
    const l = await lease(s, { requestId: 'retry-me' });
    expect(l.valid).toBe(true);
    await l.release();
  });
});

describe('FloeClient: one cache file, one lock, whatever its name (review finding R2)', () => {
  const second = (s: ReturnType<typeof setup>, incarnation: string) =>
    new FloeClient({
      endpoints: s.cluster.hosts,
      fetch: s.cluster.fetch,
      clock: s.time.wall,
      monotonic: s.time.mono,
      setTimer: s.time.setTimer,
      sleep: s.time.sleep,
      bootId: 'boot-1',
      incarnation,
    });

  for (const how of ['symbolic link', 'hard link'] as const) {
    it(`a second process reaching a live holder's cache through a ${how} waits for its lock and never releases its lease`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'floe-client-'));
      const real = join(dir, 'lease.json');
      const alias = join(dir, 'alias.json');
      const s = setup();
      const a = await lease(s, { cachePath: real });
      a.snowflake('floe').next();
      if (how === 'symbolic link') symlinkSync(real, alias);
      else linkSync(real, alias);
      // Before the fix B locked alias.json.lock, read A's cache, released A's live token and leased the worker again.
      const err = await lease(
        { ...s, client: second(s, 'proc-B') },
        { cachePath: alias, cacheLockWaitMs: 500, acquireTimeoutMs: 500 },
      ).catch((e: unknown) => e);
      // A symbolic link resolves to the holder's own name and lock; a hard link is another file name whose record
      // names the holder's path: refused outright (review finding F1).
      if (how === 'symbolic link') expect(err).toBeInstanceOf(CacheLockedError);
      else expect((err as Error).message).toMatch(/a cache file of its own/);
      const releases = s.cluster.requests.filter((r) => r.path.endsWith('/release'));
      expect(releases).toEqual([]);
      expect(a.valid).toBe(true);
      await s.time.advance(TTL / 3 + 1); // A renews: still its lease
      expect(a.valid).toBe(true);
      await a.release();
    });
  }
});

// Review of FS-19 (F5): an endpoint a redirect named became the sticky leader on its 2xx, before the SDK checked the
// answer, and stayed so when the answer was another request's (ReplyMismatchError).
describe('FloeClient: a learned endpoint whose reply is another request’s is forgotten (review of FS-19, F5)', () => {
  it('neither leads nor stays learned after answering an acquire with another requestId', async () => {
    const time = new FakeTime(WALL0);
    const fetch: FloeClientOptions['fetch'] = async (url, init) => {
      const host = new URL(url).host;
      const json = (status: number, body: unknown) => ({
        status,
        headers: { get: () => null },
        text: async () => JSON.stringify(body),
      });
      if (host === 'floe-lb:7380')
        return json(307, { error: 'not_leader', message: 'x', leader: { id: 5, httpAddr: 'n5:7380' } });
      const req = JSON.parse(init.body ?? '{}') as Record<string, unknown>;
      return json(200, { ...req, op: 'acquire', app: 'orders', requestId: 'another-request' });
    };
    const client = new FloeClient({
      endpoints: ['floe-lb:7380'],
      fetch,
      clock: time.wall,
      monotonic: time.mono,
      setTimer: time.setTimer,
      sleep: time.sleep,
      random: () => 0.5,
      bootId: 'boot-1',
    });
    const e = await client.leaseWorker({ app: 'orders', nodeId: 'n1', ttlMs: TTL }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ReplyMismatchError);
    expect(client.transport.leaderEndpoint).toBeUndefined();
    expect(client.transport.learnedEndpoints).toEqual([]);
  });

  it('leads once its acquire reply passed the checks', async () => {
    const cluster = new FakeCluster(['10.0.0.1:7380', '10.0.0.2:7380']);
    cluster.leader = '10.0.0.2:7380';
    const time = new FakeTime(WALL0);
    // Only 10.0.0.1 is configured: 10.0.0.2 is learned from its redirect.
    const client = new FloeClient({ ...fakeClientOptions(cluster, time), endpoints: ['10.0.0.1:7380'] });
    let done = false;
    const p = client.leaseWorker({ app: 'orders', nodeId: 'n1', ttlMs: TTL }).finally(() => {
      done = true;
    });
    for (let i = 0; i < 200 && !done; i++) await time.advance(10);
    const l = await p;
    expect(client.transport.learnedEndpoints).toEqual(['http://10.0.0.2:7380']);
    expect(client.transport.leaderEndpoint).toBe('http://10.0.0.2:7380');
    await l.release();
  });
});
