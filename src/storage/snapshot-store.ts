// Snapshot files: `snap/<index as 16 hex digits>-<term as 16 hex digits>.snap`, written atomically
// (temp file, write, fdatasync, rename, fsync dir) and checksummed. Layout:
//
//   0          8         12        16        20        24            24+M
//   +----------+---------+---------+---------+---------+-------------+--------------+
//   | FLOESNAP | version | M: meta | D: data | crc32c  | metadata    | data         |
//   |  magic   |   u32   | len u32 | len u32 |   u32   | (M bytes)   | (D bytes)    |
//   +----------+---------+---------+---------+---------+-------------+--------------+
//
// crc32c covers bytes [8, 20) (version and lengths), the metadata and the data. Integers are
// little-endian; metadata is msgpack [index, term, voters, learners].
import * as path from 'node:path';
import { crc32c } from '@node-rs/crc32';
import { Packr } from 'msgpackr';
import type { Snapshot, SnapshotMetadata } from '../raft/types.js';
import { SnapshotCorruptionError } from './errors.js';
import { nodeFs, type StorageFs } from './file-system.js';
import { ensureDir, errCode, removeIfExists, writeFileAtomic } from './fs-util.js';

const MAGIC = Buffer.from('FLOESNAP', 'ascii');
const VERSION = 1;
const HEADER_BYTES = 24;
/** Snapshot data is limited to what a u32 length (and one Node.js Buffer) can hold. */
export const MAX_SNAPSHOT_DATA_BYTES = 0xffff_ffff;

const packr = new Packr({ useRecords: false });
const SNAP_NAME = /^([0-9a-f]{16})-([0-9a-f]{16})\.snap$/;

export interface SnapshotFileRef {
  index: number;
  term: number;
  name: string;
}

export function snapshotFileName(index: number, term: number): string {
  return `${index.toString(16).padStart(16, '0')}-${term.toString(16).padStart(16, '0')}.snap`;
}

export function parseSnapshotFileName(name: string): SnapshotFileRef | undefined {
  const m = SNAP_NAME.exec(name);
  if (!m) return undefined;
  return { index: Number.parseInt(m[1]!, 16), term: Number.parseInt(m[2]!, 16), name };
}

/** Serializes a snapshot into the file layout above (header, metadata, data: three chunks). */
export function encodeSnapshotFile(snap: Snapshot): Buffer[] {
  if (snap.data.length > MAX_SNAPSHOT_DATA_BYTES) {
    throw new RangeError(
      `snapshot data is ${snap.data.length} bytes; at most ${MAX_SNAPSHOT_DATA_BYTES} allowed`,
    );
  }
  const md = snap.metadata;
  const meta = Buffer.from(packr.pack([md.index, md.term, md.conf.voters, md.conf.learners]));
  const data = Buffer.from(snap.data.buffer, snap.data.byteOffset, snap.data.byteLength);
  const header = Buffer.alloc(HEADER_BYTES);
  MAGIC.copy(header, 0);
  header.writeUInt32LE(VERSION, 8);
  header.writeUInt32LE(meta.length, 12);
  header.writeUInt32LE(data.length, 16);
  const crc = crc32c(data, crc32c(meta, crc32c(header.subarray(8, 20))));
  header.writeUInt32LE(crc, 20);
  return [header, meta, data];
}

/** Parses and verifies a snapshot file's bytes; `name` is used in error messages and checked against the metadata. */
export function decodeSnapshotFile(buf: Buffer, name: string): Snapshot {
  const bad = (detail: string) => new SnapshotCorruptionError(name, detail);
  if (buf.length < HEADER_BYTES)
    throw bad(`file is ${buf.length} bytes, shorter than the ${HEADER_BYTES}-byte header`);
  if (!buf.subarray(0, 8).equals(MAGIC)) throw bad('bad magic (not a Floe snapshot file)');
  const version = buf.readUInt32LE(8);
  if (version !== VERSION) throw bad(`format version ${version}; this build reads ${VERSION}`);
  const m = buf.readUInt32LE(12);
  const d = buf.readUInt32LE(16);
  if (HEADER_BYTES + m + d !== buf.length) {
    throw bad(`header declares ${HEADER_BYTES + m + d} bytes, file has ${buf.length} (truncated or padded)`);
  }
  const meta = buf.subarray(HEADER_BYTES, HEADER_BYTES + m);
  const data = buf.subarray(HEADER_BYTES + m);
  const crc = crc32c(data, crc32c(meta, crc32c(buf.subarray(8, 20))));
  if (crc !== buf.readUInt32LE(20)) throw bad('checksum mismatch');
  let md: SnapshotMetadata;
  try {
    const v = packr.unpack(meta) as unknown;
    if (!Array.isArray(v) || v.length !== 4) throw new Error('not a 4-tuple');
    const [index, term, voters, learners] = v as [unknown, unknown, unknown, unknown];
    const ids = (x: unknown) =>
      Array.isArray(x) && x.every((n) => Number.isSafeInteger(n) && (n as number) > 0);
    if (!Number.isSafeInteger(index) || !Number.isSafeInteger(term) || !ids(voters) || !ids(learners)) {
      throw new Error('fields out of range');
    }
    md = {
      index: index as number,
      term: term as number,
      conf: { voters: voters as number[], learners: learners as number[] },
    };
  } catch (err) {
    throw bad(`metadata unreadable: ${(err as Error).message}`);
  }
  const ref = parseSnapshotFileName(path.basename(name));
  if (ref && (ref.index !== md.index || ref.term !== md.term)) {
    throw bad(
      `file name says index ${ref.index} term ${ref.term}, metadata says index ${md.index} term ${md.term}`,
    );
  }
  return { metadata: md, data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
}

/** The snap/ directory. */
export class SnapshotStore {
  private constructor(
    readonly dir: string,
    private readonly fs: StorageFs,
  ) {}

  /** Opens (creating) the directory and removes temp files left by interrupted writes. */
  static async open(
    dir: string,
    warn: (message: string) => void = () => {},
    fs: StorageFs = nodeFs,
  ): Promise<SnapshotStore> {
    await ensureDir(fs, dir);
    let removed = false;
    for (const name of await fs.readdir(dir)) {
      if (name.endsWith('.tmp')) {
        await removeIfExists(fs, path.join(dir, name));
        warn(`removed leftover temporary snapshot file ${path.join(dir, name)} (an interrupted write)`);
        removed = true;
      }
    }
    if (removed) await fs.syncDir(dir);
    return new SnapshotStore(dir, fs);
  }

  /** Snapshot files present, oldest (lowest index) first. */
  async list(): Promise<SnapshotFileRef[]> {
    const out: SnapshotFileRef[] = [];
    for (const name of await this.fs.readdir(this.dir)) {
      const ref = parseSnapshotFileName(name);
      if (ref) out.push(ref);
    }
    return out.sort((a, b) => a.index - b.index || a.term - b.term);
  }

  /** Writes the snapshot atomically; when it resolves the file is durable under its final name. */
  async save(snap: Snapshot): Promise<void> {
    const file = path.join(this.dir, snapshotFileName(snap.metadata.index, snap.metadata.term));
    await writeFileAtomic(this.fs, file, encodeSnapshotFile(snap));
  }

  /** Loads and verifies snapshot (index, term). Throws SnapshotCorruptionError if missing or bad. */
  async load(index: number, term: number): Promise<Snapshot> {
    const file = path.join(this.dir, snapshotFileName(index, term));
    let buf: Buffer;
    try {
      buf = await this.fs.readFile(file);
    } catch (err) {
      if (errCode(err) === 'ENOENT') throw new SnapshotCorruptionError(file, 'file is missing');
      throw err;
    }
    return decodeSnapshotFile(buf, file);
  }

  /** Deletes every snapshot file not in `keep` (matched by index and term), then fsyncs the directory. */
  async retainOnly(keep: ReadonlyArray<{ index: number; term: number }>): Promise<string[]> {
    const removed: string[] = [];
    for (const f of await this.list()) {
      if (keep.some((k) => k.index === f.index && k.term === f.term)) continue;
      await removeIfExists(this.fs, path.join(this.dir, f.name));
      removed.push(f.name);
    }
    if (removed.length > 0) await this.fs.syncDir(this.dir);
    return removed;
  }

  /** Renames a bad snapshot to `<name>.corrupt` (kept for inspection, never loaded again). */
  async quarantine(index: number, term: number): Promise<string> {
    const file = path.join(this.dir, snapshotFileName(index, term));
    await this.fs.rename(file, `${file}.corrupt`);
    await this.fs.syncDir(this.dir);
    return `${file}.corrupt`;
  }
}
