// The file-system seam: DurableStorage (WAL, snapshots, lock file) reaches the disk only through
// StorageFs. `nodeFs` is the real one (node:fs promises); `MemoryFs` (memory-fs.ts) is the twin a
// simulation uses to lose unsynced writes at a crash, tear writes, fail fsync and flip bits.
//
// The interface is the few calls the storage needs, with the durability semantics of Linux:
// - `write` lands in the page cache; only `datasync` makes a file's data durable;
// - creating, renaming, linking and unlinking a name is durable only after `syncDir` of its
//   directory (a file's own datasync does not make its name durable);
// - errors carry a Node-style `code` ('ENOENT', 'EEXIST', 'ENOTDIR', 'EIO', ...).
import { promises as fsp } from 'node:fs';

export interface StorageFileStat {
  isDirectory: boolean;
  size: number;
}

/** An open file. Positions are absolute byte offsets; there is no file cursor. */
export interface StorageFile {
  /** Writes `data` at `position`; resolves with the bytes written (may be fewer: call again). */
  write(data: Uint8Array, position: number): Promise<number>;
  truncate(length: number): Promise<void>;
  /** fdatasync: everything written to this file so far is durable when it resolves. */
  datasync(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Open modes: 'r+' an existing file for reading and writing; 'w' create or truncate;
 * 'wx' create, failing with EEXIST if the name exists.
 */
export type OpenMode = 'r+' | 'w' | 'wx';

export interface StorageFs {
  /** Names in `dir`, in no particular order. */
  readdir(dir: string): Promise<string[]>;
  readFile(file: string): Promise<Buffer>;
  stat(path: string): Promise<StorageFileStat>;
  /** Creates one directory; its parent must exist. EEXIST if the name exists. */
  mkdir(dir: string): Promise<void>;
  open(file: string, mode: OpenMode): Promise<StorageFile>;
  /** Atomically replaces `to` (if any) with `from`. */
  rename(from: string, to: string): Promise<void>;
  /** A second name for an existing file; EEXIST if `newPath` exists (atomic create-if-absent). */
  link(existing: string, newPath: string): Promise<void>;
  unlink(file: string): Promise<void>;
  /** fsync of a directory: creations, renames and removals of names in it become durable. */
  syncDir(dir: string): Promise<void>;
}

/** The real file system (node:fs promises on libuv's thread pool). */
export const nodeFs: StorageFs = {
  readdir: (dir) => fsp.readdir(dir),
  readFile: (file) => fsp.readFile(file),
  async stat(p) {
    const st = await fsp.stat(p);
    return { isDirectory: st.isDirectory(), size: st.size };
  },
  mkdir: (dir) => fsp.mkdir(dir),
  async open(file, mode) {
    const fh = await fsp.open(file, mode);
    return {
      write: async (data, position) => (await fh.write(data, 0, data.length, position)).bytesWritten,
      truncate: (length) => fh.truncate(length),
      datasync: () => fh.datasync(),
      close: () => fh.close(),
    };
  },
  rename: (from, to) => fsp.rename(from, to),
  link: (existing, newPath) => fsp.link(existing, newPath),
  unlink: (file) => fsp.unlink(file),
  async syncDir(dir) {
    const fh = await fsp.open(dir, 'r');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
  },
};
