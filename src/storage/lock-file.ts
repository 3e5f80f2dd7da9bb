// A lock file, so that two processes never append to the same WAL.
//
// Creation is atomic with its content: the record is written to a private temp file, which is then
// hard-linked to LOCK (link fails if LOCK exists), so no one ever reads a half-written lock.
// A lock whose holder is not alive is stale (its owner crashed, or the machine rebooted since) and
// is taken over: it is renamed away first, and if what was renamed turns out to be a live lock
// (another process took over in between), it is put back and we give up.
//
// What LOCK holds (docs/storage.md, "The lock"): the holder's PID on the first line (all an older
// build reads), then `boot <boot ID>` and `start <start time>` where known. A PID alone cannot tell
// the holder from a later process with the same number: a container restarted after a kill runs
// as PID 1 again, a rebooted host gives a systemd unit the PID it had before, and after a reboot
// any process may hold the recorded PID. Within one process, the PID cannot tell a second open of
// the same directory from a LOCK left by an earlier process that had our PID: an in-process
// registry of the locks this process holds does (`HeldLocks`).
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { pidExists, processStartTicks, readBootId } from '../net/process-identity.js';
import { StorageConfigError, StorageLockedError } from './errors.js';
import { nodeFs, type StorageFs } from './file-system.js';
import { errCode, removeIfExists, writeAll } from './fs-util.js';

export const LOCK_FILE_NAME = 'LOCK';

/**
 * Who takes the lock, and how to tell whether a recorded holder still runs. The real one is this
 * process (`processLockOwner`); a simulation that crashes and restarts nodes inside one process
 * gives each incarnation its own number and leaves out the optional members (its LOCK then holds
 * the PID only, and `isAlive` decides alone).
 */
export interface LockOwner {
  /** Positive integer written into the lock file. */
  readonly pid: number;
  /** Whether a process with this PID exists now. */
  isAlive(pid: number): boolean;
  /** This machine's boot ID, written into the lock; a holder recorded under another boot ID is dead. */
  readonly bootId?: string | undefined;
  /**
   * Start time of a process (field 22 of `/proc/<pid>/stat`), null where unknown; the owner's own is written into the
   * lock, and a holder whose PID now has another start time is dead (the PID was reused).
   */
  startTicks?(pid: number): string | null;
  /**
   * The lock files this owner holds, or is taking, now. With it, a lock naming the owner's own PID is live only if
   * listed here: otherwise it was left by an earlier process that had the same PID. Without it, `isAlive` decides for
   * the owner's own PID too (a simulation never gives two incarnations one PID).
   */
  readonly held?: HeldLocks;
}

/** The lock files one process holds or is taking, per file system, by canonical path. */
export class HeldLocks {
  private readonly byFs = new WeakMap<StorageFs, Set<string>>();

  /** Records `file` as held; false if it already was (held, or being taken, by this process). */
  claim(fs: StorageFs, file: string): boolean {
    let set = this.byFs.get(fs);
    if (!set) {
      set = new Set();
      this.byFs.set(fs, set);
    }
    if (set.has(file)) return false;
    set.add(file);
    return true;
  }

  has(fs: StorageFs, file: string): boolean {
    return this.byFs.get(fs)?.has(file) ?? false;
  }

  drop(fs: StorageFs, file: string): void {
    this.byFs.get(fs)?.delete(file);
  }
}

/** This process: its PID, the machine's boot ID, its start time, and the locks it holds. */
export const processLockOwner: LockOwner = {
  pid: process.pid,
  isAlive,
  bootId: readBootId(),
  startTicks: processStartTicks,
  held: new HeldLocks(),
};

/** What a lock file says about its holder (pid 0: unreadable, names no live holder). */
export interface LockRecord {
  pid: number;
  bootId?: string | undefined;
  startTicks?: string | undefined;
}

export class LockFile {
  private released = false;
  private constructor(
    readonly file: string,
    /** The dead owner whose stale lock was taken over, if any. */
    readonly tookOverFrom: number | undefined,
    /** Why that lock was stale, when it was not simply that its PID runs no process. */
    readonly staleBecause: string | undefined,
    private readonly record: LockRecord,
    private readonly heldKey: string | undefined,
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
    let heldKey: string | undefined;
    if (owner.held) {
      // A second open of a directory this process holds (or is taking): refused before LOCK is read.
      heldKey = path.join(await canonicalDir(fs, dir), LOCK_FILE_NAME);
      if (!owner.held.claim(fs, heldKey)) throw new StorageLockedError(file, owner.pid);
    }
    try {
      const me = ownRecord(owner);
      const lock = await take(dir, file, me, fs, owner);
      return new LockFile(file, lock.tookOverFrom, lock.staleBecause, me, heldKey, fs, owner);
    } catch (err) {
      if (heldKey !== undefined) owner.held?.drop(fs, heldKey);
      throw err;
    }
  }

  /** Removes the lock file (only if it is still ours). */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    try {
      const now = await readRecord(this.fs, this.file);
      if (now !== undefined && sameRecord(now, this.record)) {
        await removeIfExists(this.fs, this.file);
        await this.fs.syncDir(path.dirname(this.file));
      }
    } finally {
      if (this.heldKey !== undefined) this.owner.held?.drop(this.fs, this.heldKey);
    }
  }
}

async function take(
  dir: string,
  file: string,
  me: LockRecord,
  fs: StorageFs,
  owner: LockOwner,
): Promise<{ tookOverFrom: number | undefined; staleBecause: string | undefined }> {
  const tmp = path.join(dir, `${LOCK_FILE_NAME}.${owner.pid}.tmp`);
  try {
    const fh = await fs.open(tmp, 'w');
    try {
      await writeAll(fh, [Buffer.from(formatRecord(me))], 0);
    } finally {
      await fh.close();
    }
  } catch (err) {
    throw new StorageConfigError(`data dir ${dir} is not writable: ${(err as Error).message}`, {
      cause: err,
    });
  }
  let tookOverFrom: number | undefined;
  let staleBecause: string | undefined;
  try {
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        await fs.link(tmp, file);
        await fs.syncDir(dir);
        return { tookOverFrom, staleBecause };
      } catch (err) {
        if (errCode(err) !== 'EEXIST') throw err;
      }
      const holder = await readRecord(fs, file);
      if (holder === undefined) continue; // vanished between link and read: try again
      const why = staleReason(owner, holder);
      if (why === undefined) throw new StorageLockedError(file, holder.pid);
      // Stale: move it aside, then check that what we moved is the stale lock we looked at.
      const aside = path.join(dir, `${LOCK_FILE_NAME}.stale.${owner.pid}`);
      try {
        await fs.rename(file, aside);
      } catch (err) {
        if (errCode(err) === 'ENOENT') continue;
        throw err;
      }
      const moved = await readRecord(fs, aside);
      if (moved !== undefined && !sameRecord(moved, holder) && staleReason(owner, moved) === undefined) {
        // Another process took over and created a fresh lock in between: give it back.
        await fs.link(aside, file).catch(() => {});
        await removeIfExists(fs, aside);
        throw new StorageLockedError(file, moved.pid);
      }
      await removeIfExists(fs, aside);
      tookOverFrom = holder.pid;
      // The two reasons a PID-only lock could already have: the warning stays as it was for them.
      staleBecause = why === NOT_RUNNING || why === UNREADABLE ? undefined : why;
    }
    throw new StorageConfigError(
      `could not take the lock ${file}: it keeps changing (another process starting?)`,
    );
  } finally {
    await removeIfExists(fs, tmp);
  }
}

const NOT_RUNNING = 'no process has its PID';
const UNREADABLE = 'unreadable lock file';

/**
 * Why the recorded holder is dead, or undefined if it may be alive. `owner.held` was checked when
 * the acquisition began: no lock file of this process is this one.
 */
function staleReason(owner: LockOwner, h: LockRecord): string | undefined {
  if (h.pid <= 0) return UNREADABLE;
  if (owner.bootId !== undefined && h.bootId !== undefined && h.bootId !== owner.bootId) {
    return 'it was taken before this machine last booted';
  }
  if (h.pid === owner.pid && owner.held) {
    return "its PID is this process's, which does not hold it: an earlier process with this PID left it";
  }
  if (!owner.isAlive(h.pid)) return NOT_RUNNING;
  if (h.startTicks !== undefined) {
    const now = owner.startTicks?.(h.pid);
    if (now !== undefined && now !== null && now !== h.startTicks) {
      return 'its PID now belongs to a process started later';
    }
  }
  return undefined;
}

function ownRecord(owner: LockOwner): LockRecord {
  const startTicks = owner.startTicks?.(owner.pid) ?? undefined;
  return { pid: owner.pid, bootId: owner.bootId, startTicks };
}

/** `<pid>\n`, then `boot <id>\n` and `start <ticks>\n` where known. */
function formatRecord(r: LockRecord): string {
  let text = `${r.pid}\n`;
  if (r.bootId !== undefined) text += `boot ${r.bootId}\n`;
  if (r.startTicks !== undefined) text += `start ${r.startTicks}\n`;
  return text;
}

function sameRecord(a: LockRecord, b: LockRecord): boolean {
  return a.pid === b.pid && a.bootId === b.bootId && a.startTicks === b.startTicks;
}

/** The record, or undefined if there is no lock file. Reads the PID-only files of older builds too. */
async function readRecord(fs: StorageFs, file: string): Promise<LockRecord | undefined> {
  let text: string;
  try {
    text = (await fs.readFile(file)).toString('utf8');
  } catch (err) {
    if (errCode(err) === 'ENOENT') return undefined;
    throw err;
  }
  return parseRecord(text);
}

/** Parses a lock file's content; unparsable content cannot name a live owner (pid 0). */
export function parseRecord(text: string): LockRecord {
  const [first = '', ...rest] = text.trim().split('\n');
  const pid = Number.parseInt(first, 10);
  const r: LockRecord = { pid: Number.isSafeInteger(pid) && pid > 0 ? pid : 0 };
  for (const line of rest) {
    const m = /^(boot|start) (\S+)$/.exec(line.trim());
    if (m?.[1] === 'boot') r.bootId = m[2];
    else if (m?.[1] === 'start') r.startTicks = m[2];
  }
  return r;
}

/** `dir` with symbolic links and `..` resolved on the real disk (made absolute on another file system). */
async function canonicalDir(fs: StorageFs, dir: string): Promise<string> {
  if (fs !== nodeFs) return path.resolve(dir);
  try {
    return await fsp.realpath(dir);
  } catch {
    return path.resolve(dir);
  }
}

/**
 * True when a process with this PID exists (EPERM: it exists but belongs to another user). This
 * process's own PID exists too: whether a lock naming it is held is `HeldLocks`' question.
 */
export function isAlive(pid: number): boolean {
  return pidExists(pid);
}
