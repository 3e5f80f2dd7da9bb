// MemoryFs: an in-memory twin of StorageFs for tests and simulations, with the faults a real disk
// has. Each file has a page-cache view (what reads return) and a durable image (what survives a
// power loss); each directory has its current names and its durable names. Faults:
// - crash({ kind: 'process' }): the process dies, the kernel keeps everything it accepted;
// - crash({ kind: 'power', random, zeroFill }): only durable data and names survive, plus, per
//   file, a prefix of the unsynced writes chosen by `random`, the next one torn at any byte (with
//   `zeroFill`, the rest of its range may read as zeros: a file system that extended the file
//   before writing the data, e.g. ext4 data=writeback);
// - faults.syncError: an fdatasync/directory fsync fails (e.g. EIO); as on Linux, the dirty data is
//   then dropped from the durable path (a later fsync "succeeds" without it);
// - faults.onWrite: corrupt data on its way to the disk (a bit flip in flight) or fail the write;
// - flipBit(): a bit flip at rest;
// - faults.delay: awaited before every operation (a slow disk, or a scheduler's hook);
// - faults.lockError: lockFile fails (e.g. 'ENOTSUP': a platform or file system without the lock).
// lockFile is the kernel lock of the real seam: one holder per file (two opens by one process
// conflict too), released when the holder closes it or its process dies (crash of its view).
// crash() returns a fresh view for the restarted process; every operation of the old view, even
// one already in progress, never settles: code of a dead process does not run on.
import * as path from 'node:path';
import type { LockedFile, OpenMode, StorageFile, StorageFileStat, StorageFs } from './file-system.js';

export interface MemoryFsFaults {
  /** Before every datasync and directory fsync: return an error code (e.g. 'EIO') to fail it. */
  syncError?: (path: string) => string | undefined;
  /**
   * Before every write lands, with a private copy of the bytes: change them to corrupt the write in
   * flight, or return an error code (e.g. 'EIO', 'ENOSPC') to fail it.
   */
  onWrite?: (path: string, position: number, data: Buffer) => string | undefined;
  /** Awaited before every operation (op is the method name); the synchronous `*Now` calls skip it. */
  delay?: (op: string, path: string) => Promise<void> | undefined;
  /** The wall clock (ms) that stamps modification times. Default: 0. */
  wallMs?: () => number;
  /** Before every lockFile: return an error code (e.g. 'ENOTSUP') to fail it. */
  lockError?: (path: string) => string | undefined;
}

export interface CrashOptions {
  /** 'process': nothing the kernel accepted is lost. 'power': only what was made durable survives, plus what `random` keeps. */
  kind: 'process' | 'power';
  /**
   * For 'power': random(n) returns an integer in [0, n). Per file it picks how many unsynced writes
   * survive (in order) and how many bytes of the next one. Default: nothing unsynced survives.
   */
  random?: (n: number) => number;
  /** For 'power' with `random`: a torn write's missing bytes may read as zeros (random picks). Default false. */
  zeroFill?: boolean;
}

/**
 * `path.resolve(p)`, without its work (the working directory, a normalization, a new string) for a path that is
 * already absolute and normal, as the names of open files are: no `//`, no `.` or `..` segment, no trailing `/`.
 */
function resolved(p: string): string {
  return p.charCodeAt(0) === 47 &&
    !p.includes('//') &&
    !p.includes('/.') &&
    (p.length === 1 || p.charCodeAt(p.length - 1) !== 47)
    ? p
    : path.resolve(p);
}

type Pending = { kind: 'write'; position: number; data: Buffer } | { kind: 'truncate'; length: number };

/** A byte array that grows by doubling, so appending to a long file is not quadratic. */
class Bytes {
  private buf = Buffer.alloc(0);
  size = 0;

  static of(b: Bytes): Bytes {
    const c = new Bytes();
    c.apply({ kind: 'write', position: 0, data: b.view() });
    return c;
  }

  view(): Buffer {
    return this.buf.subarray(0, this.size);
  }

  apply(op: Pending): void {
    const end = op.kind === 'truncate' ? op.length : op.position + op.data.length;
    if (end > this.buf.length) {
      const grown = Buffer.alloc(Math.max(end, this.buf.length * 2, 64));
      this.buf.copy(grown, 0, 0, this.size);
      this.buf = grown;
    }
    if (end > this.size) this.buf.fill(0, this.size, end); // a hole, or a truncate that extends
    if (op.kind === 'write') op.data.copy(this.buf, op.position);
    this.size = op.kind === 'truncate' ? op.length : Math.max(this.size, end);
  }
}

let nextFileId = 0;

/** A lock held through one open file by the process of one view. */
interface Holder {
  view: MemoryFs;
  closed: boolean;
}

class FileNode {
  readonly kind = 'file';
  /** The inode number, for fileId. */
  readonly id = `memfs:${++nextFileId}`;
  /** The lockFile holder, if any (free again once it closed the file or its process died). */
  holder: Holder | undefined;
  /** The file's latest name (renames follow it), for fault hooks and messages. */
  constructor(public name: string) {}
  /** What reads return (the page cache). */
  data = new Bytes();
  /** What is on the platter. */
  durable = new Bytes();
  /** Changes since the last successful datasync, oldest first. */
  pending: Pending[] = [];
  /** Wall-clock ms of the last write, truncate or touch (page cache only: not kept through a power loss). */
  mtimeMs = 0;
}

class DirNode {
  readonly kind = 'dir';
  entries = new Map<string, FileNode | DirNode>();
  durable = new Map<string, FileNode | DirNode>();
}

interface Disk {
  root: DirNode;
  faults: MemoryFsFaults;
  /** The live view; every other view belongs to a crashed process. */
  live: MemoryFs | undefined;
}

function fsError(code: string, syscall: string, p: string): Error {
  return Object.assign(new Error(`${code}: ${syscall} '${p}'`), { code, syscall, path: p });
}

export class MemoryFs implements StorageFs {
  private readonly disk: Disk;

  constructor(faults: MemoryFsFaults = {}) {
    this.disk = { root: new DirNode(), faults, live: undefined };
    this.disk.live = this;
  }

  /** Faults shared by every view of this disk; change them at any time. */
  get faults(): MemoryFsFaults {
    return this.disk.faults;
  }

  set faults(f: MemoryFsFaults) {
    this.disk.faults = f;
  }

  /** False once this view's process has crashed. */
  get alive(): boolean {
    return this.disk.live === this;
  }

  /**
   * The process using this view crashes (and, for 'power', the machine loses power). Returns the
   * view for the restarted process; this one is dead from now on.
   */
  crash(options: CrashOptions): MemoryFs {
    if (!this.alive) throw new Error('MemoryFs.crash: this view belongs to a process that already crashed');
    if (options.kind === 'power') {
      const files = new Set<FileNode>();
      const visit = (d: DirNode) => {
        for (const n of [...d.entries.values(), ...d.durable.values()]) {
          if (n.kind === 'dir') visit(n);
          else files.add(n);
        }
      };
      visit(this.disk.root);
      for (const f of files) this.loseUnsynced(f, options.random, options.zeroFill ?? false);
      const revert = (d: DirNode) => {
        d.entries = new Map(d.durable);
        for (const n of d.entries.values()) if (n.kind === 'dir') revert(n);
      };
      revert(this.disk.root);
    }
    const next = Object.create(MemoryFs.prototype) as MemoryFs;
    (next as unknown as { disk: Disk }).disk = this.disk;
    this.disk.live = next;
    return next;
  }

  /** Flips one bit at rest: in what reads return and in the durable image. */
  flipBit(file: string, byteOffset: number, bit: number): void {
    const f = this.lookupFile(file, 'flipBit');
    if (byteOffset < 0 || byteOffset >= f.data.size) {
      throw new RangeError(`flipBit: offset ${byteOffset} is outside ${file} (${f.data.size} bytes)`);
    }
    for (const b of [f.data.view(), f.durable.view()]) {
      if (byteOffset < b.length) b[byteOffset] = b[byteOffset]! ^ (1 << bit);
    }
  }

  /** The durable image of a file (what a power loss keeping nothing unsynced leaves), if the file exists. */
  durableContent(file: string): Buffer | undefined {
    try {
      return Buffer.from(this.lookupFile(file, 'durableContent').durable.view());
    } catch {
      return undefined;
    }
  }

  async readdir(dir: string): Promise<string[]> {
    await this.enter('readdir', dir);
    return [...this.lookupDir(dir, 'scandir').entries.keys()];
  }

  async readFile(file: string): Promise<Buffer> {
    await this.enter('readFile', file);
    return Buffer.from(this.lookupFile(file, 'open').data.view());
  }

  async stat(p: string): Promise<StorageFileStat> {
    await this.enter('stat', p);
    const n = this.lookup(p, 'stat');
    return n.kind === 'dir' ? { isDirectory: true, size: 0 } : { isDirectory: false, size: n.data.size };
  }

  async mkdir(dir: string): Promise<void> {
    await this.enter('mkdir', dir);
    const { parent, name } = this.parentOf(dir, 'mkdir');
    if (parent.entries.has(name)) throw fsError('EEXIST', 'mkdir', dir);
    parent.entries.set(name, new DirNode());
  }

  async open(file: string, mode: OpenMode): Promise<StorageFile> {
    await this.enter('open', file);
    const { parent, name } = this.parentOf(file, 'open');
    let f = parent.entries.get(name);
    if (f?.kind === 'dir') throw fsError('EISDIR', 'open', file);
    if (mode === 'r+') {
      if (!f) throw fsError('ENOENT', 'open', file);
    } else {
      if (f && mode === 'wx') throw fsError('EEXIST', 'open', file);
      if (!f) {
        f = new FileNode(path.resolve(file));
        parent.entries.set(name, f);
      } else if (f.data.size > 0) {
        this.change(f, { kind: 'truncate', length: 0 });
      }
    }
    return this.handle(f);
  }

  async lockFile(file: string): Promise<LockedFile | 'held'> {
    await this.enter('lockFile', file);
    const code = this.disk.faults.lockError?.(path.resolve(file));
    if (code) throw fsError(code, 'fcntl', file);
    const { parent, name } = this.parentOf(file, 'open');
    const f = parent.entries.get(name);
    if (f?.kind === 'dir') throw fsError('EISDIR', 'open', file);
    if (!f) throw fsError('ENOENT', 'open', file);
    const h = f.holder;
    if (h && !h.closed && h.view.alive) return 'held';
    const holder: Holder = { view: this, closed: false };
    f.holder = holder;
    const node = f;
    const opened = this.handle(f, () => {
      holder.closed = true;
    });
    return {
      ...opened,
      id: async () => node.id,
      read: async () => {
        await this.enter('readFile', node.name);
        return Buffer.from(node.data.view());
      },
    };
  }

  async fileId(file: string): Promise<string> {
    await this.enter('stat', file);
    return this.lookupFile(file, 'stat').id;
  }

  async rename(from: string, to: string): Promise<void> {
    await this.enter('rename', from);
    this.renameNow(from, to);
  }

  async link(existing: string, newPath: string): Promise<void> {
    await this.enter('link', existing);
    this.linkNow(existing, newPath);
  }

  async unlink(file: string): Promise<void> {
    await this.enter('unlink', file);
    this.unlinkNow(file);
  }

  async syncDir(dir: string): Promise<void> {
    await this.enter('syncDir', dir);
    this.syncDirNow(dir);
  }

  // Synchronous calls, for code that does blocking file I/O (the SDK's lease cache). They apply every fault but
  // `delay`, and throw (EIO) on the view of a crashed process.

  readFileNow(file: string): Buffer {
    this.enterNow('readFile', file);
    return Buffer.from(this.lookupFile(file, 'open').data.view());
  }

  /** open(file, 'w'), one write of `data`, fdatasync if `fsync`, close. */
  writeFileNow(file: string, data: Uint8Array, fsync: boolean): void {
    this.enterNow('writeFile', file);
    const { parent, name } = this.parentOf(file, 'open');
    let f = parent.entries.get(name);
    if (f?.kind === 'dir') throw fsError('EISDIR', 'open', file);
    if (!f) {
      f = new FileNode(path.resolve(file));
      parent.entries.set(name, f);
    } else if (f.data.size > 0) {
      this.change(f, { kind: 'truncate', length: 0 });
    }
    this.writeTo(f, data, 0);
    if (fsync) this.datasyncOf(f);
  }

  existsNow(p: string): boolean {
    this.enterNow('stat', p);
    try {
      this.lookup(p, 'stat');
      return true;
    } catch {
      return false;
    }
  }

  mtimeNow(file: string): number {
    this.enterNow('stat', file);
    return this.lookupFile(file, 'stat').mtimeMs;
  }

  touchNow(file: string): void {
    this.enterNow('utimes', file);
    this.lookupFile(file, 'utime').mtimeMs = this.disk.faults.wallMs?.() ?? 0;
  }

  renameNow(from: string, to: string): void {
    this.enterNow('rename', from);
    const src = this.parentOf(from, 'rename');
    const node = src.parent.entries.get(src.name);
    if (!node) throw fsError('ENOENT', 'rename', from);
    const dst = this.parentOf(to, 'rename');
    if (dst.parent.entries.get(dst.name)?.kind === 'dir') throw fsError('EISDIR', 'rename', to);
    src.parent.entries.delete(src.name);
    dst.parent.entries.set(dst.name, node);
    if (node.kind === 'file') node.name = path.resolve(to);
  }

  linkNow(existing: string, newPath: string): void {
    this.enterNow('link', existing);
    const f = this.lookupFile(existing, 'link');
    const dst = this.parentOf(newPath, 'link');
    if (dst.parent.entries.has(dst.name)) throw fsError('EEXIST', 'link', newPath);
    dst.parent.entries.set(dst.name, f);
  }

  unlinkNow(file: string): void {
    this.enterNow('unlink', file);
    const { parent, name } = this.parentOf(file, 'unlink');
    const n = parent.entries.get(name);
    if (!n) throw fsError('ENOENT', 'unlink', file);
    if (n.kind === 'dir') throw fsError('EISDIR', 'unlink', file);
    parent.entries.delete(name);
  }

  syncDirNow(dir: string): void {
    this.enterNow('syncDir', dir);
    const d = this.lookupDir(dir, 'fsync');
    const code = this.disk.faults.syncError?.(path.resolve(dir));
    if (code) throw fsError(code, 'fsync', dir);
    d.durable = new Map(d.entries);
  }

  private enterNow(op: string, p: string): void {
    if (!this.alive) throw fsError('EIO', op, p);
  }

  private change(f: FileNode, op: Pending): void {
    f.data.apply(op);
    f.pending.push(op);
    f.mtimeMs = this.disk.faults.wallMs?.() ?? 0;
  }

  private writeTo(f: FileNode, data: Uint8Array, position: number): number {
    const bytes = Buffer.from(data);
    const code = this.disk.faults.onWrite?.(f.name, position, bytes);
    if (code) throw fsError(code, 'write', f.name);
    this.change(f, { kind: 'write', position, data: bytes });
    return bytes.length;
  }

  private datasyncOf(f: FileNode): void {
    const code = this.disk.faults.syncError?.(f.name);
    if (code) {
      // Linux marks the dirty pages clean after a failed writeback: they never reach the disk,
      // and the next fsync reports success. Reads still see them until the page is evicted.
      f.pending = [];
      throw fsError(code, 'fdatasync', f.name);
    }
    // Only what is still pending reaches the disk (not writes a failed fsync dropped).
    for (const op of f.pending) f.durable.apply(op);
    f.pending = [];
  }

  private handle(f: FileNode, onClose?: () => void): StorageFile {
    let closed = false;
    const open = async (op: string) => {
      await this.enter(op, f.name);
      if (closed) throw fsError('EBADF', op, f.name);
    };
    return {
      write: async (data, position) => {
        await open('write');
        return this.writeTo(f, data, position);
      },
      truncate: async (length) => {
        await open('truncate');
        this.change(f, { kind: 'truncate', length });
      },
      datasync: async () => {
        await open('datasync');
        this.datasyncOf(f);
      },
      close: async () => {
        await open('close');
        closed = true;
        onClose?.();
      },
    };
  }

  /** Awaits the delay hook; never settles if this view's process has crashed (even meanwhile). */
  private async enter(op: string, p: string): Promise<void> {
    if (!this.alive) return new Promise<never>(() => {});
    const d = this.disk.faults.delay?.(op, resolved(p));
    if (d) await d;
    if (!this.alive) return new Promise<never>(() => {});
  }

  private loseUnsynced(f: FileNode, random: ((n: number) => number) | undefined, zeroFill: boolean): void {
    const img = f.durable;
    const n = f.pending.length;
    const keep = random ? random(n + 1) : 0;
    for (let i = 0; i < keep; i++) img.apply(f.pending[i]!);
    const torn = f.pending[keep];
    if (random && torn?.kind === 'write' && torn.data.length > 0) {
      const bytes = random(torn.data.length); // 0 .. length-1 bytes of it reached the disk
      const len = zeroFill && random(2) === 1 ? torn.data.length : bytes;
      const data = Buffer.alloc(len);
      torn.data.copy(data, 0, 0, bytes);
      if (len > 0) img.apply({ kind: 'write', position: torn.position, data });
    }
    f.data = Bytes.of(img);
    f.pending = [];
  }

  private lookup(p: string, syscall: string): FileNode | DirNode {
    const abs = resolved(p);
    let node: FileNode | DirNode = this.disk.root;
    // The non-empty names between slashes, in order, as `abs.split('/').filter(Boolean)` gives them, without the
    // two arrays (every WAL read and write looks its file up).
    for (let start = 0; start < abs.length; ) {
      let end = abs.indexOf('/', start);
      if (end === -1) end = abs.length;
      if (end > start) {
        if (node.kind !== 'dir') throw fsError('ENOTDIR', syscall, p);
        const next: FileNode | DirNode | undefined = node.entries.get(abs.slice(start, end));
        if (!next) throw fsError('ENOENT', syscall, p);
        node = next;
      }
      start = end + 1;
    }
    return node;
  }

  private lookupDir(p: string, syscall: string): DirNode {
    const n = this.lookup(p, syscall);
    if (n.kind !== 'dir') throw fsError('ENOTDIR', syscall, p);
    return n;
  }

  private lookupFile(p: string, syscall: string): FileNode {
    const n = this.lookup(p, syscall);
    if (n.kind !== 'file') throw fsError('EISDIR', syscall, p);
    return n;
  }

  private parentOf(p: string, syscall: string): { parent: DirNode; name: string } {
    const abs = path.resolve(p);
    const name = path.basename(abs);
    if (name === '') throw fsError('EEXIST', syscall, p);
    return { parent: this.lookupDir(path.dirname(abs), syscall), name };
  }
}
