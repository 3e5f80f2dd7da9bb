import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { DurableStorage } from './durable-storage.js';
import { StorageConfigError, StorageLockedError, StorageLockUnsupportedError } from './errors.js';
import { nodeFs } from './file-system.js';
import { isAlive, LOCK_FILE_NAME, LockFile, type LockOwner, readRecord } from './lock-file.js';
import { MemoryFs } from './memory-fs.js';
import { removeTempDirs, tempDir } from './test-helpers.js';

const HOLDER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'lock-holder-child.ts');
const CONF = { voters: [1], learners: [] };

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

/** A child process that opens a DurableStorage on `dir`; resolves with its first line (`open <pid>` or `refused ...`). */
async function storageChild(dir: string): Promise<{ child: ChildProcess; line: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', HOLDER, dir], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  children.push(child);
  const lines = createInterface({ input: child.stdout! });
  const [line] = (await once(lines, 'line')) as [string];
  return { child, line };
}

async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
  await once(child, 'exit');
  expect(isAlive(child.pid!)).toBe(false);
  return child.pid!;
}

const lockText = (dir: string) => fsp.readFile(path.join(dir, LOCK_FILE_NAME), 'utf8');

describe('LockFile (kernel lock)', () => {
  it('records this process, refuses a second open in this process, releases and leaves LOCK marked closed', async () => {
    const dir = await tempDir();
    const lock = await LockFile.acquire(dir);
    expect(lock.by).toBe('kernel');
    expect(lock.previous).toBeUndefined();
    const rec = await readRecord(nodeFs, path.join(dir, LOCK_FILE_NAME));
    expect(rec).toMatchObject({ pid: process.pid, closed: false, legacy: false });
    expect((await lockText(dir)).split('\n')[0]).toBe(String(process.pid)); // a PID-only reader parses it
    const err = await LockFile.acquire(dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageLockedError);
    expect((err as StorageLockedError).pid).toBe(process.pid);
    expect((err as Error).message).toMatch(/already open/);
    await lock.release();
    expect(await fsp.readdir(dir)).toEqual([LOCK_FILE_NAME]);
    expect(await readRecord(nodeFs, path.join(dir, LOCK_FILE_NAME))).toMatchObject({ closed: true });
    const again = await LockFile.acquire(dir);
    expect(again.tookOverFrom).toBeUndefined(); // a clean close is not a takeover
    await again.release();
  });

  it('takes a LOCK naming this very PID when no one holds the kernel lock: a container restarted as PID 1 (finding F2)', async () => {
    const dir = await tempDir();
    // The previous container's PID 1 wrote LOCK and died; this process has the same PID now.
    await fsp.writeFile(path.join(dir, LOCK_FILE_NAME), `${process.pid}\nlock=kernel\nhost=old-container\n`);
    const lock = await LockFile.acquire(dir);
    expect(lock.tookOverFrom).toBe(process.pid);
    await lock.release();
    // The same with a record in the old format (a bare PID), as the previous Floe version left it.
    await fsp.writeFile(path.join(dir, LOCK_FILE_NAME), `${process.pid}\n`);
    const again = await LockFile.acquire(dir);
    expect(again.tookOverFrom).toBe(process.pid);
    await again.release();
  });

  it('a DurableStorage restarted with the PID of its dead predecessor opens, with a warning naming it (F2)', async () => {
    const dir = await tempDir();
    const s = await DurableStorage.open(dir, { bootstrapConf: CONF });
    await s.close();
    await fsp.writeFile(
      path.join(dir, LOCK_FILE_NAME),
      `${process.pid}\nlock=kernel\nhost=pod-a\nstarted=T0\n`,
    );
    const r = await DurableStorage.open(dir, {});
    expect(r.warnings).toContain(
      `took over a stale lock left by dead process ${process.pid} on host pod-a, started T0`,
    );
    await r.close();
  });

  it('refuses while another real process holds it, naming that process; after kill -9 it opens at once', async () => {
    const dir = await tempDir();
    const { child, line } = await storageChild(dir);
    expect(line).toBe(`open ${child.pid}`);
    const err = await DurableStorage.open(dir, {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageLockedError);
    expect((err as StorageLockedError).pid).toBe(child.pid);
    expect((err as Error).message).toContain(`locked by live process ${child.pid} on host `);
    // The kernel drops the lock when the holder dies: no waiting, no PID check.
    child.kill('SIGKILL');
    await once(child, 'exit');
    const s = await DurableStorage.open(dir, {});
    expect(s.warnings[0]).toMatch(
      new RegExp(`^took over a stale lock left by dead process ${child.pid} on host `),
    );
    // And now a child is refused, naming this process.
    const second = await storageChild(dir);
    expect(second.line).toMatch(
      new RegExp(`^refused ERR_STORAGE_LOCKED .*locked by live process ${process.pid}`),
    );
    await once(second.child, 'exit');
    await s.close();
  });

  it('refuses a record in the old format (a bare PID) that names another live process: an old Floe version may run there', async () => {
    const dir = await tempDir();
    const child = await liveChild();
    await fsp.writeFile(path.join(dir, LOCK_FILE_NAME), `${child.pid}\n`);
    const err = await LockFile.acquire(dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageLockedError);
    expect((err as Error).message).toContain(
      `locked by live process ${child.pid} (recorded by a Floe version`,
    );
    expect(await lockText(dir)).toBe(`${child.pid}\n`); // left as it was
    // A dead one is taken over.
    const dead = await deadPid();
    await fsp.writeFile(path.join(dir, LOCK_FILE_NAME), `${dead}\n`);
    const lock = await LockFile.acquire(dir);
    expect(lock.tookOverFrom).toBe(dead);
    await lock.release();
  });

  it('treats an unreadable lock file as a dead holder', async () => {
    const dir = await tempDir();
    await fsp.writeFile(path.join(dir, LOCK_FILE_NAME), 'garbage');
    const lock = await LockFile.acquire(dir);
    expect(lock.tookOverFrom).toBe(0);
    await lock.release();
  });

  it('LOCK deleted while held: the kernel cannot see the old holder, so the second open goes through, with a warning', async () => {
    const dir = await tempDir();
    const first = await DurableStorage.open(dir, { bootstrapConf: CONF });
    for (const replace of [
      () => fsp.unlink(path.join(dir, LOCK_FILE_NAME)), // rm LOCK
      async () => {
        await fsp.unlink(path.join(dir, LOCK_FILE_NAME)); // rm LOCK; touch LOCK
        await fsp.writeFile(path.join(dir, LOCK_FILE_NAME), '');
      },
    ]) {
      await replace();
      const second = await DurableStorage.open(dir, {});
      expect(second.warnings.join('\n')).toMatch(
        /LOCK was missing or empty although .* holds a log: if it was deleted or replaced while another process had this directory open, that process still runs without the lock: stop it now/,
      );
      await second.close();
    }
    await first.close();
  });
});

describe('LockFile on the MemoryFs twin', () => {
  const DIR = '/lock-test';
  const owner = (pid: number): LockOwner => ({ pid, isAlive: () => false });

  it('is held until closed or until the holding process crashes (process or power)', async () => {
    for (const kind of ['process', 'power'] as const) {
      let fs = new MemoryFs();
      await fs.mkdir(DIR);
      await fs.syncDir('/');
      const a = await LockFile.acquire(DIR, fs, owner(1));
      expect(await LockFile.acquire(DIR, fs, owner(1)).catch((e: unknown) => e)).toBeInstanceOf(
        StorageLockedError,
      );
      await a.release();
      await LockFile.acquire(DIR, fs, owner(1)); // never released: the process dies holding it
      await fs.syncDir(DIR); // as DurableStorage's next steps do: LOCK's name is durable
      fs = fs.crash({ kind });
      const b = await LockFile.acquire(DIR, fs, owner(2));
      expect(b.tookOverFrom).toBe(1); // its fdatasynced record survives a power loss too
      await b.release();
    }
  });

  it('a LOCK replaced between the lock and the check is locked again; one that keeps being replaced is refused', async () => {
    const fs = new MemoryFs();
    await fs.mkdir(DIR);
    let replacements = 1;
    fs.faults = {
      delay: (op, p) => {
        if (op === 'stat' && p === `${DIR}/LOCK` && replacements > 0) {
          replacements--;
          fs.unlinkNow(p);
          fs.writeFileNow(p, Buffer.alloc(0), false);
        }
        return undefined;
      },
    };
    const lock = await LockFile.acquire(DIR, fs, owner(1));
    expect(replacements).toBe(0);
    // The lock guards the file the name names now: a second open is refused.
    expect(await LockFile.acquire(DIR, fs, owner(2)).catch((e: unknown) => e)).toBeInstanceOf(
      StorageLockedError,
    );
    await lock.release();
    replacements = Number.POSITIVE_INFINITY;
    const err = await LockFile.acquire(DIR, fs, owner(1)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageConfigError);
    expect((err as Error).message).toMatch(/it was replaced 3 times while being locked/);
  });

  it('where there is no kernel lock: refused by default; the PID rule only when opted in', async () => {
    for (const code of ['ENOTSUP', 'ENOLCK', 'ENOSYS', 'EOPNOTSUPP', 'EINVAL']) {
      const fs = new MemoryFs({ lockError: () => code });
      await fs.mkdir(DIR);
      const err = await DurableStorage.open(DIR, { fs, bootstrapConf: CONF }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StorageLockUnsupportedError);
      expect((err as Error).message).toMatch(/no kernel file lock.*refusing to open the data dir unlocked/);
      expect(fs.existsNow(`${DIR}/wal`)).toBe(false); // nothing was touched
    }
    // Another failure (a read-only directory, say) is not "unsupported": no fallback.
    const ro = new MemoryFs({ lockError: () => 'EROFS' });
    await ro.mkdir(DIR);
    const roErr = await DurableStorage.open(DIR, { fs: ro, unsupportedLock: 'pid-file' }).catch(
      (e: unknown) => e,
    );
    expect(roErr).toBeInstanceOf(StorageConfigError);
    expect((roErr as Error).message).toMatch(/not writable: EROFS/);

    let fs = new MemoryFs({ lockError: () => 'ENOTSUP' });
    const pidOwner = (pid: number, alive: number[]): LockOwner => ({
      pid,
      isAlive: (p) => alive.includes(p),
    });
    const s = await DurableStorage.open(DIR, {
      fs,
      bootstrapConf: CONF,
      unsupportedLock: 'pid-file',
      lockOwner: pidOwner(7, [7]),
    });
    expect(s.warnings[0]).toMatch(
      /no kernel file lock here .*locking \/lock-test\/LOCK by PID only, as opted in/,
    );
    expect(fs.readFileNow(`${DIR}/LOCK`).toString()).toBe('7\n');
    const held = await DurableStorage.open(DIR, {
      fs,
      unsupportedLock: 'pid-file',
      lockOwner: pidOwner(8, [7, 8]),
    }).catch((e: unknown) => e);
    expect(held).toBeInstanceOf(StorageLockedError);
    expect((held as StorageLockedError).by).toBe('pid-file');
    // After the holder died the PID rule takes its lock over; it cannot tell a live PID from a reused one (F2 stays).
    fs = fs.crash({ kind: 'process' });
    const r = await DurableStorage.open(DIR, {
      fs,
      unsupportedLock: 'pid-file',
      lockOwner: pidOwner(8, [8]),
    });
    expect(r.warnings).toContain('took over a stale lock left by dead process 7');
    await r.close();
    expect(fs.existsNow(`${DIR}/LOCK`)).toBe(false); // the PID rule removes its LOCK at close, as before
  });
});
