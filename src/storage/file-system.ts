// The file-system seam: DurableStorage (WAL, snapshots, lock file) reaches the disk only through
// StorageFs. `nodeFs` is the real one (node:fs promises); `MemoryFs` (memory-fs.ts) is the twin a
// simulation uses to lose unsynced writes at a crash, tear writes, fail fsync and flip bits.
//
// The interface is the few calls the storage needs, with the durability semantics of Linux:
// - `write` lands in the page cache; only `datasync` makes a file's data durable;
// - creating, renaming, linking and unlinking a name is durable only after `syncDir` of its
//   directory (a file's own datasync does not make its name durable);
// - errors carry a Node-style `code` ('ENOENT', 'EEXIST', 'ENOTDIR', 'EIO', ...);
// - `lockFile` is a kernel lock held by an open file: released when that file is closed or its
//   process dies (kill -9 and power loss included), never by a clock or a PID check.
import { constants, promises as fsp } from 'node:fs';
import { createRequire } from 'node:module';

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

/** An open file holding the exclusive lock of `StorageFs.lockFile`; close() releases the lock with the file. */
export interface LockedFile extends StorageFile {
  /** Identity (device and inode) of the open file, to compare with `StorageFs.fileId` of its name. */
  id(): Promise<string>;
  /** The whole file, read through this open file (on Windows another handle cannot read a locked file). */
  read(): Promise<Buffer>;
}

/** Error codes with which `lockFile` says that this platform or file system has no such lock. */
export const LOCK_UNSUPPORTED_CODES: ReadonlySet<string> = new Set([
  'ENOTSUP',
  'EOPNOTSUPP',
  'ENOSYS',
  'EINVAL', // a kernel older than 3.15 does not know F_OFD_SETLK
]);

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
  /**
   * Opens the existing `file` for reading and writing (ENOENT if absent; never truncating it; not through a
   * symbolic link: ELOOP if `file` is one) and takes an
   * exclusive lock on the whole file through that open file, without waiting: 'held' if another open
   * file has it, in this process or in another. The kernel releases it when the returned file is
   * closed or its process dies. Throws with a code in LOCK_UNSUPPORTED_CODES where there is no such lock.
   */
  lockFile(file: string): Promise<LockedFile | 'held'>;
  /** Identity (device and inode) of the file that `file` names now; ENOENT if none. */
  fileId(file: string): Promise<string>;
}

interface NativeLock {
  tryLock(fd: number): boolean;
  unlock(fd: number): void;
}

let native: NativeLock | Error | undefined;

/**
 * fs-native-extensions: fcntl(F_OFD_SETLK) on Linux, flock on macOS, LockFileEx on Windows, from
 * prebuilt N-API binaries inside the package. Loaded on first use; where it does not load, every
 * lockFile() fails with ENOTSUP (the caller decides: refuse, or the PID rule if opted in).
 */
function nativeLock(): NativeLock {
  if (native === undefined) {
    try {
      native = createRequire(import.meta.url)('fs-native-extensions') as NativeLock;
    } catch (err) {
      native = err instanceof Error ? err : new Error(String(err));
    }
  }
  if (native instanceof Error) {
    throw Object.assign(
      new Error(`fs-native-extensions failed to load: ${native.message}`, { cause: native }),
      { code: 'ENOTSUP', moduleLoadFailed: true },
    );
  }
  return native;
}

function fileOf(fh: fsp.FileHandle): StorageFile {
  return {
    write: async (data, position) => (await fh.write(data, 0, data.length, position)).bytesWritten,
    truncate: (length) => fh.truncate(length),
    datasync: () => fh.datasync(),
    close: () => fh.close(),
  };
}

const idOf = (st: { dev: bigint; ino: bigint }) => `${st.dev}:${st.ino}`;

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
    return fileOf(await fsp.open(file, mode));
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
  async lockFile(file) {
    const lock = nativeLock();
    // O_RDWR, no O_CREAT (the caller creates LOCK already filled), no O_TRUNC (the holder's record stays
    // readable until we hold the lock), O_NOFOLLOW (a symbolic link named LOCK is refused: ELOOP).
    const fh = await fsp.open(file, constants.O_RDWR | (constants.O_NOFOLLOW ?? 0));
    let ok: boolean;
    try {
      ok = lock.tryLock(fh.fd);
    } catch (err) {
      await fh.close();
      throw err;
    }
    if (!ok) {
      await fh.close();
      return 'held';
    }
    const f = fileOf(fh);
    return {
      ...f,
      id: async () => idOf(await fh.stat({ bigint: true })),
      read: async () => {
        const { size } = await fh.stat();
        const buf = Buffer.alloc(size);
        let at = 0;
        while (at < size) {
          const { bytesRead } = await fh.read(buf, at, size - at, at);
          if (bytesRead === 0) break;
          at += bytesRead;
        }
        return buf.subarray(0, at);
      },
      close: async () => {
        // Closing releases it too; unlocking first frees it at once on every platform (Windows may lag).
        try {
          lock.unlock(fh.fd);
        } finally {
          await fh.close();
        }
      },
    };
  },
  async fileId(file) {
    return idOf(await fsp.stat(file, { bigint: true }));
  },
};
