import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { DurableStorage } from './durable-storage.js';
import {
  StorageConfigError,
  StorageFailedError,
  StorageLegacyLockError,
  StorageLockCopiedError,
  StorageLockedError,
  StorageLockLostError,
  StorageLockUnavailableError,
  StorageLockUnsupportedError,
} from './errors.js';
import { nodeFs, type StorageFs } from './file-system.js';
import {
  isAlive,
  LOCK_FILE_NAME,
  LockFile,
  type LockOwner,
  readProcIdentity,
  readRecord,
} from './lock-file.js';
import { MemoryFs } from './memory-fs.js';
import { ents, removeTempDirs, tempDir } from './test-helpers.js';

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
    // With this machine's boot id and PID namespace but another start time: an earlier process with our PID.
    const me = readProcIdentity();
    if (me !== undefined) {
      await fsp.writeFile(
        path.join(dir, LOCK_FILE_NAME),
        `${process.pid}\nlock=kernel\nboot=${me.boot}\npidns=${me.pidNs}\nstart=${Number(me.startTicks) - 1}\n`,
      );
      const again = await LockFile.acquire(dir);
      expect(again.tookOverFrom).toBe(process.pid);
      await again.release();
    }
  });

  it('an old-format LOCK naming this very PID is refused, not taken: an old Floe as PID 1 in another container (lock review F1)', async () => {
    const dir = await tempDir();
    // The old version removes LOCK at a clean shutdown: a bare PID means one runs (or crashed), whatever its PID.
    await fsp.writeFile(path.join(dir, LOCK_FILE_NAME), `${process.pid}\n`);
    const err = await DurableStorage.open(dir, { bootstrapConf: CONF }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageLegacyLockError);
    expect((err as Error).message).toMatch(
      /Stop every Floe process of the older version .* then delete LOCK, or, once they are all stopped, pass `floe serve --take-legacy-lock`/,
    );
    expect(await lockText(dir)).toBe(`${process.pid}\n`); // left as it was
    expect(await fsp.readdir(dir)).toEqual([LOCK_FILE_NAME]); // nothing else touched
    // The one-time upgrade, asked for explicitly.
    const s = await DurableStorage.open(dir, { bootstrapConf: CONF, takeLegacyLock: true });
    expect(s.warnings.join('\n')).toMatch(/as asked \(takeLegacyLock\): every such process must be stopped/);
    await s.close();
    expect(await readRecord(nodeFs, path.join(dir, LOCK_FILE_NAME))).toMatchObject({
      legacy: false,
      closed: true,
    });
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

  it('refuses a record in the old format (a bare PID) whether its PID looks alive or dead: PIDs do not cross containers (F1)', async () => {
    const dir = await tempDir();
    const child = await liveChild();
    const dead = await deadPid();
    for (const text of [`${child.pid}\n`, `${dead}\n`, 'garbage']) {
      await fsp.writeFile(path.join(dir, LOCK_FILE_NAME), text);
      const err = await LockFile.acquire(dir).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StorageLegacyLockError);
      expect(await lockText(dir)).toBe(text); // left as it was
    }
    const lock = await LockFile.acquire(dir, nodeFs, undefined, { takeLegacyLock: true });
    expect(lock.tookOverFrom).toBe(0); // 'garbage' reads as PID 0
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

describe('LockFile: lock review of wt-flock (real processes and files)', () => {
  it('an older Floe replacing LOCK while this open writes its record: noticed after the fdatasync, the open does not run on the unlinked file (F2)', async () => {
    const dir = await tempDir();
    const file = path.join(dir, LOCK_FILE_NAME);
    const child = await liveChild(); // the older Floe, alive
    // A crashed kernel-lock holder's unclosed record: the old version reads the dead PID as a stale lock.
    await fsp.writeFile(file, `${await deadPid()}\nlock=kernel\n`);
    let raced = false;
    const racing: StorageFs = {
      ...nodeFs,
      async lockFile(f) {
        const locked = await nodeFs.lockFile(f);
        if (locked === 'held') return locked;
        return {
          ...locked,
          async datasync() {
            if (!raced) {
              raced = true;
              // The old version's takeover, between our identity check and our datasync: LOCK moved
              // aside and removed, its own bare-PID LOCK linked into place.
              await fsp.rename(file, `${file}.stale.${child.pid}`);
              await fsp.unlink(`${file}.stale.${child.pid}`);
              await fsp.writeFile(`${file}.${child.pid}.tmp`, `${child.pid}\n`);
              await fsp.link(`${file}.${child.pid}.tmp`, file);
              await fsp.unlink(`${file}.${child.pid}.tmp`);
            }
            await locked.datasync();
          },
        };
      },
    };
    const err = await DurableStorage.open(dir, { fs: racing, bootstrapConf: CONF }).catch((e: unknown) => e);
    expect(raced).toBe(true);
    expect(err).toBeInstanceOf(StorageLegacyLockError); // locked again: the LOCK now there is the old version's
    expect(await lockText(dir)).toBe(`${child.pid}\n`);
    expect(await fsp.readdir(dir)).toEqual([LOCK_FILE_NAME]); // no WAL was created
  });

  it('a data dir moved and copied while its holder runs: the copy is refused, naming the live holder, not called dead (F4)', async () => {
    if (readProcIdentity() === undefined) return; // Linux only (/proc)
    const root = await tempDir();
    const dir = path.join(root, 'd');
    const { child, line } = await storageChild(dir);
    expect(line).toBe(`open ${child.pid}`);
    await fsp.rename(dir, `${dir}.old`);
    await fsp.cp(`${dir}.old`, dir, { recursive: true });
    const err = await DurableStorage.open(dir, {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageLockCopiedError);
    expect((err as StorageLockCopiedError).pid).toBe(child.pid);
    expect((err as Error).message).toMatch(/moved or copied while that process had it open/);
    // Once the holder is gone, the copy opens (a restore from a copy of a crashed node's directory).
    child.kill('SIGKILL');
    await once(child, 'exit');
    const s = await DurableStorage.open(dir, {});
    expect(s.warnings[0]).toMatch(new RegExp(`^took over a stale lock left by dead process ${child.pid}`));
    await s.close();
  });

  it('the watchdog: LOCK deleted, or the data dir moved and copied under an open storage, fail-stops it like an fsync EIO (F3/F4)', async () => {
    const root = await tempDir();
    const dir = path.join(root, 'd');
    for (const lose of [
      () => fsp.unlink(path.join(dir, LOCK_FILE_NAME)),
      async () => {
        await fsp.rename(dir, `${dir}.old`);
        await fsp.cp(`${dir}.old`, dir, { recursive: true });
      },
    ]) {
      await fsp.rm(dir, { recursive: true, force: true });
      await fsp.rm(`${dir}.old`, { recursive: true, force: true });
      const s = await DurableStorage.open(dir, { bootstrapConf: CONF, segmentBytes: 1024 });
      await s.checkLock(); // fine while LOCK names the locked file
      await lose();
      const err = await s.checkLock().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StorageFailedError);
      expect((err as Error).cause).toBeInstanceOf(StorageLockLostError);
      const save = await s.save({ entries: ents(1, 1, 1) }, { sync: true }).catch((e: unknown) => e);
      expect(save).toBe(err); // every later save is refused with the same failure
      await s.close();
    }
  });

  it('the watchdog runs before every new WAL segment: a lost LOCK fails the save that would create one, and no segment is created (F3)', async () => {
    const dir = await tempDir();
    const s = await DurableStorage.open(dir, { bootstrapConf: CONF, segmentBytes: 1024 });
    let i = 1;
    // Roll once: segments are being created.
    while (s.segmentNames().length === 1 && i < 50)
      await s.save({ entries: ents(i, i++, 1, 100) }, { sync: true });
    const before = s.segmentNames().length;
    expect(before).toBe(2);
    await fsp.unlink(path.join(dir, LOCK_FILE_NAME));
    let err: unknown;
    for (let n = 0; n < 20 && err === undefined; n++) {
      err = await s.save({ entries: ents(i, i++, 1, 100) }, { sync: true }).then(
        () => undefined,
        (e: unknown) => e,
      );
    }
    expect(err).toBeInstanceOf(StorageFailedError);
    expect((err as Error).cause).toBeInstanceOf(StorageLockLostError);
    expect(await fsp.readdir(path.join(dir, 'wal'))).toHaveLength(before);
    await s.close();
  });

  it('a LOCK that is a symbolic link is refused clearly and its target is left alone (O_NOFOLLOW)', async () => {
    const dir = await tempDir();
    const target = path.join(await tempDir(), 'precious');
    await fsp.writeFile(target, 'keep me\n');
    await fsp.symlink(target, path.join(dir, LOCK_FILE_NAME));
    const err = await DurableStorage.open(dir, { bootstrapConf: CONF }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageConfigError);
    expect((err as Error).message).toMatch(/LOCK is a symbolic link: refusing to lock through it/);
    expect(await fsp.readFile(target, 'utf8')).toBe('keep me\n');
  });

  it('DurableStorage.open resolves a relative data dir to an absolute one', async () => {
    const dir = await tempDir();
    const rel = path.relative(process.cwd(), dir);
    const s = await DurableStorage.open(rel, { bootstrapConf: CONF });
    expect(s.dir).toBe(dir);
    await s.close();
  });

  it('a native lock module that does not load is named as such, with the musl/Alpine way out, not blamed on the file system', () => {
    const cause = Object.assign(
      new Error(
        'fs-native-extensions failed to load: No native build was found for platform=linux arch=x64 runtime=node abi=115 uv=1 libc=musl node=20',
      ),
      { code: 'ENOTSUP', moduleLoadFailed: true },
    );
    const msg = new StorageLockUnsupportedError('/d/LOCK', { cause }).message;
    expect(msg).toMatch(/native lock module \(fs-native-extensions\) failed to load: .*libc=musl/);
    expect(msg).toMatch(/on Alpine use a glibc-based image .* or opt in to the weaker PID rule/);
    expect(msg).not.toMatch(/local file system/);
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
    expect((err as Error).message).toMatch(/it was replaced 4 times while being locked/);
  });

  it('LOCK is never empty nor missing-then-empty: created already filled, rewritten from offset 0 then cut (F2)', async () => {
    const fs = new MemoryFs();
    await fs.mkdir(DIR);
    const seen: string[] = [];
    fs.faults = {
      delay: () => {
        if (fs.existsNow(`${DIR}/LOCK`)) seen.push(fs.readFileNow(`${DIR}/LOCK`).toString());
        return undefined;
      },
    };
    const a = await LockFile.acquire(DIR, fs, owner(1)); // LOCK absent: created
    await a.release();
    const b = await LockFile.acquire(DIR, fs, {
      pid: 123456,
      isAlive: () => false,
      host: 'a-longer-host-name',
    });
    await b.release();
    const c = await LockFile.acquire(DIR, fs, owner(2)); // a shorter record over a longer one
    await c.release();
    expect(seen.length).toBeGreaterThan(5);
    expect(seen.filter((t) => t === '')).toEqual([]);
    expect(fs.readFileNow(`${DIR}/LOCK`).toString()).toBe('2\nlock=kernel\nclosed=true\n');
    expect(await fs.readdir(DIR)).toEqual(['LOCK']); // the temp file is gone
  });

  it('the PID rule refuses an unclosed kernel-lock record whatever its PID: its holder may run in another PID namespace (F3)', async () => {
    const fs = new MemoryFs({ lockError: () => 'ENOTSUP' });
    await fs.mkdir(DIR);
    // A kernel-lock holder's record; its PID looks dead from here (another container).
    fs.writeFileNow(`${DIR}/LOCK`, Buffer.from('19734\nlock=kernel\nhost=pod-a\n'), true);
    const err = await LockFile.acquire(DIR, fs, owner(5), { unsupportedLock: 'pid-file' }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(StorageLockedError);
    expect((err as Error).message).toMatch(/kernel lock, which --storage-lock pid-file cannot check/);
    expect(fs.readFileNow(`${DIR}/LOCK`).toString()).toBe('19734\nlock=kernel\nhost=pod-a\n');
    // A closed one (a clean shutdown) is taken.
    fs.writeFileNow(`${DIR}/LOCK`, Buffer.from('19734\nlock=kernel\nclosed=true\n'), true);
    const lock = await LockFile.acquire(DIR, fs, owner(5), { unsupportedLock: 'pid-file' });
    expect(fs.readFileNow(`${DIR}/LOCK`).toString()).toBe('5\n');
    // Its watchdog: the record replaced by another process is a lost lock.
    await lock.verify();
    fs.writeFileNow(`${DIR}/LOCK`, Buffer.from('6\n'), true);
    expect(await lock.verify().catch((e: unknown) => e)).toBeInstanceOf(StorageLockLostError);
  });

  it('ENOLCK (an NFS lock daemon failing) is retried, then refused: never "unsupported", never the PID rule (F3)', async () => {
    let failures = 2;
    const fs = new MemoryFs({ lockError: () => (failures-- > 0 ? 'ENOLCK' : undefined) });
    await fs.mkdir(DIR);
    const lock = await LockFile.acquire(DIR, fs, owner(1), { enolckRetryMs: 0 });
    expect(lock.by).toBe('kernel');
    await lock.release();
    failures = Number.POSITIVE_INFINITY;
    const err = await LockFile.acquire(DIR, fs, owner(1), {
      enolckRetryMs: 0,
      unsupportedLock: 'pid-file',
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageLockUnavailableError);
    expect((err as Error).message).toMatch(/lock daemon/);
    expect(fs.readFileNow(`${DIR}/LOCK`).toString()).toMatch(/^1\nlock=kernel\nclosed=true\n$/);
  });

  it('the watchdog on the twin: LOCK unlinked under an open DurableStorage fail-stops it (what the simulator runs)', async () => {
    const fs = new MemoryFs();
    const s = await DurableStorage.open(DIR, { fs, bootstrapConf: CONF, lockOwner: owner(1) });
    await s.checkLock();
    fs.unlinkNow(`${DIR}/LOCK`);
    const err = await s.checkLock().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StorageFailedError);
    expect(await s.save({ entries: ents(1, 1, 1) }, { sync: true }).catch((e: unknown) => e)).toBe(err);
    await s.close();
  });

  it('where there is no kernel lock: refused by default; the PID rule only when opted in', async () => {
    for (const code of ['ENOTSUP', 'ENOSYS', 'EOPNOTSUPP', 'EINVAL']) {
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
