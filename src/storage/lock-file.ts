// The data directory's lock, so that two processes never append to the same WAL.
//
// A kernel lock (StorageFs.lockFile: Linux open-file-description lock, flock on macOS, LockFileEx on
// Windows) on `<dir>/LOCK`, held through one open file for the life of the storage. The kernel
// releases it when that file is closed or its process dies (kill -9 included); it works across PID
// namespaces and containers on one kernel, and a second open in the same process conflicts too. It
// depends on no PID and no clock: a kernel-format LOCK naming any PID, even ours (a container
// restarted as PID 1), is taken when the kernel lock is free (finding F2).
//
// - LOCK is never unlinked (unlinking would let two processes lock two different inodes under one
//   name) and never empty: when absent it is created already holding our record (a temp file
//   linked into place), and a record is written over the old one from offset 0, then cut to its
//   length. After locking, and again after the record is fdatasynced, the name must still name the
//   locked file (replaced in between: try again).
// - The record (PID first, so that a Floe version that locked by PID only reads it; then host, start
//   time, and on Linux boot id, PID namespace and /proc start time) decides two things:
//   * a record in the old format (a bare PID: an older Floe, or --storage-lock pid-file) is refused
//     whatever its PID (lock review F1): such a process removes LOCK when it stops cleanly, so a
//     record means one runs (holding no kernel lock) or crashed, and PIDs cannot tell which across
//     containers. The operator stops them and deletes LOCK, or opts in once (`takeLegacyLock`);
//   * an unclosed record naming a process that is verifiably alive here (same boot, PID namespace
//     and start time) is refused although the kernel lock is free: the directory was moved or
//     copied while it was open (lock review F4).
// - verify() (the watchdog: before every new WAL segment and snapshot file, and periodically)
//   checks that LOCK still names the locked file; DurableStorage fail-stops when it does not.
// - Where the platform or file system has no such lock, the open is refused
//   (StorageLockUnsupportedError) unless the caller opted in to the PID rule (`unsupportedLock:
//   'pid-file'`), the former lock: LOCK created by link(2) naming our PID, a lock naming a dead PID
//   taken over, our own PID counted as alive; an unclosed kernel-format record is refused there
//   (lock review F3). ENOLCK (an NFS lock daemon failing) is not "unsupported": retried, then refused.
import { readFileSync, readlinkSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  StorageConfigError,
  StorageLegacyLockError,
  StorageLockCopiedError,
  StorageLockedError,
  StorageLockLostError,
  StorageLockUnavailableError,
  StorageLockUnsupportedError,
} from './errors.js';
import { LOCK_UNSUPPORTED_CODES, type LockedFile, nodeFs, type StorageFs } from './file-system.js';
import { errCode, removeIfExists, writeAll } from './fs-util.js';

export const LOCK_FILE_NAME = 'LOCK';

/** Who a process is on this machine (Linux: all three from /proc), so that a record can be told apart from a live holder. */
export interface ProcIdentity {
  /** /proc/sys/kernel/random/boot_id */
  readonly boot: string;
  /** readlink /proc/self/ns/pid, e.g. `pid:[4026531836]` */
  readonly pidNs: string;
  /** Field 22 of /proc/self/stat: start time in clock ticks since boot. */
  readonly startTicks: string;
}

/**
 * Who takes the lock: what the record tells humans, and (for the opt-in PID rule and the moved-or-copied
 * check only) how to tell whether a recorded PID still runs. The real one is this process and
 * `kill(pid, 0)`; a simulation that crashes and restarts nodes inside one process gives each
 * incarnation its own number.
 */
export interface LockOwner {
  /** Positive integer written into the lock file. */
  readonly pid: number;
  isAlive(pid: number): boolean;
  /** Recorded for humans. */
  readonly host?: string;
  /** Recorded for humans (ISO 8601). */
  readonly startedAt?: string;
  /** Recorded where known (Linux); with `startTicksOf`, refuses a directory moved or copied while open. */
  readonly identity?: ProcIdentity;
  /** Start time (field 22 of /proc/<pid>/stat) of a process in our PID namespace; undefined where unknown. */
  startTicksOf?(pid: number): string | undefined;
}

function statStartTicks(file: string): string | undefined {
  try {
    const stat = readFileSync(file, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: fields after its last ')' start at field 3.
    const v = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
    return v !== undefined && /^\d+$/.test(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/** This process's identity from /proc (undefined where there is no /proc, e.g. macOS and Windows). */
export function readProcIdentity(): ProcIdentity | undefined {
  try {
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    const pidNs = readlinkSync('/proc/self/ns/pid');
    // Our own through /proc/self: `process.pid` names another process where /proc belongs to another PID namespace.
    const startTicks = statStartTicks('/proc/self/stat');
    if (!boot || !pidNs || /\s/.test(boot + pidNs) || startTicks === undefined) return undefined;
    return { boot, pidNs, startTicks };
  } catch {
    return undefined;
  }
}

export const processLockOwner: LockOwner = {
  pid: process.pid,
  isAlive,
  host: os.hostname(),
  startedAt: new Date(Math.round(performance.timeOrigin)).toISOString(),
  identity: readProcIdentity(),
  startTicksOf: (pid) => statStartTicks(pid === process.pid ? '/proc/self/stat' : `/proc/${pid}/stat`),
};

/** What to do where the kernel lock is unsupported: refuse (default), or the PID rule. */
export type UnsupportedLockPolicy = 'refuse' | 'pid-file';

export interface LockOptions {
  unsupportedLock?: UnsupportedLockPolicy;
  /**
   * Take a LOCK in the old format (a bare PID: an older Floe version, or the PID rule) instead of refusing it.
   * For the one start after every such process was stopped (an upgrade). Default false.
   */
  takeLegacyLock?: boolean;
  onWarning?: (message: string) => void;
  /** Milliseconds before the retries of a lock refused with ENOLCK (default 250; tests pass 0). */
  enolckRetryMs?: number;
}

/** What a LOCK file says about the process that wrote it. */
export interface LockRecord {
  /** 0 when unreadable. */
  pid: number;
  host?: string;
  startedAt?: string;
  boot?: string;
  pidNs?: string;
  startTicks?: string;
  /** Its holder closed it (a clean shutdown). */
  closed: boolean;
  /** A bare PID: written by a Floe version that locked by PID only (or by the opt-in PID rule). */
  legacy: boolean;
}

/** Retries when LOCK is replaced (or created) between our open and our check. */
const REPLACED_RETRIES = 4;
/** Tries of a lock refused with ENOLCK before giving up. */
const ENOLCK_TRIES = 4;

export class LockFile {
  private released = false;
  private constructor(
    readonly file: string,
    /** The record found in LOCK before we took it (undefined: no LOCK, or an empty one). */
    readonly previous: LockRecord | undefined,
    /** 'kernel', or 'pid-file' (the opted-in PID rule where the kernel lock is unsupported). */
    readonly by: 'kernel' | 'pid-file',
    private readonly fs: StorageFs,
    private readonly owner: LockOwner,
    private readonly locked: LockedFile | undefined,
    /** fileId of the locked file ('' for the PID rule). */
    private readonly lockedId: string,
  ) {}

  /** The process whose lock was taken over without a clean close (it died), if any: its PID (0 if unreadable). */
  get tookOverFrom(): number | undefined {
    return this.previous && !this.previous.closed ? this.previous.pid : undefined;
  }

  /**
   * Takes the lock on `dir` (which must exist). Throws StorageLockedError if another open file holds
   * it, StorageLegacyLockError for an old-format LOCK (unless `takeLegacyLock`), StorageLockCopiedError
   * for a record naming a live process that does not hold it, StorageLockUnavailableError after
   * repeated ENOLCK, StorageLockUnsupportedError where there is no kernel lock (unless
   * `unsupportedLock: 'pid-file'`).
   */
  static async acquire(
    dir: string,
    fs: StorageFs = nodeFs,
    owner: LockOwner = processLockOwner,
    options: LockOptions = {},
  ): Promise<LockFile> {
    const file = path.join(dir, LOCK_FILE_NAME);
    let enolck = 0;
    /** The record we created LOCK with (createFilled), if we did: finding it again is not a previous holder. */
    let created: string | undefined;
    for (let attempt = 0; attempt < REPLACED_RETRIES; ) {
      let f: LockedFile | 'held';
      try {
        f = await fs.lockFile(file);
      } catch (err) {
        const code = errCode(err) ?? '';
        if (code === 'ENOENT') {
          // Created already holding our record: a reader never sees an empty LOCK (an older Floe reads
          // an empty one as stale and deletes it).
          const text = recordText(owner, false);
          if (await createFilled(fs, dir, file, text)) created = text;
          attempt++;
          continue;
        }
        if (code === 'ELOOP') {
          throw new StorageConfigError(
            `${file} is a symbolic link: refusing to lock through it (LOCK must be a regular file in the data dir; remove the link)`,
            { cause: err },
          );
        }
        if (code === 'ENOLCK') {
          // Not "unsupported": on NFS the lock daemon failed or ran out of locks, which may pass.
          if (++enolck < ENOLCK_TRIES) {
            const ms = options.enolckRetryMs ?? 250;
            if (ms > 0) await new Promise((r) => setTimeout(r, ms * enolck));
            continue;
          }
          throw new StorageLockUnavailableError(file, { cause: err });
        }
        if (!LOCK_UNSUPPORTED_CODES.has(code)) {
          throw new StorageConfigError(`data dir ${dir} is not writable: ${(err as Error).message}`, {
            cause: err,
          });
        }
        if (options.unsupportedLock !== 'pid-file')
          throw new StorageLockUnsupportedError(file, { cause: err });
        options.onWarning?.(
          `no kernel file lock here (${(err as Error).message}): locking ${file} by PID only, as opted in ` +
            '(a lock naming a live PID, this process included, is refused until it is removed by hand)',
        );
        return await LockFile.acquireByPid(dir, fs, owner);
      }
      if (f === 'held') {
        // Best effort (Windows refuses to read a file another process has locked): the message only.
        const r = await readRecord(fs, file).catch(() => undefined);
        throw new StorageLockedError(file, r?.pid ?? 0, describeHolder(r));
      }
      attempt++;
      try {
        // The name must still name the file we locked: if LOCK was replaced in between, our lock
        // guards an inode no one else will open.
        const id = await f.id();
        if (!(await namesFile(fs, file, id))) {
          await f.close();
          continue;
        }
        const found = (await f.read()).toString('utf8');
        const previous = found === created ? undefined : parseRecord(found);
        if (previous?.legacy) {
          if (!options.takeLegacyLock) throw new StorageLegacyLockError(file, previous.pid);
          options.onWarning?.(
            `taking ${file}, written by a Floe version that locked by PID only (or --storage-lock pid-file), ` +
              `naming process ${previous.pid}, as asked (takeLegacyLock): every such process must be stopped`,
          );
        } else if (previous !== undefined && !previous.closed && heldByLiveProcess(previous, owner)) {
          throw new StorageLockCopiedError(file, previous.pid);
        }
        await writeRecord(f, recordText(owner, false));
        await f.datasync();
        // Again after the record is durable: a process that replaced LOCK meanwhile (an older Floe
        // deleting what it took for a stale lock) must not leave us running on an unlinked file.
        if (!(await namesFile(fs, file, id))) {
          await f.close();
          continue;
        }
        return new LockFile(file, previous, 'kernel', fs, owner, f, id);
      } catch (err) {
        await f.close().catch(() => {});
        throw err;
      }
    }
    throw new StorageConfigError(
      `could not lock ${file}: it was replaced ${REPLACED_RETRIES} times while being locked ` +
        '(something keeps deleting or renaming it? An older Floe version or --storage-lock pid-file running on ' +
        'this directory? LOCK must never be deleted)',
    );
  }

  /**
   * The watchdog: throws StorageLockLostError unless LOCK still names the file this lock holds (for the
   * PID rule: still holds our record). Deleted, replaced, or the directory moved or copied away: another
   * process may open it, so the caller stops writing (DurableStorage fail-stops).
   */
  async verify(): Promise<void> {
    if (this.released) return;
    if (this.locked === undefined) {
      const r = await readRecord(this.fs, this.file).catch(() => undefined);
      if (r?.pid === this.owner.pid && r.legacy) return;
      throw new StorageLockLostError(
        `${this.file} no longer holds this process's record (PID rule): ${r === undefined ? 'it is gone' : `it names process ${r.pid}`}; ` +
          'another process may have taken the data dir: refusing further writes',
      );
    }
    if (await namesFile(this.fs, this.file, this.lockedId)) return;
    throw new StorageLockLostError(
      `${this.file} no longer names the file this process locked (deleted, replaced, or the data dir was moved ` +
        'or copied while open): another process may open the data dir, refusing further writes',
    );
  }

  /** Releases the lock: marks the record closed (fdatasynced) and closes the file (LOCK stays). Idempotent. */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    if (this.locked === undefined) return this.releasePidFile();
    try {
      // fdatasynced: after a power loss the next open does not take this for a holder that died.
      await writeRecord(this.locked, recordText(this.owner, true));
      await this.locked.datasync();
    } finally {
      await this.locked.close();
    }
  }

  /** The PID rule: LOCK created by link(2) naming our PID; a lock naming a dead PID is taken over. */
  private static async acquireByPid(dir: string, fs: StorageFs, owner: LockOwner): Promise<LockFile> {
    const file = path.join(dir, LOCK_FILE_NAME);
    const tmp = path.join(dir, `${LOCK_FILE_NAME}.${owner.pid}.tmp`);
    try {
      const fh = await fs.open(tmp, 'w');
      try {
        await writeAll(fh, [Buffer.from(`${owner.pid}\n`)], 0);
      } finally {
        await fh.close();
      }
    } catch (err) {
      throw new StorageConfigError(`data dir ${dir} is not writable: ${(err as Error).message}`, {
        cause: err,
      });
    }
    let previous: LockRecord | undefined;
    try {
      for (let attempt = 0; attempt < 5; attempt++) {
        try {
          await fs.link(tmp, file);
          await fs.syncDir(dir);
          return new LockFile(file, previous, 'pid-file', fs, owner, undefined, '');
        } catch (err) {
          if (errCode(err) !== 'EEXIST') throw err;
        }
        const holder = await readRecord(fs, file);
        if (holder === undefined) continue; // vanished between link and read: try again
        if (!holder.legacy && !holder.closed) {
          // A process with the kernel lock holds it, or one crashed holding it: its PID proves nothing
          // (another PID namespace), and it never re-reads LOCK. Never taken by the PID rule.
          throw new StorageLockedError(
            file,
            holder.pid,
            `${describeHolder(holder)} (a Floe process using the kernel lock, which --storage-lock pid-file cannot ` +
              'check: if no process uses this directory, start once where the kernel lock works, or delete LOCK by hand)',
            'pid-file',
          );
        }
        if (owner.isAlive(holder.pid) && !holder.closed)
          throw new StorageLockedError(file, holder.pid, describeHolder(holder), 'pid-file');
        // Stale: move it aside, then check that what we moved is the stale lock we looked at.
        const aside = path.join(dir, `${LOCK_FILE_NAME}.stale.${owner.pid}`);
        try {
          await fs.rename(file, aside);
        } catch (err) {
          if (errCode(err) === 'ENOENT') continue;
          throw err;
        }
        const moved = await readRecord(fs, aside);
        if (
          moved !== undefined &&
          !moved.closed &&
          (!moved.legacy || (moved.pid !== holder.pid && owner.isAlive(moved.pid)))
        ) {
          // Another process took over and created a fresh lock in between: give it back.
          await fs.link(aside, file).catch(() => {});
          await removeIfExists(fs, aside);
          throw new StorageLockedError(file, moved.pid, describeHolder(moved), 'pid-file');
        }
        await removeIfExists(fs, aside);
        previous = { ...holder, closed: holder.closed };
      }
      throw new StorageConfigError(
        `could not take the lock ${file}: it keeps changing (another process starting?)`,
      );
    } finally {
      await removeIfExists(fs, tmp);
    }
  }

  /** Removes the lock file (only if it is still ours). */
  private async releasePidFile(): Promise<void> {
    const r = await readRecord(this.fs, this.file);
    if (r?.pid === this.owner.pid && r.legacy) {
      await removeIfExists(this.fs, this.file);
      await this.fs.syncDir(path.dirname(this.file));
    }
  }
}

/** True when LOCK (`file`) names the file with this id now. */
async function namesFile(fs: StorageFs, file: string, id: string): Promise<boolean> {
  try {
    return (await fs.fileId(file)) === id;
  } catch (err) {
    if (errCode(err) === 'ENOENT') return false;
    throw err;
  }
}

/** Writes a record over the one in `f`: from offset 0, then cut to its length (never empty in between). */
async function writeRecord(f: LockedFile, text: string): Promise<void> {
  const data = Buffer.from(text);
  await writeAll(f, [data], 0);
  await f.truncate(data.length);
}

/** Creates LOCK holding `text` (a temp file linked into place): true; false if LOCK exists (left as it is). */
async function createFilled(fs: StorageFs, dir: string, file: string, text: string): Promise<boolean> {
  const tmp = path.join(dir, `${LOCK_FILE_NAME}.${text.slice(0, text.indexOf('\n'))}.new`);
  try {
    const fh = await fs.open(tmp, 'w');
    try {
      await writeAll(fh, [Buffer.from(text)], 0);
    } finally {
      await fh.close();
    }
    try {
      await fs.link(tmp, file);
      return true;
    } catch (err) {
      // EEXIST: another process created LOCK first; ENOENT: our temp file was removed meanwhile. Lock again.
      if (errCode(err) !== 'EEXIST' && errCode(err) !== 'ENOENT') throw err;
      return false;
    }
  } catch (err) {
    throw new StorageConfigError(`data dir ${dir} is not writable: ${(err as Error).message}`, {
      cause: err,
    });
  } finally {
    await removeIfExists(fs, tmp).catch(() => {});
  }
}

/**
 * The record names a process that is verifiably alive on this machine: the same boot and PID namespace as
 * ours, and that PID's start time is the one recorded (ourselves included). Unverifiable: false.
 */
function heldByLiveProcess(r: LockRecord, owner: LockOwner): boolean {
  const me = owner.identity;
  if (me === undefined || owner.startTicksOf === undefined) return false;
  if (r.boot !== me.boot || r.pidNs !== me.pidNs || r.startTicks === undefined || r.pid <= 0) return false;
  if (r.pid === owner.pid) return r.startTicks === me.startTicks;
  if (!owner.isAlive(r.pid)) return false;
  return owner.startTicksOf(r.pid) === r.startTicks;
}

/** The record: the PID on the first line (a PID-only reader parses just that), then key=value lines. */
function recordText(owner: LockOwner, closed: boolean): string {
  let s = `${owner.pid}\nlock=kernel\n`;
  if (owner.host !== undefined) s += `host=${owner.host.replace(/\s/g, '_')}\n`;
  if (owner.startedAt !== undefined) s += `started=${owner.startedAt}\n`;
  const id = owner.identity;
  if (id !== undefined) s += `boot=${id.boot}\npidns=${id.pidNs}\nstart=${id.startTicks}\n`;
  if (closed) s += 'closed=true\n';
  return s;
}

/** The record in a LOCK file; undefined if there is no file or it is empty. Unparsable content reads as pid 0. */
export async function readRecord(fs: StorageFs, file: string): Promise<LockRecord | undefined> {
  let text: string;
  try {
    text = (await fs.readFile(file)).toString('utf8');
  } catch (err) {
    if (errCode(err) === 'ENOENT') return undefined;
    throw err;
  }
  return parseRecord(text);
}

function parseRecord(text: string): LockRecord | undefined {
  if (text.trim() === '') return undefined;
  const [first = '', ...rest] = text.split('\n');
  const pid = /^\s*\d+\s*$/.test(first) ? Number.parseInt(first, 10) : 0;
  const fields = new Map<string, string>();
  for (const line of rest) {
    const eq = line.indexOf('=');
    if (eq > 0) fields.set(line.slice(0, eq), line.slice(eq + 1));
  }
  return {
    pid: Number.isSafeInteger(pid) && pid > 0 ? pid : 0,
    host: fields.get('host'),
    startedAt: fields.get('started'),
    boot: fields.get('boot'),
    pidNs: fields.get('pidns'),
    startTicks: fields.get('start'),
    closed: fields.get('closed') === 'true',
    legacy: !fields.has('lock'),
  };
}

/** " on host H, started T", as far as the record tells. */
export function describeHolder(r: LockRecord | undefined): string {
  if (r === undefined) return '';
  return (r.host ? ` on host ${r.host}` : '') + (r.startedAt ? `, started ${r.startedAt}` : '');
}

/** True when a process with this PID exists (EPERM: it exists but belongs to another user). */
export function isAlive(pid: number): boolean {
  if (pid <= 0) return false;
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return errCode(err) === 'EPERM';
  }
}
