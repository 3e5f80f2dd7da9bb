/**
 * The audit spill: local files of CRC-framed batches (src/audit/spill-format.ts) in one directory,
 * bounded in total size, written in order and read back in order.
 *
 * - `append(lines)` (the pipeline's background path) writes one frame and resolves after fsync.
 * - `appendSync(lines)` (the overflow path called from `emit` when the memory channel is full) writes
 *   one frame with a synchronous write and schedules an fsync shortly after; it never awaits.
 * - Both refuse (return false) when the frame would take the directory over `maxBytes`: the caller
 *   counts those events as dropped and raises the alarm. Nothing is dropped here silently.
 * - Files are `audit-<12-digit sequence>.spill`; a higher sequence is newer. The file being written
 *   is never handed to a reader: `rotate()` closes it first.
 * - A file found corrupt is renamed `<name>.corrupt` and left for an operator; it no longer counts
 *   against the bound.
 */
import {
  closeSync,
  fsync,
  fsyncSync,
  openSync,
  readdirSync,
  statSync,
  unlinkSync,
  write,
  writeSync,
} from 'node:fs';
import { mkdir, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { nodeFs } from '../storage/file-system.js';
import { LockFile, processLockOwner, type UnsupportedLockPolicy } from '../storage/lock-file.js';
import { decodeFrames, encodeFrame, type SpillCorruption, type SpillFrame } from './spill-format.js';

const FILE_RE = /^audit-(\d{12})\.spill$/;

export interface SpillOptions {
  dir: string;
  /** Bound on the total size of spill files in `dir` (bytes). Default 1 GiB. */
  maxBytes?: number;
  /** Start a new file once the current one reaches this size (bytes). Default 16 MiB. */
  fileBytes?: number;
  /** Overflow writes are fsynced at most this long after they were written (ms). Default 50. */
  syncDelayMs?: number;
  /**
   * Where the directory cannot be kernel-locked (docs/storage.md, "The lock"): 'refuse' (default) or 'pid-file',
   * the PID rule.
   */
  unsupportedLock?: UnsupportedLockPolicy;
  /**
   * Take an old-format LOCK (a bare PID: an older Floe version or the PID rule) instead of refusing it; only once
   * every such process was stopped (docs/storage.md, "The lock"). Default false.
   */
  takeLegacyLock?: boolean;
  /** Lock warnings (the PID rule in use). */
  onWarning?: (message: string) => void;
}

export interface SpillFileContent {
  file: string;
  frames: SpillFrame[];
  corruption?: SpillCorruption;
}

export class SpillStore {
  readonly dir: string;
  readonly maxBytes: number;
  readonly fileBytes: number;
  private readonly syncDelayMs: number;
  private nextSeq = 1;
  /** Complete files, oldest first (names). */
  private closed: string[] = [];
  private sizes = new Map<string, number>();
  private current: { name: string; fd: number; bytes: number } | undefined;
  private total = 0;
  private syncTimer: NodeJS.Timeout | undefined;
  private dirty = false;
  private pendingWrites = 0;
  private readonly fdsToClose: number[] = [];
  private lock: LockFile | undefined;
  private readonly lockOptions: Pick<SpillOptions, 'unsupportedLock' | 'takeLegacyLock' | 'onWarning'>;

  constructor(o: SpillOptions) {
    this.dir = o.dir;
    this.maxBytes = o.maxBytes ?? 1024 * 1024 * 1024;
    this.fileBytes = o.fileBytes ?? 16 * 1024 * 1024;
    this.syncDelayMs = o.syncDelayMs ?? 50;
    this.lockOptions = {
      unsupportedLock: o.unsupportedLock,
      takeLegacyLock: o.takeLegacyLock,
      onWarning: o.onWarning,
    };
    if (!(this.maxBytes > 0)) throw new Error(`spill maxBytes must be > 0, got ${o.maxBytes}`);
    if (!(this.fileBytes > 0)) throw new Error(`spill fileBytes must be > 0, got ${o.fileBytes}`);
  }

  /**
   * Create the directory if needed, take its lock (the data directory's kernel lock on `<dir>/LOCK`: a second
   * pipeline or `floe audit replay` on the same directory is refused, naming the holder's PID), and take stock of
   * the files already there.
   */
  async open(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    this.lock = await LockFile.acquire(this.dir, nodeFs, processLockOwner, this.lockOptions);
    const names = readdirSync(this.dir)
      .filter((n) => FILE_RE.test(n))
      .sort();
    for (const n of names) {
      const size = statSync(join(this.dir, n)).size;
      this.sizes.set(n, size);
      this.total += size;
      this.closed.push(n);
    }
    const last = names.at(-1);
    if (last) this.nextSeq = Number(FILE_RE.exec(last)?.[1]) + 1;
  }

  /** Bytes in spill files (closed and current). */
  get totalBytes(): number {
    return this.total;
  }

  /** Complete files waiting to be replayed, oldest first (full paths). */
  pendingFiles(): string[] {
    return this.closed.map((n) => join(this.dir, n));
  }

  /** True when there is anything on disk (closed files, or a current file with data). */
  hasData(): boolean {
    return this.closed.length > 0 || (this.current?.bytes ?? 0) > 0;
  }

  private fits(bytes: number): boolean {
    return this.total + bytes <= this.maxBytes;
  }

  private ensureFile(): { name: string; fd: number; bytes: number } {
    if (this.current && this.current.bytes >= this.fileBytes) this.rotate();
    if (!this.current) {
      const name = `audit-${String(this.nextSeq++).padStart(12, '0')}.spill`;
      const fd = openSync(join(this.dir, name), 'a');
      this.current = { name, fd, bytes: 0 };
      this.sizes.set(name, 0);
    }
    return this.current;
  }

  private account(cur: { name: string; bytes: number }, n: number) {
    cur.bytes += n;
    this.total += n;
    this.sizes.set(cur.name, (this.sizes.get(cur.name) ?? 0) + n);
  }

  /**
   * Append one frame synchronously (no await; fsync follows within syncDelayMs). Returns false, writing
   * nothing, when the bound would be exceeded. Throws only on an I/O error.
   */
  appendSync(lines: readonly string[]): boolean {
    const frame = encodeFrame(lines);
    if (!this.fits(frame.length)) return false;
    const cur = this.ensureFile();
    let off = 0;
    while (off < frame.length) off += writeSync(cur.fd, frame, off, frame.length - off);
    this.account(cur, frame.length);
    this.dirty = true;
    if (!this.syncTimer) {
      this.syncTimer = setTimeout(() => {
        this.syncTimer = undefined;
        this.syncNow();
      }, this.syncDelayMs);
      this.syncTimer.unref?.();
    }
    return true;
  }

  /** fsync the current file now if overflow writes are waiting for their fsync. */
  async sync(): Promise<void> {
    if (!this.dirty || !this.current) return;
    this.dirty = false;
    const fd = this.current.fd;
    await new Promise<void>((resolve, reject) => fsync(fd, (err) => (err ? reject(err) : resolve())));
  }

  private syncNow(): void {
    if (!this.dirty || !this.current) return;
    this.dirty = false;
    fsync(this.current.fd, () => {}); // an fsync error surfaces again on the next append's fsync
  }

  /** Append one frame and fsync it. Resolves false, writing nothing, when the bound would be exceeded. */
  async append(lines: readonly string[]): Promise<boolean> {
    const frame = encodeFrame(lines);
    if (!this.fits(frame.length)) return false;
    const cur = this.ensureFile();
    this.account(cur, frame.length); // reserve before the await so concurrent appends respect the bound
    this.pendingWrites++;
    try {
      let off = 0;
      while (off < frame.length)
        off += await new Promise<number>((resolve, reject) =>
          write(cur.fd, frame, off, frame.length - off, null, (err, n) => (err ? reject(err) : resolve(n))),
        );
      await new Promise<void>((resolve, reject) => fsync(cur.fd, (err) => (err ? reject(err) : resolve())));
    } finally {
      this.pendingWrites--;
      if (this.pendingWrites === 0) this.closeDeferred();
    }
    return true;
  }

  private closeDeferred() {
    while (this.fdsToClose.length > 0) {
      const fd = this.fdsToClose.pop()!;
      try {
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
    }
  }

  /** Close the current file (fsynced) so it becomes a complete, replayable file. */
  rotate(): void {
    const cur = this.current;
    if (!cur) return;
    this.current = undefined;
    if (cur.bytes === 0) {
      closeSync(cur.fd);
      unlinkSync(join(this.dir, cur.name));
      this.sizes.delete(cur.name);
      return;
    }
    this.dirty = false;
    if (this.pendingWrites > 0) this.fdsToClose.push(cur.fd);
    else {
      fsyncSync(cur.fd);
      closeSync(cur.fd);
    }
    this.closed.push(cur.name);
  }

  /** Wait for in-flight async appends (used before a rotate that must include them). */
  async drainWrites(): Promise<void> {
    while (this.pendingWrites > 0) await new Promise((r) => setImmediate(r));
  }

  /** Read a complete file: its good frames and the first corruption, if any. */
  async read(path: string): Promise<SpillFileContent> {
    const buf = await readFile(path);
    return { file: path, ...decodeFrames(buf) };
  }

  private forget(path: string) {
    const name = path.slice(this.dir.length + 1);
    const i = this.closed.indexOf(name);
    if (i >= 0) this.closed.splice(i, 1);
    this.total -= this.sizes.get(name) ?? 0;
    this.sizes.delete(name);
  }

  /** Delete a replayed file. */
  async remove(path: string): Promise<void> {
    await unlink(path);
    this.forget(path);
  }

  /** Set a corrupt file aside as `<name>.corrupt` (kept for an operator, not replayed again). */
  async quarantine(path: string): Promise<string> {
    const to = `${path}.corrupt`;
    await rename(path, to);
    this.forget(path);
    return to;
  }

  /** Flush and close the current file (it stays on disk for the next start or `floe audit replay`). */
  async close(): Promise<void> {
    if (this.syncTimer) clearTimeout(this.syncTimer);
    this.syncTimer = undefined;
    await this.drainWrites();
    this.rotate();
    await this.lock?.release();
    this.lock = undefined;
  }
}

/** Spill files in a directory, oldest first (full paths), for `floe audit replay`. */
export function listSpillFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((n) => FILE_RE.test(n))
    .sort()
    .map((n) => join(dir, n));
}
