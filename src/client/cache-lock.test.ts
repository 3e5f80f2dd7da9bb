import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CacheLock, lockPathOf, lockRecordFor } from './cache-lock.js';
import { CacheLockedError } from './errors.js';

const BOOT = 'boot-test';
let now = 0;
const opts = (waitMs = 0) => ({
  waitMs,
  ttlMs: 3000,
  bootId: BOOT,
  mono: () => now,
  sleep: async (ms: number) => {
    now += ms;
  },
});
const cache = () => join(mkdtempSync(join(tmpdir(), 'floe-lock-')), 'lease.json');
const deadPid = () => spawnSync(process.execPath, ['-e', '']).pid as number;
const held: CacheLock[] = [];
afterEach(() => {
  for (const l of held.splice(0)) l.release();
});

describe('CacheLock', () => {
  it('is exclusive: a second taker waits cacheLockWaitMs, then fails naming the path and the holder pid', async () => {
    const path = cache();
    const a = await CacheLock.acquire(path, opts());
    held.push(a);
    now = 0;
    const err = await CacheLock.acquire(path, opts(500)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CacheLockedError);
    expect((err as CacheLockedError).holderPid).toBe(process.pid);
    expect((err as Error).message).toContain(path);
    expect(now).toBeGreaterThanOrEqual(500); // it waited
    a.release();
    expect(existsSync(lockPathOf(path))).toBe(false);
    held.push(await CacheLock.acquire(path, opts()));
  });

  it('waits for a holder that lets go within the wait', async () => {
    const path = cache();
    const a = await CacheLock.acquire(path, opts());
    const o = opts(1000);
    o.sleep = async (ms) => {
      now += ms;
      if (now >= 300) a.release();
    };
    held.push(await CacheLock.acquire(path, o));
  });

  it('takes over the lock of a dead process, and of a PID now used by another process', async () => {
    const path = cache();
    writeFileSync(lockPathOf(path), JSON.stringify(lockRecordFor(deadPid(), BOOT, 3000)));
    const a = await CacheLock.acquire(path, opts());
    expect(a.tookOverFrom).toBeGreaterThan(0);
    a.release();
    // A live process whose start time differs from the one recorded: the PID was reused.
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)']);
    try {
      const rec = { ...lockRecordFor(child.pid as number, BOOT, 3000), startTicks: '1' };
      writeFileSync(lockPathOf(path), JSON.stringify(rec));
      const b = await CacheLock.acquire(path, opts());
      expect(b.tookOverFrom).toBe(child.pid);
      b.release();
      // The same live process, recorded without a start time: alive, the lock is held.
      writeFileSync(lockPathOf(path), JSON.stringify(lockRecordFor(child.pid as number, BOOT, 3000)));
      const err = await CacheLock.acquire(path, opts()).catch((e: unknown) => e);
      expect((err as CacheLockedError).holderPid).toBe(child.pid);
    } finally {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
  });

  it('takes over a lock naming this very PID with another start time: a container restarted as PID 1', async () => {
    const path = cache();
    const own = lockRecordFor(process.pid, BOOT, 3000);
    writeFileSync(lockPathOf(path), JSON.stringify({ ...own, startTicks: '1' }));
    const a = await CacheLock.acquire(path, opts());
    expect(a.tookOverFrom).toBe(process.pid);
    a.release();
  });

  it('counts a holder it cannot check (another PID namespace or host) as alive until its heartbeat is stale', async () => {
    const path = cache();
    const rec = { ...lockRecordFor(deadPid(), BOOT, 3000), pidNs: 'pid:[1]', host: 'elsewhere' };
    writeFileSync(lockPathOf(path), JSON.stringify(rec));
    const err = await CacheLock.acquire(path, opts()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CacheLockedError);
    expect((err as Error).message).toMatch(/cannot be checked/);
    // Stale after max(2 x TTL, TTL + 10 s) = 13 s without a heartbeat.
    const old = new Date(Date.now() - 11_000);
    utimesSync(lockPathOf(path), old, old);
    expect(await CacheLock.acquire(path, opts()).catch((e: unknown) => e)).toBeInstanceOf(CacheLockedError);
    const stale = new Date(Date.now() - 14_000);
    utimesSync(lockPathOf(path), stale, stale);
    held.push(await CacheLock.acquire(path, opts()));
  });

  it("a holder notices when its lock was taken over, and release() leaves another process's lock alone", async () => {
    const path = cache();
    const a = await CacheLock.acquire(path, opts());
    expect(() => a.refresh()).not.toThrow();
    writeFileSync(lockPathOf(path), JSON.stringify(lockRecordFor(process.pid + 1, BOOT, 3000)));
    expect(a.owned).toBe(false);
    expect(() => a.refresh()).toThrow(/taken over/);
    a.release();
    expect(existsSync(lockPathOf(path))).toBe(true);
  });

  it('is released when the process exits', async () => {
    const path = cache();
    const script = `import('${join(import.meta.dirname, 'cache-lock.ts').replaceAll('\\', '/')}').then(async (m) => {
      await m.CacheLock.acquire(${JSON.stringify(path)}, { waitMs: 0, ttlMs: 3000, bootId: 'b', mono: () => 0, sleep: async () => {} });
      console.log(require('node:fs').readFileSync(${JSON.stringify(lockPathOf(path))}, 'utf8').length > 0);
    })`;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], { encoding: 'utf8' });
    expect(r.stdout.trim()).toBe('true');
    expect(existsSync(lockPathOf(path))).toBe(false);
  });
});
