import * as path from 'node:path';
import type { StorageFile, StorageFs } from './file-system.js';

/**
 * fsyncs a directory so that creations, renames and deletions in it survive a power loss
 * (a file's own fsync does not make its directory entry durable on Linux/ext4/xfs).
 */
export async function fsyncDir(fs: StorageFs, dir: string): Promise<void> {
  await fs.syncDir(dir);
}

/**
 * Creates `dir` (and parents) if missing, then fsyncs `dir` and every directory above it, every
 * time, not only when it created them: a previous run may have crashed after creating a name
 * (a directory, a segment renamed into place) and before fsyncing its directory. This run would
 * see the name in the page cache and acknowledge writes into it, and a later power loss would
 * drop the name with everything in it. Directories above `dir` that this process may not open
 * for reading (EACCES, EPERM) are skipped: it can only have created directories it can read.
 */
export async function ensureDir(fs: StorageFs, dir: string): Promise<void> {
  const missing: string[] = [];
  let d = path.resolve(dir);
  for (;;) {
    try {
      const st = await fs.stat(d);
      if (!st.isDirectory)
        throw Object.assign(new Error(`${d} exists and is not a directory`), { code: 'ENOTDIR' });
      break;
    } catch (err) {
      if (errCode(err) !== 'ENOENT') throw err;
      missing.push(d);
      const parent = path.dirname(d);
      if (parent === d) break;
      d = parent;
    }
  }
  for (const m of missing.reverse()) {
    try {
      await fs.mkdir(m);
    } catch (err) {
      if (errCode(err) !== 'EEXIST') throw err;
    }
  }
  const abs = path.resolve(dir);
  for (let p = abs, depth = 0; ; depth++) {
    try {
      await fs.syncDir(p);
    } catch (err) {
      const code = errCode(err);
      if (depth === 0 || (code !== 'EACCES' && code !== 'EPERM')) throw err;
    }
    const parent = path.dirname(p);
    if (parent === p) break;
    p = parent;
  }
}

/**
 * Writes `chunks` to a new file atomically: `<file>.tmp`, write, fdatasync, rename, fsync dir.
 * After a crash the file either does not exist or is complete; a leftover .tmp is garbage.
 */
export async function writeFileAtomic(
  fs: StorageFs,
  file: string,
  chunks: readonly Uint8Array[],
): Promise<void> {
  const tmp = `${file}.tmp`;
  const fh = await fs.open(tmp, 'w');
  try {
    let pos = 0;
    for (const c of chunks) pos += await writeAll(fh, [c], pos); // no concat: a snapshot may be large
    await fh.datasync();
  } finally {
    await fh.close();
  }
  await fs.rename(tmp, file);
  await fs.syncDir(path.dirname(file));
}

/** Writes every byte of `chunks` at `position`, looping over short writes. Returns bytes written. */
export async function writeAll(
  fh: StorageFile,
  chunks: readonly Uint8Array[],
  position: number,
): Promise<number> {
  const buf = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks as Uint8Array[]);
  let done = 0;
  while (done < buf.length) {
    const n = await fh.write(done === 0 ? buf : buf.subarray(done), position + done);
    if (n <= 0) throw new Error(`write made no progress at byte ${position + done}`);
    done += n;
  }
  return done;
}

/** Removes `file`; a missing file is not an error (rm --force). */
export async function removeIfExists(fs: StorageFs, file: string): Promise<void> {
  try {
    await fs.unlink(file);
  } catch (err) {
    if (errCode(err) !== 'ENOENT') throw err;
  }
}

export function errCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err
    ? String((err as { code: unknown }).code)
    : undefined;
}
