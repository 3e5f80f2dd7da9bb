// Regression tests for the lease cache findings of the second review of issue 9 (F1, F2, F4): one lease, one cache
// file, never resumed after a release may have taken effect.
import {
  copyFileSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type CacheFs, nodeCacheFs } from './cache-fs.js';
import { ClientOptionError } from './errors.js';
import type { FloeClient, LeaseWorkerOptions } from './floe-client.js';
import type { FetchLike } from './http-transport.js';
import { type FakeTime, fakeWorld, leaseDriven, leaveDeadLock } from './test-doubles.js';

const WALL0 = Date.UTC(2026, 5, 1);
const TTL = 30_000;

const setup = () => fakeWorld(WALL0);

const lease = (s: { time: FakeTime }, c: FloeClient, o: Partial<LeaseWorkerOptions> = {}) =>
  leaseDriven(s.time, c, { app: 'orders', nodeId: 'n1', ttlMs: TTL, ...o });

const tmp = () => mkdtempSync(join(tmpdir(), 'floe-cache-safety-'));

describe('one lease, one cache file (review finding F1)', () => {
  for (const sameProcess of [false, true]) {
    it(`a hard link to a dead holder's cache, cluster away: only one name resumes the lease (${sameProcess ? 'one process' : 'two processes'})`, async () => {
      const s = setup();
      const dir = tmp();
      const a = join(dir, 'lease.json');
      const b = join(dir, 'alias.json');
      const p0 = await lease(s, s.mk({ incarnation: 'proc-0' }), { cachePath: a });
      p0.snowflake().next();
      linkSync(a, b);
      s.cluster.leader = undefined; // unreachable from now on
      leaveDeadLock(a, 'boot-1', TTL); // P0 died
      const opts = { acquireTimeoutMs: 100, cacheLockWaitMs: 200 };
      // Before the fix: the process on the link resumed (after a take-and-release check of the other lock), rewrote
      // its file (so the names parted), and a process on the original name resumed the same lease too: 4,750
      // duplicate IDs of 10,000.
      const viaLink = await lease(s, s.mk(sameProcess ? {} : { incarnation: 'proc-2' }), {
        ...opts,
        cachePath: b,
      }).catch((e: unknown) => e);
      expect(viaLink).toBeInstanceOf(ClientOptionError);
      expect((viaLink as Error).message).toMatch(
        /a cache file of its own: .*alias\.json holds a lease record written by a process that used .*lease\.json/,
      );
      const viaOriginal = await lease(s, s.mk(sameProcess ? {} : { incarnation: 'proc-1' }), {
        ...opts,
        cachePath: a,
      });
      expect(viaOriginal.resumedFromCache).toBe(true);
    });
  }
});

describe('never resumed after a release may have taken effect (review finding F2)', () => {
  it('round 3: the lock file removed behind the holder’s back, release() still writes the tombstone', async () => {
    const s = setup();
    s.cluster.poolSize = 1;
    const cachePath = join(tmp(), 'lease.json');
    const a = await lease(s, s.mk({ incarnation: 'A' }), { cachePath });
    a.snowflake().next();
    rmSync(`${cachePath}.lock`); // a tmp cleaner, an operator clearing "stale" locks
    await a.release();
    // Before the fix the release went out with no tombstone and the record stayed resumable.
    expect(existsSync(cachePath) ? JSON.parse(readFileSync(cachePath, 'utf8')).released : true).toBe(true);
    const q = await lease(s, s.mk({ incarnation: 'Q' }), { nodeId: 'n2' });
    s.cluster.leader = undefined;
    const again = await lease(s, s.mk({ incarnation: 'A2' }), { cachePath, acquireTimeoutMs: 200 }).catch(
      (e: unknown) => e,
    );
    expect(again).not.toHaveProperty('resumedFromCache', true);
    expect(q.valid).toBe(true);
  });

  it('a call released the cached lease and then lost the cluster: a later call does not resume it', async () => {
    const s = setup();
    s.cluster.poolSize = 1;
    const cachePath = join(tmp(), 'lease.json');
    const p0 = await lease(s, s.mk({ incarnation: 'proc-0' }), { cachePath });
    p0.snowflake().next();
    leaveDeadLock(cachePath, 'boot-1', TTL); // P0 crashed
    let partitioned = false;
    const ours: FetchLike = async (url, init) => {
      if (partitioned) throw new TypeError('fetch failed (partition)');
      const r = await s.cluster.fetch(url, init);
      if (url.endsWith('/release')) partitioned = true;
      return r;
    };
    const me = s.mk({ incarnation: 'proc-1', fetch: ours });
    await expect(lease(s, me, { cachePath, acquireTimeoutMs: 200 })).rejects.toThrow();
    expect(JSON.parse(readFileSync(cachePath, 'utf8')).released).toBe(true);
    const q = await lease(s, s.mk({ incarnation: 'proc-Q' }), { nodeId: 'n2' }); // the freed worker ID, elsewhere
    // Before the fix the retry resumed the released lease while Q held its worker ID: two live holders.
    const again = await lease(s, me, { cachePath, acquireTimeoutMs: 200 }).catch((e: unknown) => e);
    expect(again).not.toHaveProperty('resumedFromCache', true);
    expect(q.valid).toBe(true);
  });

  it('release() applied with its answer lost, then the process exits: the restarted process does not resume it', async () => {
    const s = setup();
    s.cluster.poolSize = 1;
    const cachePath = join(tmp(), 'lease.json');
    let partitioned = false;
    const ours: FetchLike = async (url, init) => {
      if (partitioned) throw new TypeError('fetch failed (partition)');
      const r = await s.cluster.fetch(url, init);
      if (url.endsWith('/release')) {
        partitioned = true;
        throw new TypeError('fetch failed (applied, answer lost)');
      }
      return r;
    };
    const a = await lease(s, s.mk({ fetch: ours }), { cachePath });
    a.snowflake().next();
    void a.release().catch(() => {});
    await s.time.advance(2_000); // shutdown gives up waiting and the process exits
    leaveDeadLock(cachePath, 'boot-1', TTL);
    expect(existsSync(cachePath)).toBe(true);
    expect(JSON.parse(readFileSync(cachePath, 'utf8')).released).toBe(true);
    const q = await lease(s, s.mk({ incarnation: 'proc-Q' }), { nodeId: 'n2' });
    const r = await lease(s, s.mk({ incarnation: 'restarted', fetch: ours }), {
      cachePath,
      acquireTimeoutMs: 100,
    }).catch((e: unknown) => e);
    expect(r).not.toHaveProperty('resumedFromCache', true);
    expect(q.valid).toBe(true);
  });
});

describe('a moved cache (review finding F4)', () => {
  it('a cache directory moved with a symbolic link left at the old name still restarts', async () => {
    const s = setup();
    const root = tmp();
    mkdirSync(join(root, 'd1'));
    const cachePath = join(root, 'd1', 'lease.json');
    const a = await lease(s, s.mk({ incarnation: 'p0' }), { cachePath });
    a.snowflake().next();
    leaveDeadLock(cachePath, 'boot-1', TTL);
    renameSync(join(root, 'd1'), join(root, 'd2'));
    symlinkSync(join(root, 'd2'), join(root, 'd1'));
    // Before the fix every restart failed with CacheLockedError on its own lock.
    for (const attempt of [1, 2]) {
      const l = await lease(s, s.mk({ incarnation: `p${attempt}` }), { cachePath, cacheLockWaitMs: 500 });
      expect(l.valid).toBe(true);
      await l.release();
    }
  });

  it('a cache directory moved away (its old directory gone) restarts from the moved file', async () => {
    const s = setup();
    const root = tmp();
    mkdirSync(join(root, 'd1'));
    const a = await lease(s, s.mk({ incarnation: 'p0' }), { cachePath: join(root, 'd1', 'lease.json') });
    a.snowflake().next();
    leaveDeadLock(join(root, 'd1', 'lease.json'), 'boot-1', TTL);
    renameSync(join(root, 'd1'), join(root, 'd2'));
    // The old name's directory is gone: a moved cache, or a copy whose original was deleted while its writer may
    // still run. The record is then only a floor: no resume, no release; the lease comes back once the old one ends.
    const pending = lease(s, s.mk({ incarnation: 'p1' }), { cachePath: join(root, 'd2', 'lease.json') });
    await s.time.advance(1_000);
    s.cluster.expire('orders', a.workerId);
    const l = await pending;
    expect(l.valid).toBe(true);
    expect(l.resumedFromCache).toBe(false);
    expect(s.cluster.requests.filter((r) => r.path.endsWith('/release'))).toEqual([]);
  });

  it('round 3: a copy of a live cache, its original directory deleted, cluster away: the copy is not resumed', async () => {
    const s = setup();
    const root = tmp();
    mkdirSync(join(root, 'd1'));
    mkdirSync(join(root, 'd2'));
    const original = join(root, 'd1', 'lease.json');
    const copy = join(root, 'd2', 'lease.json');
    const a = await lease(s, s.mk({ incarnation: 'A' }), { cachePath: original });
    a.snowflake().next();
    copyFileSync(original, copy);
    s.cluster.leader = undefined;
    rmSync(join(root, 'd1'), { recursive: true, force: true }); // A still runs
    // Before the fix B resumed A's lease from the stale copy: 34,490 duplicate IDs of 197,890.
    const b = await lease(s, s.mk({ incarnation: 'B' }), { cachePath: copy, acquireTimeoutMs: 200 }).catch(
      (e: unknown) => e,
    );
    expect(b).not.toHaveProperty('resumedFromCache', true);
    expect(a.valid).toBe(true);
  });
});

describe('a lease lost at its deadline is never resumed (full simulation, swarm seed 144777)', () => {
  it('the same process asks again while the cluster is away, after its wall clock stepped back past the deadline', async () => {
    const s = setup();
    s.cluster.poolSize = 1;
    const cachePath = join(tmp(), 'lease.json');
    const me = s.mk({ incarnation: 'c5' }); // a monotonic clock of its own: a cached lease resumes on the wall clock
    const l = await lease(s, me, { cachePath });
    l.snowflake().next();
    s.cluster.leader = undefined; // renewals go unanswered
    await s.time.advance(TTL);
    expect(l.valid).toBe(false); // lost at its deadline; the cluster may now grant the worker ID to another holder
    s.time.wall.offset -= 2 * TTL; // NTP steps the wall clock back
    // Before the fix the record still carried the old wall-clock deadline, which now looked a minute away: the
    // process resumed the lost lease while the worker ID's next holder used it (the simulator's lease-overlap).
    const again = await lease(s, me, { cachePath, acquireTimeoutMs: 200 }).catch((e: unknown) => e);
    expect(again).not.toHaveProperty('resumedFromCache', true);
    expect(JSON.parse(readFileSync(cachePath, 'utf8')).deadlineWallMs).toBe(0);
  });

  it('the same process, its past deadline never written (a full disk), the wall clock stepped back: not resumed', async () => {
    const s = setup();
    s.cluster.poolSize = 1;
    const cachePath = join(tmp(), 'lease.json');
    let failWrites = false;
    const flakyFs: CacheFs = {
      ...nodeCacheFs,
      writeFile(p, text, sync) {
        if (failWrites) throw Object.assign(new Error('ENOSPC (injected)'), { code: 'ENOSPC' });
        nodeCacheFs.writeFile(p, text, sync);
      },
    };
    const me = s.mk({ incarnation: 'c5', cacheFs: flakyFs });
    const l = await lease(s, me, { cachePath });
    l.snowflake().next();
    s.cluster.leader = undefined;
    await s.time.advance(TTL - 3600);
    failWrites = true; // the write that marks the record lost fails
    await s.time.advance(4100);
    failWrites = false;
    expect(l.valid).toBe(false);
    s.time.wall.offset -= 2 * TTL;
    // Before the fix the record's old wall-clock deadline looked live again and the process resumed its lost lease.
    const again = await lease(s, me, { cachePath, acquireTimeoutMs: 200 }).catch((e: unknown) => e);
    expect(again).not.toHaveProperty('resumedFromCache', true);
  });

  it("release() after the loss leaves alone the cache another process's lease holds now", async () => {
    const s = setup();
    const cachePath = join(tmp(), 'lease.json');
    const l1 = await lease(s, s.mk({ incarnation: 'proc-a' }), { cachePath });
    l1.snowflake().next();
    s.cluster.leader = undefined;
    await s.time.advance(TTL);
    expect(l1.valid).toBe(false);
    s.cluster.leader = s.cluster.hosts[0];
    s.cluster.expire('orders', l1.workerId);
    const l2 = await lease(s, s.mk({ incarnation: 'proc-b' }), { cachePath });
    l2.snowflake().next();
    const before = readFileSync(cachePath, 'utf8');
    await l1.release().catch(() => {});
    // Before the fix l1 wrote its tombstone over l2's record and then removed the file l2's lock guards.
    expect(existsSync(cachePath) ? readFileSync(cachePath, 'utf8') : 'NO FILE').toBe(before);
    expect(l2.valid).toBe(true);
  });
});
