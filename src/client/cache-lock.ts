/**
 * An exclusive lock on a lease cache file (`<cachePath>.lock`), held by one process for as long as it uses the cached
 * lease. Node has no flock(2), and the SDK (embedded in users' apps) takes no native module for one (the server's
 * data directory does: src/storage/lock-file.ts), so this is a PID lock file (see docs/client.md, "The cache lock"):
 *
 * - **Taking it** is atomic with its content: the record is written to a private temporary file, fsynced, then
 *   hard-linked to the lock path (`link` fails if the lock exists, like O_EXCL), and the directory is fsynced.
 * - **Liveness of a holder** on this machine, in this PID namespace (same host name, boot ID and
 *   `/proc/self/ns/pid`): `process.kill(pid, 0)` (EPERM counts as alive) and, on Linux, the process's start time from
 *   `/proc/<pid>/stat`, so that a reused PID is not mistaken for the holder.
 * - **A holder on this host name but another boot ID** is dead (the machine rebooted since it took the lock).
 * - **A holder that cannot be checked** (another host on a shared file system, another PID namespace, e.g. another
 *   container, or a machine without /proc) counts as alive while its heartbeat is fresh: the holder touches the lock
 *   file's mtime every time it writes the cache (every acknowledged renewal). It counts as dead once the heartbeat is
 *   older than max(2 x TTL, TTL + 10 s): by then its lease deadline (at most one TTL after its last acknowledged
 *   renewal, which precedes the heartbeat) has passed. This assumes wall clocks that agree within 10 s.
 * - **Taking over a dead holder's lock**: it is re-read just before it is renamed aside, and the renamed file is
 *   checked; if it turns out to be another process's fresh lock it is put back and the lock counts as held.
 * - **The holder re-checks** that the lock still names it before every cache write (and so before every renewal
 *   moves its deadline): a process whose lock was taken over ends its lease (`cache_lock_lost`).
 * - **Released** when the lease ends (release or loss), and on process exit (`exit` event; a kill leaves a stale
 *   lock that the next process takes over after the liveness check).
 */
import { dirname } from 'node:path';
import { bugOn } from '../testing/bug-switches.js';
import { type CacheFs, type CacheHost, nodeCacheFs, nodeCacheHost } from './cache-fs.js';
import { CacheLockedError } from './errors.js';

/** What a lock file says about its holder. */
export interface CacheLockRecord {
  pid: number;
  /** Unique per lock taken: tells this lock apart from a later one by the same PID. */
  nonce: string;
  host: string;
  bootId: string | null;
  /** `/proc/self/ns/pid` of the holder (`pid:[4026531836]`), null where unknown. */
  pidNs: string | null;
  /** Field 22 of `/proc/<pid>/stat` (start time in clock ticks since boot), null where unknown. */
  startTicks: string | null;
  /** TTL of the holder's lease: sets how old a heartbeat must be before an unverifiable holder counts as dead. */
  ttlMs: number;
}

export interface CacheLockOptions {
  /** How long to wait for a live holder to let go before throwing CacheLockedError. */
  waitMs: number;
  ttlMs: number;
  bootId: string | undefined;
  mono: () => number;
  sleep: (ms: number) => Promise<void>;
  /** The file system and process seams (default: the real ones). */
  fs?: CacheFs;
  host?: CacheHost;
}

/** The seams a lock works through. */
interface Env {
  fs: CacheFs;
  host: CacheHost;
}

/** The lock file of a cache path. */
export const lockPathOf = (cachePath: string): string => `${cachePath}.lock`;

export class CacheLock {
  private released = false;
  private cancelExitHook: (() => void) | undefined;

  /** @internal Use `CacheLock.acquire`. */
  constructor(
    readonly path: string,
    readonly record: CacheLockRecord,
    /** The dead holder whose lock was taken over, if any. */
    readonly tookOverFrom: number | undefined,
    private readonly env: Env = { fs: nodeCacheFs, host: nodeCacheHost },
  ) {}

  /**
   * Takes the lock of `cachePath`, waiting up to `waitMs` for a live holder; then throws CacheLockedError naming the
   * path and the holder's PID.
   */
  static async acquire(cachePath: string, o: CacheLockOptions): Promise<CacheLock> {
    const path = lockPathOf(cachePath);
    const env: Env = { fs: o.fs ?? nodeCacheFs, host: o.host ?? nodeCacheHost };
    const started = o.mono();
    const me = ownRecord(env.host, o.bootId, o.ttlMs);
    for (;;) {
      const r = tryTake(env, path, me, o.bootId);
      if (r instanceof CacheLock) {
        r.cancelExitHook = env.host.onExit(() => r.release());
        return r;
      }
      const waited = o.mono() - started;
      if (waited >= o.waitMs) throw new CacheLockedError(cachePath, path, r.holder.pid, r.why, waited);
      await o.sleep(Math.min(100, o.waitMs - waited));
    }
  }

  /**
   * True when the lock file names another lock (another process took it over). A missing lock file is not
   * another holder: this process may still write the cache it used (e.g. its release tombstone).
   */
  get heldByOther(): boolean {
    if (this.released) return false;
    const r = readRecord(this.env, this.path);
    return r !== undefined && r.nonce !== this.record.nonce;
  }

  /**
   * False once this lock was let go, or when the lock file names another lock: another process may own the cache
   * then, so nothing of this lock's lease may write or remove it (review of 47f2aac, hole B).
   */
  get mayWrite(): boolean {
    return !this.released && !this.heldByOther;
  }

  /** True while the lock file still names this lock. */
  get owned(): boolean {
    return !this.released && readRecord(this.env, this.path)?.nonce === this.record.nonce;
  }

  /**
   * Checks that the lock is still ours and refreshes its heartbeat (mtime). Throws when another process has taken it
   * over (the caller must stop using the cache and the lease).
   */
  refresh(): void {
    if (!this.owned) {
      throw new Error(
        `the lock ${this.path} no longer names this process (pid ${this.env.host.pid}): it was taken over`,
      );
    }
    try {
      this.env.fs.touch(this.path, this.env.host.wallMs());
    } catch {
      // The heartbeat matters only to holders that cannot check our PID; a failed touch makes us look older, not younger.
    }
  }

  /** Removes the lock file if it is still ours. Idempotent; never throws. */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.cancelExitHook?.();
    try {
      const { fs } = this.env;
      if (readRecord(this.env, this.path)?.nonce === this.record.nonce) {
        fs.remove(this.path);
        fs.syncDir(dirname(this.path));
      }
    } catch {
      // Best effort: a lock left behind names a dead PID and is taken over.
    }
  }
}

function tryTake(
  env: Env,
  path: string,
  me: CacheLockRecord,
  bootId: string | undefined,
): CacheLock | { holder: CacheLockRecord; why: string } {
  const { fs } = env;
  const tmp = `${path}.${me.pid}.${me.nonce}.tmp`;
  fs.writeFile(tmp, `${JSON.stringify(me)}\n`, true);
  let tookOverFrom: number | undefined;
  try {
    for (let attempt = 0; attempt < 8; attempt++) {
      try {
        fs.link(tmp, path);
        try {
          fs.syncDir(dirname(path));
        } catch (err) {
          // Not durable (review finding F3): a lock left behind would name this live process for its lifetime. Only
          // while it is still ours: another process may have taken the path over since (its lock is not ours to remove).
          if (readRecord(env, path)?.nonce === me.nonce) fs.remove(path);
          throw err;
        }
        return new CacheLock(path, me, tookOverFrom, env);
      } catch (err) {
        if (code(err) !== 'EEXIST') throw err;
      }
      const seen = readHolder(env, path);
      if (seen === undefined) continue; // vanished between link and read
      const verdict = bugOn('client-no-cache-lock')
        ? { alive: false, why: 'bug switch' }
        : liveness(env.host, seen.record, seen.mtimeMs, bootId);
      if (verdict.alive) return { holder: seen.record, why: verdict.why };
      // Dead: move it aside, unless it changed since we judged it.
      if (readRecord(env, path)?.nonce !== seen.record.nonce) continue;
      const aside = `${path}.stale.${me.nonce}`;
      try {
        fs.rename(path, aside);
      } catch (err) {
        if (code(err) === 'ENOENT') continue;
        throw err;
      }
      const moved = readRecord(env, aside);
      if (moved !== undefined && moved.nonce !== seen.record.nonce) {
        // Another process took over in between and we moved its fresh lock: give it back.
        try {
          fs.link(aside, path);
        } catch {
          // A third process holds the path now; the one we moved finds out at its next refresh().
        }
        fs.remove(aside);
        return { holder: moved, why: 'it took the lock over from a dead process just now' };
      }
      fs.remove(aside);
      tookOverFrom = seen.record.pid;
    }
    throw new Error(`could not take the lock ${path}: it keeps changing (other processes starting at once?)`);
  } finally {
    fs.remove(tmp);
  }
}

/** Whether the holder may be alive, and in words why. */
function liveness(
  host: CacheHost,
  h: CacheLockRecord,
  mtimeMs: number,
  bootId: string | undefined,
): { alive: boolean; why: string } {
  if (h.pid === 0) return { alive: false, why: 'unreadable lock file' };
  // Same host, another boot: the machine restarted since the lock was taken, so its holder is gone.
  if (h.host === host.hostname && h.bootId !== null && bootId !== undefined && h.bootId !== bootId) {
    return { alive: false, why: 'this machine rebooted since' };
  }
  const pidNs = host.pidNs;
  const verifiable =
    h.host === host.hostname &&
    h.bootId !== null &&
    h.bootId === (bootId ?? null) &&
    h.pidNs !== null &&
    h.pidNs === pidNs;
  if (verifiable) {
    if (h.pid === host.pid) {
      // Our PID with another start time: a process before us had this PID (a container restarted as PID 1, its new
      // PID namespace given the freed namespace's number). No two live processes share a PID in one namespace: gone.
      const own = host.startTicks(host.pid);
      if (h.startTicks !== null && own !== null && own !== h.startTicks) {
        return { alive: false, why: 'an earlier process with this PID (a restarted container)' };
      }
      return { alive: true, why: 'this process holds it for another lease' };
    }
    if (!host.alive(h.pid)) return { alive: false, why: 'dead' };
    const start = host.startTicks(h.pid);
    if (h.startTicks !== null && start !== null && start !== h.startTicks) {
      return { alive: false, why: 'its PID now belongs to another process' };
    }
    return { alive: true, why: 'alive on this machine' };
  }
  const ttl = Number.isFinite(h.ttlMs) && h.ttlMs > 0 ? h.ttlMs : 3_600_000;
  const staleAfter = Math.max(2 * ttl, ttl + 10_000);
  const age = host.wallMs() - mtimeMs;
  if (age > staleAfter) return { alive: false, why: 'heartbeat stale' };
  return {
    alive: true,
    why:
      `its liveness cannot be checked from here (host ${JSON.stringify(h.host)}, another boot or PID namespace); ` +
      `its heartbeat is ${Math.round(age)} ms old and counts as stale after ${staleAfter} ms`,
  };
}

function ownRecord(host: CacheHost, bootId: string | undefined, ttlMs: number): CacheLockRecord {
  return {
    pid: host.pid,
    nonce: host.nonce(12),
    host: host.hostname,
    bootId: bootId ?? null,
    pidNs: host.pidNs,
    startTicks: host.startTicks(host.pid),
    ttlMs,
  };
}

/** A lock record for `pid` as this machine would write it (tests use it to leave a dead process's lock behind). */
export function lockRecordFor(
  pid: number,
  bootId: string | undefined,
  ttlMs: number,
  host: CacheHost = nodeCacheHost,
): CacheLockRecord {
  return { ...ownRecord(host, bootId, ttlMs), pid, startTicks: null };
}

function readHolder(env: Env, path: string): { record: CacheLockRecord; mtimeMs: number } | undefined {
  let mtimeMs: number;
  try {
    mtimeMs = env.fs.mtimeMs(path);
  } catch {
    return undefined;
  }
  const record = readRecord(env, path);
  return record === undefined ? undefined : { record, mtimeMs };
}

/** The record, or undefined if there is no file; unreadable content names no live holder (pid 0). */
function readRecord(env: Env, path: string): CacheLockRecord | undefined {
  let text: string;
  try {
    text = env.fs.readText(path);
  } catch {
    return undefined;
  }
  try {
    const r = JSON.parse(text) as Partial<CacheLockRecord>;
    if (typeof r.pid === 'number' && typeof r.nonce === 'string') {
      return {
        pid: r.pid,
        nonce: r.nonce,
        host: typeof r.host === 'string' ? r.host : '',
        bootId: typeof r.bootId === 'string' ? r.bootId : null,
        pidNs: typeof r.pidNs === 'string' ? r.pidNs : null,
        startTicks: typeof r.startTicks === 'string' ? r.startTicks : null,
        ttlMs: typeof r.ttlMs === 'number' ? r.ttlMs : 0,
      };
    }
  } catch {
    // fall through
  }
  return {
    pid: 0,
    nonce: `unreadable:${text.length}`,
    host: env.host.hostname,
    bootId: null,
    pidNs: null,
    startTicks: null,
    ttlMs: 0,
  };
}

function code(err: unknown): string | undefined {
  return (err as { code?: string } | null)?.code;
}
