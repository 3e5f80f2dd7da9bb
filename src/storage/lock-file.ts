// A PID lock file, so that two processes never append to the same WAL.
//
// Creation is atomic with its content: the PID is written to a private temp file, which is then
// hard-linked to LOCK (link fails if LOCK exists), so no one ever reads a half-written lock.
// A lock whose PID is not alive is stale (its owner crashed) and is taken over: it is renamed
// away first, and if what was renamed turns out to be a live lock (another process took over in
// between), it is put back and we give up.
import * as path from 'node:path';
import { StorageConfigError, StorageLockedError } from './errors.js';
import { nodeFs, type StorageFs } from './file-system.js';
import { errCode, removeIfExists, writeAll } from './fs-util.js';

export const LOCK_FILE_NAME = 'LOCK';

/**
 * Who takes the lock, and how to tell whether a recorded owner still runs. The real one is this
 * process and `kill(pid, 0)`; a simulation that crashes and restarts nodes inside one process
 * gives each incarnation its own number.
 */
export interface LockOwner {
  /** Positive integer written into the lock file. */
  readonly pid: number;
  isAlive(pid: number): boolean;
}

export const processLockOwner: LockOwner = { pid: process.pid, isAlive };

export class LockFile {
  private released = false;
  private constructor(
    readonly file: string,
    /** The dead owner whose stale lock was taken over, if any. */
    readonly tookOverFrom: number | undefined,
    private readonly fs: StorageFs,
    private readonly owner: LockOwner,
  ) {}

  /** Takes the lock on `dir` (which must exist). Throws StorageLockedError if a live process holds it. */
  static async acquire(
    dir: string,
    fs: StorageFs = nodeFs,
    owner: LockOwner = processLockOwner,
  ): Promise<LockFile> {
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
    let tookOverFrom: number | undefined;
    try {
      for (let attempt = 0; attempt < 5; attempt++) {
        try {
          await fs.link(tmp, file);
          await fs.syncDir(dir);
          return new LockFile(file, tookOverFrom, fs, owner);
        } catch (err) {
          if (errCode(err) !== 'EEXIST') throw err;
        }
        const holder = await readPid(fs, file);
        if (holder === undefined) continue; // vanished between link and read: try again
        if (owner.isAlive(holder)) throw new StorageLockedError(file, holder);
        // Stale: move it aside, then check that what we moved is the stale lock we looked at.
        const aside = path.join(dir, `${LOCK_FILE_NAME}.stale.${owner.pid}`);
        try {
          await fs.rename(file, aside);
        } catch (err) {
          if (errCode(err) === 'ENOENT') continue;
          throw err;
        }
        const moved = await readPid(fs, aside);
        if (moved !== undefined && moved !== holder && owner.isAlive(moved)) {
          // Another process took over and created a fresh lock in between: give it back.
          await fs.link(aside, file).catch(() => {});
          await removeIfExists(fs, aside);
          throw new StorageLockedError(file, moved);
        }
        await removeIfExists(fs, aside);
        tookOverFrom = holder;
      }
      throw new StorageConfigError(
        `could not take the lock ${file}: it keeps changing (another process starting?)`,
      );
    } finally {
      await removeIfExists(fs, tmp);
    }
  }

  /** Removes the lock file (only if it is still ours). */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    if ((await readPid(this.fs, this.file)) === this.owner.pid) {
      await removeIfExists(this.fs, this.file);
      await this.fs.syncDir(path.dirname(this.file));
    }
  }
}

async function readPid(fs: StorageFs, file: string): Promise<number | undefined> {
  let text: string;
  try {
    text = (await fs.readFile(file)).toString('utf8');
  } catch (err) {
    if (errCode(err) === 'ENOENT') return undefined;
    throw err;
  }
  const pid = Number.parseInt(text.trim(), 10);
  // Unparsable content cannot name a live owner: treat it as stale (pid 0 is never alive here).
  return Number.isSafeInteger(pid) && pid > 0 ? pid : 0;
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
