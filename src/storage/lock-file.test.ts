import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { StorageLockedError } from './errors.js';
import { isAlive, LOCK_FILE_NAME, LockFile } from './lock-file.js';
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

describe('LockFile', () => {
  it('writes our PID, refuses a second open in this process, and releases', async () => {
    const dir = await tempDir();
    const lock = await LockFile.acquire(dir);
    expect((await fsp.readFile(path.join(dir, LOCK_FILE_NAME), 'utf8')).trim()).toBe(String(process.pid));
    const err = await LockFile.acquire(dir).catch((e: unknown) => e);
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
    await fsp.writeFile(path.join(dir, LOCK_FILE_NAME), `${child.pid}\n`);
    const err = await LockFile.acquire(dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageLockedError);
    expect((err as Error).message).toContain(`locked by live process ${child.pid}`);
    // The live lock is left exactly as it was.
    expect((await fsp.readFile(path.join(dir, LOCK_FILE_NAME), 'utf8')).trim()).toBe(String(child.pid));
  });

  it('takes over a stale lock left by a dead process', async () => {
    const dir = await tempDir();
    const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
    await once(child, 'exit');
    const deadPid = child.pid!;
    expect(isAlive(deadPid)).toBe(false);
    await fsp.writeFile(path.join(dir, LOCK_FILE_NAME), `${deadPid}\n`);
    const lock = await LockFile.acquire(dir);
    expect(lock.tookOverFrom).toBe(deadPid);
    expect((await fsp.readFile(path.join(dir, LOCK_FILE_NAME), 'utf8')).trim()).toBe(String(process.pid));
    expect((await fsp.readdir(dir)).sort()).toEqual([LOCK_FILE_NAME]);
    await lock.release();
  });

  it('treats an unreadable lock file as stale', async () => {
    const dir = await tempDir();
    await fsp.writeFile(path.join(dir, LOCK_FILE_NAME), 'garbage');
    const lock = await LockFile.acquire(dir);
    expect(lock.tookOverFrom).toBe(0);
    await lock.release();
  });
});
