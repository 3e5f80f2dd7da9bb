// The data directory's lock, so that two processes never append to the same WAL.
//
// A kernel lock (StorageFs.lockFile: Linux open-file-description lock, flock on macOS, LockFileEx on
// Windows) on `<dir>/LOCK`, held through one open file for the life of the storage. The kernel
// releases it when that file is closed or its process dies (kill -9 included); it works across PID
// namespaces and containers on one kernel, and a second open in the same process conflicts too. It
// depends on no PID and no clock: a LOCK naming any PID, even ours (a container restarted as PID 1),
// is taken when the kernel lock is free (finding F2).
//
// - LOCK is created if absent and never unlinked (unlinking would let two processes lock two
//   different inodes under one name). After locking, the name must still name the locked file (a
//   replacement in between: try again).
// - The holder then writes a record for humans (PID, host, start time; the PID first, so that a
//   Floe version that locked by PID only reads it) and fdatasyncs it; close() marks it closed. The
//   record decides nothing, with one exception: a record in the old format (a bare PID, written by
//   a version that locked by PID only) naming another live process refuses the open, as that
//   version would have.
// - Where the platform or file system has no such lock, the open is refused
//   (StorageLockUnsupportedError) unless the caller opted in to the PID rule (`unsupportedLock:
//   'pid-file'`), the former lock: LOCK created by link(2) naming our PID, a lock naming a dead PID
//   taken over, our own PID counted as alive.
import * as os from 'node:os';
import * as path from 'node:path';
import { StorageConfigError, StorageLockedError, StorageLockUnsupportedError } from './errors.js';
import { LOCK_UNSUPPORTED_CODES, type LockedFile, nodeFs, type StorageFs } from './file-system.js';
import { errCode, removeIfExists, writeAll } from './fs-util.js';

export const LOCK_FILE_NAME = 'LOCK';

/**
 * Who takes the lock: what the record tells humans, and (for an old-format record and the opt-in
 * PID rule only) how to tell whether a recorded PID still runs. The real one is this process and
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
}

export const processLockOwner: LockOwner = {
  pid: process.pid,
  isAlive,
  host: os.hostname(),
  startedAt: new Date(Math.round(performance.timeOrigin)).toISOString(),
};

/** What to do where the kernel lock is unsupported: refuse (default), or the PID rule. */
export type UnsupportedLockPolicy = 'refuse' | 'pid-file';

export interface LockOptions {
  unsupportedLock?: UnsupportedLockPolicy;
  onWarning?: (message: string) => void;
}

/** What a LOCK file says about the process that wrote it. */
export interface LockRecord {
  /** 0 when unreadable. */
  pid: number;
  host?: string;
  startedAt?: string;
  /** Its holder closed it (a clean shutdown). */
  closed: boolean;
  /** A bare PID: written by a Floe version that locked by PID only (or by the opt-in PID rule). */
  legacy: boolean;
}

/** Retries when LOCK is replaced between our open and our check. */
const REPLACED_RETRIES = 3;

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
  ) {}

  /** The process whose lock was taken over without a clean close (it died), if any: its PID (0 if unreadable). */
  get tookOverFrom(): number | undefined {
    return this.previous && !this.previous.closed ? this.previous.pid : undefined;
  }

  /**
   * Takes the lock on `dir` (which must exist). Throws StorageLockedError if another open file holds
   * it, StorageLockUnsupportedError where there is no kernel lock (unless `unsupportedLock: 'pid-file'`).
   */
  static async acquire(
    dir: string,
    fs: StorageFs = nodeFs,
    owner: LockOwner = processLockOwner,
    options: LockOptions = {},
  ): Promise<LockFile> {
    const file = path.join(dir, LOCK_FILE_NAME);
    for (let attempt = 0; attempt < REPLACED_RETRIES; attempt++) {
      let f: LockedFile | 'held';
      try {
        f = await fs.lockFile(file);
      } catch (err) {
        if (!LOCK_UNSUPPORTED_CODES.has(errCode(err) ?? '')) {
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
      try {
        // The name must still name the file we locked: if LOCK was replaced in between, our lock
        // guards an inode no one else will open.
        const now = await fs.fileId(file).catch((err: unknown) => {
          if (errCode(err) === 'ENOENT') return undefined;
          throw err;
        });
        if (now !== (await f.id())) {
          await f.close();
          continue;
        }
        const previous = parseRecord((await f.read()).toString('utf8'));
        if (previous?.legacy && previous.pid !== owner.pid && owner.isAlive(previous.pid)) {
          // A version that locked by PID only may be running on this directory: it holds no kernel lock.
          throw new StorageLockedError(
            file,
            previous.pid,
            ' (recorded by a Floe version that locked by PID only)',
          );
        }
        await f.truncate(0);
        await writeAll(f, [Buffer.from(recordText(owner, false))], 0);
        await f.datasync();
        return new LockFile(file, previous, 'kernel', fs, owner, f);
      } catch (err) {
        await f.close().catch(() => {});
        throw err;
      }
    }
    throw new StorageConfigError(
      `could not lock ${file}: it was replaced ${REPLACED_RETRIES} times while being locked ` +
        '(something keeps deleting or renaming it? LOCK must never be deleted)',
    );
  }

  /** Releases the lock: marks the record closed (fdatasynced) and closes the file (LOCK stays). Idempotent. */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    if (this.locked === undefined) return this.releasePidFile();
    try {
      // fdatasynced: after a power loss the next open does not take this for a holder that died.
      await this.locked.truncate(0);
      await writeAll(this.locked, [Buffer.from(recordText(this.owner, true))], 0);
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
          return new LockFile(file, previous, 'pid-file', fs, owner, undefined);
        } catch (err) {
          if (errCode(err) !== 'EEXIST') throw err;
        }
        const holder = await readRecord(fs, file);
        if (holder === undefined) continue; // vanished between link and read: try again
        if (owner.isAlive(holder.pid))
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
        if (moved !== undefined && moved.pid !== holder.pid && owner.isAlive(moved.pid)) {
          // Another process took over and created a fresh lock in between: give it back.
          await fs.link(aside, file).catch(() => {});
          await removeIfExists(fs, aside);
          throw new StorageLockedError(file, moved.pid, describeHolder(moved), 'pid-file');
        }
        await removeIfExists(fs, aside);
        previous = { ...holder, closed: false };
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
    if ((await readRecord(this.fs, this.file))?.pid === this.owner.pid) {
      await removeIfExists(this.fs, this.file);
      await this.fs.syncDir(path.dirname(this.file));
    }
  }
}

/** The record: the PID on the first line (a PID-only reader parses just that), then key=value lines. */
function recordText(owner: LockOwner, closed: boolean): string {
  let s = `${owner.pid}\nlock=kernel\n`;
  if (owner.host !== undefined) s += `host=${owner.host.replace(/\s/g, '_')}\n`;
  if (owner.startedAt !== undefined) s += `started=${owner.startedAt}\n`;
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
