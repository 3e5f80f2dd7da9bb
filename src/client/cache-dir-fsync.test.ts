// Review finding F3: a directory fsync of the lease cache that fails (EIO) must fail the operation that needed it.
// `nodeCacheFs.syncDir` used to swallow every error (meant for Windows, which has no directory fsync), EIO from the
// fsync included; a release was then sent after a tombstone that a power loss could take back.
//
// node:fs is wrapped so that a test can make the fsync of a directory fail, as a failing disk does, and so that the
// test knows which names of the cache's directory were made durable: its "power loss" puts back the cache file the
// last successful directory fsync saw, as Linux may after a rename whose directory fsync failed.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { type DirSyncCalls, syncDirectory } from './cache-fs.js';
import type { LeaseWorkerOptions } from './floe-client.js';
import { type FakeTime, fakeWorld, leaveDeadLock } from './test-doubles.js';
import type { WorkerLease } from './worker-lease.js';

const disk = vi.hoisted(() => ({
  failDirFsync: false,
  /** Runs just before a directory fsync fails (another process acting in between). */
  beforeFail: undefined as (() => void) | undefined,
  /** Directory fsyncs that failed / succeeded since the last look (the durable-names model reads them). */
  failed: 0,
  succeeded: 0,
}));

vi.mock('node:fs', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs')>();
  const fsyncSync = (fd: number): void => {
    const dir = real.fstatSync(fd).isDirectory();
    if (dir && disk.failDirFsync) {
      disk.beforeFail?.();
      disk.failed++;
      throw Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO', syscall: 'fsync', errno: -5 });
    }
    real.fsyncSync(fd);
    if (dir) disk.succeeded++;
  };
  return { ...real, fsyncSync, default: { ...real, fsyncSync } };
});

const WALL0 = Date.UTC(2026, 5, 1);
const TTL = 30_000;

const setup = () => fakeWorld(WALL0);

async function run<T>(time: FakeTime, p: Promise<T>): Promise<T> {
  let done = false;
  const q = p.finally(() => {
    done = true;
  });
  q.catch(() => {});
  for (let i = 0; i < 3000 && !done; i++) await time.advance(10);
  return q;
}

/** The cache file as the last successful fsync of its directory left it: what a power loss gives back. */
class DurableCacheFile {
  private durable: string | undefined;
  constructor(private readonly path: string) {}
  /** Call after each step: a directory fsync that succeeded made the current name durable. */
  look(): void {
    if (disk.succeeded > 0 && disk.failed === 0) {
      try {
        this.durable = readFileSync(this.path, 'utf8');
      } catch {
        this.durable = undefined;
      }
    }
    disk.succeeded = 0;
    disk.failed = 0;
  }
  powerLoss(): void {
    if (this.durable === undefined) rmSync(this.path, { force: true });
    else writeFileSync(this.path, this.durable);
  }
}

describe('a failed directory fsync of the lease cache (review finding F3)', () => {
  it('release tombstone renamed, its directory fsync fails with EIO, power lost: the release was never sent, so no second holder', async () => {
    const s = setup();
    s.cluster.poolSize = 1;
    const dir = mkdtempSync(join(tmpdir(), 'floe-dir-fsync-'));
    const cachePath = join(dir, 'lease.json');
    const file = new DurableCacheFile(cachePath);
    const o: LeaseWorkerOptions = { app: 'orders', nodeId: 'n1', ttlMs: TTL, cachePath };
    const a = await run(s.time, s.mk({ incarnation: 'A' }).leaseWorker(o));
    a.snowflake().next();
    file.look();
    expect(JSON.parse(readFileSync(cachePath, 'utf8')).released).toBeUndefined();

    // The disk starts failing directory fsyncs; the user releases.
    disk.failDirFsync = true;
    const released = await run(s.time, a.release()).catch((e: unknown) => e);
    file.look();
    // Before the fix: released, the release sent, the worker ID free for another host.
    expect(released).toMatchObject({ code: 'ERR_CACHE_WRITE', cause: { code: 'EIO' } });
    expect((released as Error).message).toMatch(/release of worker ID 0 was not sent.*lease\.json.*EIO/);
    expect(s.cluster.requests.filter((r) => r.path.endsWith('/release'))).toHaveLength(0);
    expect(s.cluster.lease('orders', 0)?.live).toBe(true);
    disk.failDirFsync = false;

    // Another host asks for a worker ID: the pool's only one is still A's, so it gets none.
    const q = await run(
      s.time,
      s
        .mk({ incarnation: 'Q' })
        .leaseWorker({ app: 'orders', nodeId: 'n2', ttlMs: TTL, acquireTimeoutMs: 500 }),
    ).catch((e: unknown) => e);

    // Power loss: the tombstone's rename is lost, the pre-tombstone record is back; the host reboots within the TTL
    // and finds the cluster unreachable.
    file.powerLoss();
    leaveDeadLock(cachePath, 'boot-1', TTL);
    s.cluster.leader = undefined;
    const a2 = await run(
      s.time,
      s.mk({ incarnation: 'A-after-reboot', bootId: 'boot-2' }).leaseWorker({ ...o, acquireTimeoutMs: 200 }),
    ).catch((e: unknown) => e);

    const holders = [q, a2].filter((l) => !(l instanceof Error) && (l as WorkerLease).valid);
    // Before the fix: Q held worker 0 and A resumed it from the cache: two holders, duplicate IDs.
    expect(holders.length).toBeLessThanOrEqual(1);
    expect(q).toBeInstanceOf(Error);
    rmSync(dir, { recursive: true, force: true });
  });

  it('the lock’s directory fsync fails: leaseWorker rejects with the EIO and leaves no lock naming this process', async () => {
    const s = setup();
    const dir = mkdtempSync(join(tmpdir(), 'floe-dir-fsync-'));
    const cachePath = join(dir, 'lease.json');
    const c = s.mk({ incarnation: 'L' });
    const o: LeaseWorkerOptions = {
      app: 'orders',
      nodeId: 'n1',
      ttlMs: TTL,
      cachePath,
      cacheLockWaitMs: 100,
    };
    disk.failDirFsync = true;
    await expect(run(s.time, c.leaseWorker(o))).rejects.toMatchObject({ code: 'EIO' });
    disk.failDirFsync = false;
    // The disk is back: the same process leases on that cache (a lock left behind would refuse it for its lifetime).
    const l = await run(s.time, c.leaseWorker(o));
    expect(l.valid).toBe(true);
    await run(s.time, l.release());
    rmSync(dir, { recursive: true, force: true });
  });

  it('the lock’s directory fsync fails after another process took the path over: its lock is left alone', async () => {
    // Review of F3: the cleanup removed the lock path whoever it named by then (a taker that moved ours aside and
    // linked its own), so a third process could share the cache with it.
    const s = setup();
    const dir = mkdtempSync(join(tmpdir(), 'floe-dir-fsync-'));
    const cachePath = join(dir, 'lease.json');
    const lockPath = `${cachePath}.lock`;
    const other = `${JSON.stringify({ pid: 1, nonce: 'another-process', host: 'h', bootId: 'boot-1', pidNs: null, startTicks: null, ttlMs: TTL })}\n`;
    const c = s.mk({ incarnation: 'L2' });
    disk.failDirFsync = true;
    disk.beforeFail = () => writeFileSync(lockPath, other);
    try {
      await expect(
        run(
          s.time,
          c.leaseWorker({ app: 'orders', nodeId: 'n1', ttlMs: TTL, cachePath, cacheLockWaitMs: 100 }),
        ),
      ).rejects.toMatchObject({ code: 'EIO' });
    } finally {
      disk.failDirFsync = false;
      disk.beforeFail = undefined;
    }
    expect(readFileSync(lockPath, 'utf8')).toBe(other);
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('syncDirectory: which failures of a directory fsync may be ignored', () => {
  const fails = (where: 'open' | 'fsync', code: string, platform: NodeJS.Platform): DirSyncCalls => ({
    platform,
    open: () => {
      if (where === 'open') throw Object.assign(new Error(`${code}: open`), { code });
      return 7;
    },
    fsync: () => {
      if (where === 'fsync') throw Object.assign(new Error(`${code}: fsync`), { code });
    },
    close: () => {},
  });

  it('EIO is thrown on every platform, from the open or the fsync', () => {
    for (const platform of ['linux', 'darwin', 'win32'] as const) {
      for (const where of ['open', 'fsync'] as const) {
        expect(() => syncDirectory('/d', fails(where, 'EIO', platform))).toThrow(/EIO/);
      }
    }
  });

  it('Windows, which has no directory fsync: EPERM (fsync), EISDIR / EACCES (open) are ignored; elsewhere thrown', () => {
    for (const [where, code] of [
      ['fsync', 'EPERM'],
      ['open', 'EISDIR'],
      ['open', 'EACCES'],
    ] as const) {
      expect(() => syncDirectory('/d', fails(where, code, 'win32'))).not.toThrow();
      expect(() => syncDirectory('/d', fails(where, code, 'linux'))).toThrow(code);
    }
    expect(() => syncDirectory('/d', fails('fsync', 'EINVAL', 'win32'))).toThrow(/EINVAL/);
  });

  it('closes what it opened, also when the fsync fails', () => {
    const closed: number[] = [];
    const calls = { ...fails('fsync', 'EIO', 'linux'), close: (fd: number) => closed.push(fd) };
    expect(() => syncDirectory('/d', calls)).toThrow(/EIO/);
    expect(closed).toEqual([7]);
  });

  it('the real calls sync a real directory', () => {
    const dir = mkdtempSync(join(tmpdir(), 'floe-dir-fsync-'));
    expect(() => syncDirectory(dir)).not.toThrow();
    rmSync(dir, { recursive: true, force: true });
  });
});
