// The seams of the SDK's lease cache: the file system it writes (`CacheFs`) and what it knows of the
// processes on its machine (`CacheHost`). `nodeCacheFs` and `nodeCacheHost` are the real ones; the
// full-stack simulator passes twins (the machine's MemoryFs, its virtual processes and wall clock),
// so the cache and its lock run inside the proof (docs/simulator-full.md).
//
// Calls are synchronous on purpose: a cache write sits between a renewal's answer and the moment the
// generator may use the new bound, and nothing else may run in between.
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  fsyncSync,
  linkSync,
  openSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeSync,
} from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';

/**
 * The few file operations the cache and its lock use, with Linux's durability rules: `writeSynced` makes a file's
 * content durable, a name (create, rename, link, unlink) is durable only after `syncDir` of its directory. Errors carry
 * a Node-style `code` ('ENOENT', 'EEXIST', ...).
 */
export interface CacheFs {
  /**
   * The one name of `path` that every spelling of it resolves to (symbolic links and `..` resolved): the file's real
   * path if it exists, else its directory's real path and its base name, else `path` made absolute.
   */
  canonical(path: string): string;
  /** Whether a file or directory of that name exists. */
  exists(path: string): boolean;
  /** The file's content; throws ENOENT if there is none. */
  readText(path: string): string;
  /** Creates or truncates `path` and writes `text`; with `fsync`, fdatasyncs it (not its directory). */
  writeFile(path: string, text: string, fsync: boolean): void;
  /** Atomically replaces `to` with `from`. */
  rename(from: string, to: string): void;
  /** A second name for a file; EEXIST if `newPath` exists (atomic create-if-absent). */
  link(existing: string, newPath: string): void;
  /** Removes a name; nothing happens if it does not exist. */
  remove(path: string): void;
  /** Last modification, wall-clock ms; throws ENOENT. */
  mtimeMs(path: string): number;
  /** Sets the modification time to `wallMs`. */
  touch(path: string, wallMs: number): void;
  /**
   * fsync of a directory. Throws if it fails (EIO above all): the names in it may then not survive a power loss, and
   * the caller must not act as if they would (e.g. send a release after a tombstone that may vanish, finding F3).
   * Only Windows, which has no directory fsync, lets it pass (`syncDirectory`).
   */
  syncDir(dir: string): void;
}

/** What the lock needs to know about processes on this machine, and this process's own identity. */
export interface CacheHost {
  readonly pid: number;
  readonly hostname: string;
  /** Identity of the PID namespace (`/proc/self/ns/pid`), null where unknown. */
  readonly pidNs: string | null;
  /** Start time of a process (field 22 of `/proc/<pid>/stat`), null where unknown. */
  startTicks(pid: number): string | null;
  /** Whether a process with this PID exists (EPERM counts as alive). */
  alive(pid: number): boolean;
  /** Wall clock (ms) for heartbeats and their age. */
  wallMs(): number;
  /** A fresh random token (lock nonces, temporary file names). */
  nonce(bytes: number): string;
  /** Runs `fn` when this process exits normally (a kill -9 never runs it); the returned function cancels that. */
  onExit(fn: () => void): () => void;
  /**
   * The acquire requestIds this process has in use (see `FloeClient.leaseWorker`): state of the process, shared by
   * every client in it.
   */
  readonly requestIds: Set<string>;
  /**
   * Per [incarnation, app, nodeId] (JSON): the requestId of this process's last acquire that ended with its outcome
   * unknown, and its TTL and layout fingerprint; the next acquire for that key sends it again (`FloeClient.leaseWorker`,
   * finding FS-17). State of the process, like `requestIds`: a client made anew after a failure must find it.
   */
  readonly unansweredAcquires: Map<string, UnansweredAcquire>;
}

/** An acquire whose outcome is unknown: the cluster may hold a lease under its requestId that nobody uses. */
export interface UnansweredAcquire {
  requestId: string;
  ttlMs: number;
  layout: string;
}

export const nodeCacheFs: CacheFs = {
  canonical(path) {
    try {
      return realpathSync.native(path);
    } catch {
      try {
        return join(realpathSync.native(dirname(path)), basename(path));
      } catch {
        return resolve(path);
      }
    }
  },
  exists: (path) => existsSync(path),
  readText: (path) => readFileSync(path, 'utf8'),
  writeFile(path, text, fsync) {
    const fd = openSync(path, 'w', 0o600);
    try {
      writeSync(fd, text);
      if (fsync) fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  },
  rename: (from, to) => renameSync(from, to),
  link: (existing, newPath) => linkSync(existing, newPath),
  remove: (path) => rmSync(path, { force: true }),
  mtimeMs: (path) => statSync(path).mtimeMs,
  touch(path, wallMs) {
    const t = new Date(wallMs);
    utimesSync(path, t, t);
  },
  syncDir: (dir) => syncDirectory(dir),
};

/** The system calls `syncDirectory` makes (a test fails one of them). */
export interface DirSyncCalls {
  platform: NodeJS.Platform;
  open(dir: string): number;
  fsync(fd: number): void;
  close(fd: number): void;
}

const nodeDirSyncCalls: DirSyncCalls = {
  platform: process.platform,
  open: (dir) => openSync(dir, 'r'),
  fsync: (fd) => fsyncSync(fd),
  close: (fd) => closeSync(fd),
};

/**
 * fsyncs a directory, so that the names created, renamed or removed in it survive a power loss. Every failure is
 * thrown, except on Windows, which has no directory fsync: there Node opens the directory (libuv asks for backup
 * semantics) and `FlushFileBuffers` on that read-only handle fails with EPERM (older versions failed the open with
 * EISDIR or EACCES); those three codes, and only on win32, are ignored. Before review finding F3 every error was
 * ignored, EIO from the fsync included: a release tombstone could be lost in a power cut after the release was sent.
 */
export function syncDirectory(dir: string, calls: DirSyncCalls = nodeDirSyncCalls): void {
  let fd: number | undefined;
  try {
    fd = calls.open(dir);
    calls.fsync(fd);
  } catch (err) {
    if (!(calls.platform === 'win32' && windowsNoDirSync.has((err as { code?: unknown } | null)?.code)))
      throw err;
  } finally {
    if (fd !== undefined) calls.close(fd);
  }
}

const windowsNoDirSync = new Set<unknown>(['EPERM', 'EACCES', 'EISDIR']);

const exitHooks = new Set<() => void>();
let exitHookInstalled = false;

export const nodeCacheHost: CacheHost = {
  pid: process.pid,
  hostname: hostname(),
  pidNs: (() => {
    try {
      return readlinkSync('/proc/self/ns/pid');
    } catch {
      return null;
    }
  })(),
  startTicks(pid) {
    try {
      // Our own through /proc/self: `process.pid` names another process where /proc belongs to another PID namespace.
      const stat = readFileSync(pid === process.pid ? '/proc/self/stat' : `/proc/${pid}/stat`, 'utf8');
      // Fields after the command name (which may contain spaces) start at field 3; start time is field 22.
      return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
    } catch {
      return null;
    }
  },
  alive(pid) {
    if (!Number.isSafeInteger(pid) || pid <= 0) return false;
    try {
      process.kill(pid, 0);
      return true;
    } catch (err) {
      return (err as { code?: string } | null)?.code === 'EPERM';
    }
  },
  wallMs: () => Date.now(),
  nonce: (bytes) => randomBytes(bytes).toString('hex'),
  onExit(fn) {
    if (!exitHookInstalled) {
      exitHookInstalled = true;
      process.once('exit', () => {
        for (const h of [...exitHooks]) h();
      });
    }
    exitHooks.add(fn);
    return () => exitHooks.delete(fn);
  },
  requestIds: new Set<string>(),
  unansweredAcquires: new Map<string, UnansweredAcquire>(),
};
