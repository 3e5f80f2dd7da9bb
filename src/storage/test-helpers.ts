// Shared helpers for the storage tests (not part of the public API).
import { promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Entry, NormalEntry, Storage } from '../raft/types.js';

/** Temp directories created by a test file; remove them with removeTempDirs() in afterEach. */
const created: string[] = [];

export async function tempDir(): Promise<string> {
  const d = await fsp.mkdtemp(path.join(os.tmpdir(), 'floe-storage-'));
  created.push(d);
  return d;
}

export async function removeTempDirs(): Promise<void> {
  for (const d of created.splice(0)) await fsp.rm(d, { recursive: true, force: true });
}

/** A normal entry whose data is derived from (index, term), so a reader can tell entries apart. */
export function ent(index: number, term: number, size = 8): NormalEntry {
  const data = new Uint8Array(size);
  for (let i = 0; i < size; i++) data[i] = (index * 31 + term * 7 + i) & 0xff;
  return { type: 'normal', index, term, data };
}

export function ents(lo: number, hi: number, term: number, size = 8): Entry[] {
  const out: Entry[] = [];
  for (let i = lo; i <= hi; i++) out.push(ent(i, term, size));
  return out;
}

/** Flips every bit of the byte at `offset` of `file`. */
export async function flipByte(file: string, offset: number): Promise<void> {
  const fh = await fsp.open(file, 'r+');
  try {
    const b = Buffer.alloc(1);
    await fh.read(b, 0, 1, offset);
    b[0] = b[0]! ^ 0xff;
    await fh.write(b, 0, 1, offset);
  } finally {
    await fh.close();
  }
}

/** Everything the Raft core can read from a Storage, in a comparable form. */
export function dump(s: Storage) {
  const first = s.firstIndex();
  const last = s.lastIndex();
  const snap = s.snapshot();
  return {
    initial: s.initialState(),
    first,
    last,
    termBeforeFirst: s.term(first - 1),
    entries: s.entries(first, last + 1),
    snapshot: { metadata: snap.metadata, data: [...snap.data] },
  };
}
