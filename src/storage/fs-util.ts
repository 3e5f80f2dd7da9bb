import { promises as fsp } from 'node:fs';
import * as path from 'node:path';

/**
 * fsyncs a directory so that creations, renames and deletions in it survive a power loss
 * (a file's own fsync does not make its directory entry durable on Linux/ext4/xfs).
 */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await fsp.open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Creates `dir` (and parents) if missing; fsyncs the parent of every directory it created. */
export async function ensureDir(dir: string): Promise<void> {
  const missing: string[] = [];
  let d = path.resolve(dir);
  for (;;) {
    try {
      const st = await fsp.stat(d);
      if (!st.isDirectory())
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
      await fsp.mkdir(m);
    } catch (err) {
      if (errCode(err) !== 'EEXIST') throw err;
    }
    await fsyncDir(path.dirname(m));
  }
}

/**
 * Writes `chunks` to a new file atomically: `<file>.tmp`, write, fdatasync, rename, fsync dir.
 * After a crash the file either does not exist or is complete; a leftover .tmp is garbage.
 */
export async function writeFileAtomic(file: string, chunks: readonly Uint8Array[]): Promise<void> {
  const tmp = `${file}.tmp`;
  const fh = await fsp.open(tmp, 'w');
  try {
    let pos = 0;
    for (const c of chunks) pos += await writeAll(fh, [c], pos); // no concat: a snapshot may be large
    await fh.datasync();
  } finally {
    await fh.close();
  }
  await fsp.rename(tmp, file);
  await fsyncDir(path.dirname(file));
}

/** Writes every byte of `chunks` at `position`, looping over short writes. Returns bytes written. */
export async function writeAll(
  fh: fsp.FileHandle,
  chunks: readonly Uint8Array[],
  position: number,
): Promise<number> {
  const buf = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks as Uint8Array[]);
  let done = 0;
  while (done < buf.length) {
    const { bytesWritten } = await fh.write(buf, done, buf.length - done, position + done);
    if (bytesWritten <= 0) throw new Error(`write made no progress at byte ${position + done}`);
    done += bytesWritten;
  }
  return done;
}

export function errCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err
    ? String((err as { code: unknown }).code)
    : undefined;
}
