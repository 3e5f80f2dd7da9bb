import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { processStartTicks, readBootId } from '../net/process-identity.js';
import { DurableStorage } from './durable-storage.js';
import { StorageLockedError } from './errors.js';
import { runLockExample } from './lock-example.js';
import { HeldLocks, isAlive, LOCK_FILE_NAME, LockFile, type LockOwner, parseRecord } from './lock-file.js';
import { MemoryFs } from './memory-fs.js';
import { removeTempDirs, tempDir } from './test-helpers.js';

const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGKILL');
      await once(c, 'exit');
    }
  }
  await removeTempDirs();
});

/** A child process that stays alive until killed; resolves once it runs. */
async function liveChild(): Promise<ChildProcess> {
  const c = spawn(process.execPath, ['-e', 'console.log("up"); setInterval(() => {}, 1000)'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(c);
  await once(c.stdout!, 'data');
  return c;
}

const lockText = async (dir: string) => fsp.readFile(path.join(dir, LOCK_FILE_NAME), 'utf8');
const writeLock = (dir: string, text: string) => fsp.writeFile(path.join(dir, LOCK_FILE_NAME), text);
const refusal = (p: Promise<unknown>) => p.then(() => undefined).catch((e: unknown) => e);

/**
 * A process as the seams see it, on a machine of boot `bootId`: `running` maps the PIDs that exist to their start
 * times. Each owner made by one `machineProcess` call is a process of its own (its own registry of held locks).
 */
function machineProcess(o: { pid: number; bootId: string; running: Record<number, string> }): LockOwner {
  return {
    pid: o.pid,
    bootId: o.bootId,
    isAlive: (p) => o.running[p] !== undefined,
    startTicks: (p) => o.running[p] ?? null,
    held: new HeldLocks(),
  };
}

describe('LockFile', () => {
  it('writes our PID, boot ID and start time, refuses a second open in this process, and releases', async () => {
    const dir = await tempDir();
    const lock = await LockFile.acquire(dir);
    const text = await lockText(dir);
    // The PID is the first line: all that a build before the boot ID and start time reads.
    expect(Number.parseInt(text, 10)).toBe(process.pid);
    expect(parseRecord(text)).toEqual({
      pid: process.pid,
      ...(readBootId() !== undefined ? { bootId: readBootId() } : {}),
      ...(processStartTicks(process.pid) !== null ? { startTicks: processStartTicks(process.pid) } : {}),
    });
    const err = await refusal(LockFile.acquire(dir));
    expect(err).toBeInstanceOf(StorageLockedError);
    expect((err as StorageLockedError).pid).toBe(process.pid);
    expect((err as Error).message).toMatch(/already open/);
    await lock.release();
    expect(await fsp.readdir(dir)).toEqual([]);
    const again = await LockFile.acquire(dir);
    await again.release();
  });

  it('refuses a lock held by another live process, naming its PID', async () => {
    const dir = await tempDir();
    const child = await liveChild();
    await writeLock(dir, `${child.pid}\n`);
    const err = await refusal(LockFile.acquire(dir));
    expect(err).toBeInstanceOf(StorageLockedError);
    expect((err as Error).message).toContain(`locked by live process ${child.pid}`);
    // The live lock is left exactly as it was.
    expect(await lockText(dir)).toBe(`${child.pid}\n`);
  });

  it('refuses a lock recorded by a live process of this boot with its own start time', async () => {
    const dir = await tempDir();
    const child = await liveChild();
    const start = processStartTicks(child.pid!);
    const boot = readBootId();
    const text = `${child.pid}\n${boot ? `boot ${boot}\n` : ''}${start ? `start ${start}\n` : ''}`;
    await writeLock(dir, text);
    const err = await refusal(LockFile.acquire(dir));
    expect(err).toBeInstanceOf(StorageLockedError);
    expect((err as StorageLockedError).pid).toBe(child.pid);
    expect(await lockText(dir)).toBe(text);
  });

  it('takes over a stale lock left by a dead process', async () => {
    const dir = await tempDir();
    const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
    await once(child, 'exit');
    const deadPid = child.pid!;
    expect(isAlive(deadPid)).toBe(false);
    await writeLock(dir, `${deadPid}\n`);
    const lock = await LockFile.acquire(dir);
    expect(lock.tookOverFrom).toBe(deadPid);
    expect(lock.staleBecause).toBeUndefined();
    expect(parseRecord(await lockText(dir)).pid).toBe(process.pid);
    expect((await fsp.readdir(dir)).sort()).toEqual([LOCK_FILE_NAME]);
    await lock.release();
  });

  it('treats an unreadable lock file as stale', async () => {
    const dir = await tempDir();
    await writeLock(dir, 'garbage');
    const lock = await LockFile.acquire(dir);
    expect(lock.tookOverFrom).toBe(0);
    expect(lock.staleBecause).toBeUndefined(); // warned as "dead process 0", as before
    await lock.release();
  });

  it('a container restarted as PID 1 finds its own PID in LOCK and starts', async () => {
    // The container was killed (OOM, kill -9) holding the lock; the same machine restarts it, and
    // `floe serve` is PID 1 again, started later.
    const dir = await tempDir();
    await writeLock(dir, '1\nboot B\nstart 1000\n');
    const restarted = machineProcess({ pid: 1, bootId: 'B', running: { 1: '5000' } });
    const lock = await LockFile.acquire(dir, undefined, restarted);
    expect(lock.tookOverFrom).toBe(1);
    expect(await lockText(dir)).toBe('1\nboot B\nstart 5000\n');
    await lock.release();

    // The same with a LOCK an older build wrote (its PID only), and after a power loss (another boot).
    for (const [text, bootId] of [
      ['1\n', 'B'],
      ['1\nboot A\nstart 1000\n', 'B'],
    ] as const) {
      await writeLock(dir, text);
      const again = await LockFile.acquire(
        dir,
        undefined,
        machineProcess({ pid: 1, bootId, running: { 1: '7' } }),
      );
      expect(again.tookOverFrom).toBe(1);
      await again.release();
    }
    expect(await fsp.readdir(dir)).toEqual([]);
  });

  it('a LOCK from an earlier boot is taken over, even when its PID runs again now', async () => {
    const dir = await tempDir();
    await writeLock(dir, '4242\nboot A\nstart 900\n');
    // After the reboot, PID 4242 is another process, which by chance has the same start time.
    const next = machineProcess({ pid: 77, bootId: 'B', running: { 77: '10', 4242: '900' } });
    const lock = await LockFile.acquire(dir, undefined, next);
    expect(lock.tookOverFrom).toBe(4242);
    expect(lock.staleBecause).toMatch(/before this machine last booted/);
    await lock.release();
    // The same record on the boot it was taken in names a live holder: refused.
    await writeLock(dir, '4242\nboot B\nstart 900\n');
    const err = await refusal(LockFile.acquire(dir, undefined, next));
    expect(err).toBeInstanceOf(StorageLockedError);
    expect((err as StorageLockedError).pid).toBe(4242);
  });

  it('a LOCK whose PID now belongs to a process started later is taken over', async () => {
    const dir = await tempDir();
    await writeLock(dir, '4242\nboot B\nstart 900\n');
    const me = machineProcess({ pid: 77, bootId: 'B', running: { 77: '10', 4242: '1500' } });
    const lock = await LockFile.acquire(dir, undefined, me);
    expect(lock.tookOverFrom).toBe(4242);
    expect(lock.staleBecause).toMatch(/belongs to a process started later/);
    await lock.release();

    // With the real process table: a live child whose recorded start time is not its own.
    const child = await liveChild();
    if (processStartTicks(child.pid!) === null) return; // no /proc here: the PID-only rules apply
    await writeLock(dir, `${child.pid}\nstart 1\n`);
    const real = await LockFile.acquire(dir);
    expect(real.tookOverFrom).toBe(child.pid);
    await real.release();
  });

  it('a LOCK without a boot ID or start time keeps the PID-only rules', async () => {
    const dir = await tempDir();
    const me = machineProcess({ pid: 77, bootId: 'B', running: { 77: '10', 4242: '1500' } });
    await writeLock(dir, '4242\n');
    expect(await refusal(LockFile.acquire(dir, undefined, me))).toBeInstanceOf(StorageLockedError);
    await writeLock(dir, '4243\n');
    const lock = await LockFile.acquire(dir, undefined, me);
    expect(lock.tookOverFrom).toBe(4243);
    await lock.release();
  });

  it('a second open of the same data directory in one process is refused', async () => {
    const dir = await tempDir();
    const me = machineProcess({ pid: 1, bootId: 'B', running: { 1: '5000' } });
    const first = await LockFile.acquire(dir, undefined, me);
    const err = await refusal(LockFile.acquire(dir, undefined, me));
    expect(err).toBeInstanceOf(StorageLockedError);
    expect((err as StorageLockedError).pid).toBe(1);
    // Through another spelling of the same directory (a symbolic link) too.
    const link = path.join(await tempDir(), 'data');
    await fsp.symlink(dir, link);
    expect(await refusal(LockFile.acquire(path.join(link, '.'), undefined, me))).toBeInstanceOf(
      StorageLockedError,
    );
    await first.release();

    // Two opens at once: one wins, the other is refused, and nothing is left behind.
    const both = await Promise.allSettled([
      LockFile.acquire(dir, undefined, me),
      LockFile.acquire(link, undefined, me),
    ]);
    expect(both.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    for (const r of both) {
      if (r.status === 'fulfilled') await r.value.release();
      else expect(r.reason).toBeInstanceOf(StorageLockedError);
    }
    expect(await fsp.readdir(dir)).toEqual([]);
    // Released: this process may take it again.
    await (await LockFile.acquire(dir, undefined, me)).release();
  });

  it('an owner without the optional members (a simulated process) writes its PID only, as before', async () => {
    const fs = new MemoryFs();
    await fs.mkdir('/n1');
    const owner: LockOwner = { pid: 3, isAlive: (p) => p === 3 };
    const lock = await LockFile.acquire('/n1', fs, owner);
    expect((await fs.readFile('/n1/LOCK')).toString()).toBe('3\n');
    // Its own PID is alive by its own rule: a second open is refused.
    expect(await refusal(LockFile.acquire('/n1', fs, owner))).toBeInstanceOf(StorageLockedError);
    const next = await LockFile.acquire('/n1', fs, { pid: 4, isAlive: (p) => p === 4 });
    expect(next.tookOverFrom).toBe(3);
    await next.release();
    await lock.release(); // the file names 4 no more, nor 3: nothing to remove
  });
});

describe('DurableStorage.open and the LOCK', () => {
  it('starts on a real directory whose LOCK names this process’s PID from an earlier incarnation', async () => {
    const dir = await tempDir();
    const s = await DurableStorage.open(dir, { bootstrapConf: { voters: [1], learners: [] } });
    await s.close();
    // A kill -9 of an earlier process that had our PID (a container's PID 1) left its LOCK behind:
    // as an older build wrote it, and as this build writes it (same boot, another start time).
    const boot = readBootId();
    for (const text of [`${process.pid}\n`, `${process.pid}\n${boot ? `boot ${boot}\n` : ''}start 1\n`]) {
      await writeLock(dir, text);
      const warnings: string[] = [];
      const again = await DurableStorage.open(dir, { onWarning: (m) => warnings.push(m) });
      expect(warnings).toContainEqual(
        expect.stringMatching(
          new RegExp(`took over a stale lock left by dead process ${process.pid} \\(.+\\)`),
        ),
      );
      // While it is open, a second open in this process is refused.
      const err = await refusal(DurableStorage.open(dir));
      expect(err).toBeInstanceOf(StorageLockedError);
      expect((err as Error).message).toMatch(/already open/);
      await again.close();
    }
    expect((await fsp.readdir(dir)).sort()).toEqual(['snap', 'wal']);
  });

  it('the runnable example (src/storage/lock-example.ts) reopens after a LOCK naming its own PID', async () => {
    const lines: string[] = [];
    await runLockExample(await tempDir(), (l) => lines.push(l));
    expect(lines[0]).toMatch(new RegExp(`^LOCK while open: "${process.pid}\\\\n`));
    expect(lines.slice(1)).toEqual([
      'second open: ERR_STORAGE_LOCKED',
      `warning: took over a stale lock left by dead process ${process.pid} (its PID is this process's, which does not hold it: an earlier process with this PID left it)`,
      'reopened',
    ]);
  });
});
