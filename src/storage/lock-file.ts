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
//
// PIDs, `kill(pid, 0)` and start times mean something only within one PID namespace: two containers
// that share a data volume both run as PID 1. So LOCK also records the holder's PID namespace
// (`pidns pid:[…]`) and a per-lock nonce, and a real holder touches LOCK's mtime every few seconds
// (its heartbeat), checking each time that LOCK still names it (`nonce`): if not, another process
// took the directory over and the storage fail-stops. A holder in another PID namespace of this
// boot is alive while its heartbeat is fresh, and dead once it is older than the stale bound.
import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { pidExists, processStartTicks, readBootId, readPidNamespace } from '../net/process-identity.js';
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
  /**
   * The owner's PID namespace (`/proc/self/ns/pid`, e.g. `pid:[4026531836]`), written into the lock. The PID rules
   * apply to a holder only when its recorded namespace is this one, or either is unknown.
   */
  readonly pidNs?: string | undefined;
  /**
   * Real processes only (`processLockOwner`): the heartbeat that lets a holder in another PID namespace be judged.
   * Without it (a simulation) no timer runs and no nonce is written.
   */
  readonly heartbeat?: LockHeartbeat;
}

/** The heartbeat of a lock held by a real process, and how a holder in another PID namespace is judged by it. */
export interface LockHeartbeat {
  /** How often the holder touches LOCK's mtime and checks that LOCK still names it. */
  readonly everyMs: number;
  /** A holder in another PID namespace of this boot is dead once its heartbeat (LOCK's mtime) is older than this. */
  readonly staleMs: number;
  /** How long `acquire` waits for such a holder's heartbeat to go stale before it throws StorageLockedError. */
  readonly waitMs: number;
  /** Wall clock, ms since the epoch: what LOCK's mtime is set to and compared with. */
  wallMs(): number;
  /** Calls `beat` every `ms` until the returned function is called (real: an unref'd setInterval). */
  every(ms: number, beat: () => Promise<void>): () => void;
  sleep(ms: number): Promise<void>;
  /** A new nonce for each lock taken: tells it apart from a later lock of the same PID. */
  nonce(): string;
}

/** Defaults of the real heartbeat (docs/storage.md, "The lock"). */
export const LOCK_HEARTBEAT_MS = 2_000;
export const LOCK_STALE_MS = 15_000;
export const LOCK_WAIT_MS = LOCK_STALE_MS + LOCK_HEARTBEAT_MS;

const realHeartbeat: LockHeartbeat = {
  everyMs: LOCK_HEARTBEAT_MS,
  staleMs: LOCK_STALE_MS,
  waitMs: LOCK_WAIT_MS,
  wallMs: () => Date.now(),
  every(ms, beat) {
    const t = setInterval(() => void beat(), ms);
    t.unref();
    return () => clearInterval(t);
  },
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  nonce: () => randomBytes(8).toString('hex'),
};

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

/** This process: its PID, the machine's boot ID, its start time and PID namespace, the locks it holds, a heartbeat. */
export const processLockOwner: LockOwner = {
  pid: process.pid,
  isAlive,
  bootId: readBootId(),
  startTicks: processStartTicks,
  held: new HeldLocks(),
  pidNs: readPidNamespace(),
  heartbeat: realHeartbeat,
};

/** What a lock file says about its holder (pid 0: unreadable, names no live holder). */
export interface LockRecord {
  pid: number;
  bootId?: string | undefined;
  startTicks?: string | undefined;
  pidNs?: string | undefined;
  nonce?: string | undefined;
}

/** A live holder in another PID namespace, judged by its heartbeat (thrown inside `acquire`, which may wait). */
class FreshHeartbeat extends Error {
  constructor(
    readonly holder: LockRecord,
    readonly ageMs: number | undefined,
  ) {
    super('fresh heartbeat');
  }
}

export class LockFile {
  private released = false;
  private stopBeat: (() => void) | undefined;
  private beating = false;
  private lostBecause: string | undefined;
  private onLostFn: ((why: string) => void) | undefined;
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
      const me = ownRecord(owner, fs);
      const hb = owner.heartbeat;
      const started = hb?.wallMs() ?? 0;
      for (;;) {
        try {
          const taken = await take(dir, file, me, fs, owner);
          const lock = new LockFile(file, taken.tookOverFrom, taken.staleBecause, me, heldKey, fs, owner);
          await lock.startHeartbeat();
          return lock;
        } catch (err) {
          if (!(err instanceof FreshHeartbeat)) throw err;
          const waited = hb ? Math.max(0, hb.wallMs() - started) : 0;
          if (!hb || waited >= hb.waitMs) {
            throw new StorageLockedError(file, err.holder.pid, otherNamespaceDetail(owner, err, waited));
          }
          // Until it would turn stale (at most one heartbeat period), within the wait.
          const untilStale = err.ageMs === undefined ? hb.everyMs : hb.staleMs - err.ageMs + 1;
          await hb.sleep(Math.max(1, Math.min(untilStale, hb.everyMs, hb.waitMs - waited)));
        }
      }
    } catch (err) {
      if (heldKey !== undefined) owner.held?.drop(fs, heldKey);
      throw err;
    }
  }

  /** Why this process no longer holds the lock (seen at a heartbeat), or undefined. */
  get lost(): string | undefined {
    return this.lostBecause;
  }

  /** Calls `fn` once if a heartbeat finds that LOCK no longer names this lock (at once if it already did). */
  onLost(fn: (why: string) => void): void {
    this.onLostFn = fn;
    if (this.lostBecause !== undefined) fn(this.lostBecause);
  }

  /**
   * One heartbeat: checks that LOCK still names this lock (PID and nonce), then touches its mtime. Run every
   * `heartbeat.everyMs` by the owner's timer; exposed for tests.
   */
  async beat(): Promise<void> {
    const hb = this.owner.heartbeat;
    if (!hb || this.released || this.lostBecause !== undefined || this.beating) return;
    this.beating = true;
    try {
      let now: LockRecord | undefined;
      try {
        now = await readRecord(this.fs, this.file);
      } catch (err) {
        // Whether it is still ours cannot be told: stop rather than risk two writers.
        if (!this.released) this.lose(`could not be read at a heartbeat (${(err as Error).message})`);
        return;
      }
      if (this.released) return;
      if (now === undefined) return this.lose('was removed by another process');
      if (!sameRecord(now, this.record)) {
        return this.lose(
          `now names process ${now.pid}${now.pidNs ? ` in PID namespace ${now.pidNs}` : ''}: another process took it over`,
        );
      }
      try {
        await this.fs.touch?.(this.file, hb.wallMs());
      } catch {
        // A failed touch makes this holder look older, never younger; the next beat tries again.
      }
    } finally {
      this.beating = false;
    }
  }

  private async startHeartbeat(): Promise<void> {
    const hb = this.owner.heartbeat;
    if (!hb || this.record.nonce === undefined) return;
    // The first heartbeat, on the owner's clock.
    await this.fs.touch?.(this.file, hb.wallMs()).catch(() => {});
    this.stopBeat = hb.every(hb.everyMs, () => this.beat());
  }

  private lose(why: string): void {
    this.lostBecause = `the lock ${this.file} ${why}`;
    this.stopBeat?.();
    this.stopBeat = undefined;
    this.onLostFn?.(this.lostBecause);
  }

  /** Removes the lock file (only if it is still ours). */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    this.stopBeat?.();
    this.stopBeat = undefined;
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
      const age = await heartbeatAge(fs, file, owner, holder);
      if (age === null) continue; // vanished between read and stat
      const why = staleReason(owner, holder, age);
      if (why === undefined) {
        if (inOtherNamespace(owner, holder)) throw new FreshHeartbeat(holder, age);
        throw new StorageLockedError(file, holder.pid);
      }
      // Stale: move it aside, then check that what we moved is the stale lock we looked at.
      const aside = path.join(dir, `${LOCK_FILE_NAME}.stale.${owner.pid}`);
      try {
        await fs.rename(file, aside);
      } catch (err) {
        if (errCode(err) === 'ENOENT') continue;
        throw err;
      }
      const moved = await readRecord(fs, aside);
      const movedAge = moved === undefined ? undefined : await heartbeatAge(fs, aside, owner, moved);
      if (
        moved !== undefined &&
        !sameRecord(moved, holder) &&
        staleReason(owner, moved, movedAge ?? undefined) === undefined
      ) {
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
 * the acquisition began: no lock file of this process is this one. `ageMs`: how old the holder's
 * heartbeat is, for a holder in another PID namespace (undefined: unknown, counts as fresh).
 */
function staleReason(owner: LockOwner, h: LockRecord, ageMs?: number): string | undefined {
  if (h.pid <= 0) return UNREADABLE;
  if (owner.bootId !== undefined && h.bootId !== undefined && h.bootId !== owner.bootId) {
    return 'it was taken before this machine last booted';
  }
  if (inOtherNamespace(owner, h)) {
    // Its PID, and whether it runs, cannot be checked from here: only its heartbeat can.
    const staleMs = owner.heartbeat?.staleMs;
    if (staleMs !== undefined && ageMs !== undefined && ageMs > staleMs) {
      return `it was taken in another PID namespace (${h.pidNs}) and its heartbeat is ${seconds(ageMs)} old, stale after ${seconds(staleMs)}`;
    }
    return undefined;
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

/** True when both PID namespaces are known and differ: the holder's PID means nothing here. */
function inOtherNamespace(owner: LockOwner, h: LockRecord): boolean {
  return owner.pidNs !== undefined && h.pidNs !== undefined && h.pidNs !== owner.pidNs;
}

/**
 * How old the heartbeat (mtime) of lock file `file` is, for a holder in another PID namespace: undefined when not
 * needed or unknown (no mtime, no clock), null if the file is gone.
 */
async function heartbeatAge(
  fs: StorageFs,
  file: string,
  owner: LockOwner,
  h: LockRecord,
): Promise<number | undefined | null> {
  if (!inOtherNamespace(owner, h) || !owner.heartbeat) return undefined;
  let mtimeMs: number | undefined;
  try {
    mtimeMs = (await fs.stat(file)).mtimeMs;
  } catch (err) {
    if (errCode(err) === 'ENOENT') return null;
    throw err;
  }
  if (mtimeMs === undefined) return undefined;
  // An mtime in the future (a clock stepped back) counts as fresh.
  return Math.max(0, owner.heartbeat.wallMs() - mtimeMs);
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** The end of StorageLockedError's message for a holder in another PID namespace whose heartbeat stayed fresh. */
function otherNamespaceDetail(owner: LockOwner, e: FreshHeartbeat, waitedMs: number): string {
  const hb = owner.heartbeat;
  const age = e.ageMs === undefined ? 'an unknown age (the file system gives no mtime)' : seconds(e.ageMs);
  return (
    `in another PID namespace (${e.holder.pidNs}; this process: ${owner.pidNs}), whose heartbeat is ${age} old ` +
    `(taken over once older than ${hb ? seconds(hb.staleMs) : '?'}; waited ${seconds(waitedMs)}). ` +
    'Two containers share this data directory? Only one may use it; a supervisor retrying after the holder ' +
    'died succeeds once its heartbeat is stale'
  );
}

/**
 * The record this owner writes. The PID namespace and a nonce only with a heartbeat on a file system that can touch
 * mtimes: a holder recorded in a namespace is judged by its heartbeat from other namespaces, so it must beat.
 */
function ownRecord(owner: LockOwner, fs: StorageFs): LockRecord {
  const startTicks = owner.startTicks?.(owner.pid) ?? undefined;
  const beats = owner.heartbeat !== undefined && fs.touch !== undefined;
  return {
    pid: owner.pid,
    bootId: owner.bootId,
    startTicks,
    pidNs: beats ? owner.pidNs : undefined,
    nonce: beats ? owner.heartbeat?.nonce() : undefined,
  };
}

/** `<pid>\n`, then `boot <id>\n`, `start <ticks>\n`, `pidns <ns>\n` and `nonce <hex>\n` where known. */
function formatRecord(r: LockRecord): string {
  let text = `${r.pid}\n`;
  if (r.bootId !== undefined) text += `boot ${r.bootId}\n`;
  if (r.startTicks !== undefined) text += `start ${r.startTicks}\n`;
  if (r.pidNs !== undefined) text += `pidns ${r.pidNs}\n`;
  if (r.nonce !== undefined) text += `nonce ${r.nonce}\n`;
  return text;
}

function sameRecord(a: LockRecord, b: LockRecord): boolean {
  return (
    a.pid === b.pid &&
    a.bootId === b.bootId &&
    a.startTicks === b.startTicks &&
    a.pidNs === b.pidNs &&
    a.nonce === b.nonce
  );
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
    const m = /^(boot|start|pidns|nonce) (\S+)$/.exec(line.trim());
    if (m?.[1] === 'boot') r.bootId = m[2];
    else if (m?.[1] === 'start') r.startTicks = m[2];
    else if (m?.[1] === 'pidns') r.pidNs = m[2];
    else if (m?.[1] === 'nonce') r.nonce = m[2];
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
