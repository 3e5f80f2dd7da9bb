// The write-ahead log: segment files of checksummed records, appended with group commit.
//
// Group commit: every append() encodes its records at once (so the caller may reuse its objects)
// and queues them; a single writer loop takes everything queued, writes it with one write() and
// makes it durable with one fdatasync(), then resolves all of those appends together. Appends that
// arrive while a write+fdatasync is in flight wait for the next round, so under load one fsync
// covers many appends. I/O goes through the StorageFs seam; the real one is fs.promises (libuv
// thread pool): the event loop keeps serving while the disk works, and no worker thread has to copy
// buffers back and forth.

import * as path from 'node:path';
import type { ConfState, Entry, HardState } from '../raft/types.js';
import { bugOn } from '../testing/bug-switches.js';
import { StorageClosedError, StorageConfigError, StorageFailedError } from './errors.js';
import { nodeFs, type StorageFile, type StorageFs } from './file-system.js';
import { ensureDir, errCode, removeIfExists, writeAll } from './fs-util.js';
import {
  encodeEntries,
  encodeHardState,
  encodeHeader,
  encodeMarker,
  NO_SNAPSHOT,
  type SnapshotMarker,
  UNKNOWN_VOTE,
} from './payload.js';
import { encodeFrame, RecordType, readFrame, SEGMENT_PREAMBLE_BYTES, segmentPreamble } from './record.js';
import {
  parseSegmentFileName,
  type SegmentRef,
  segmentFileName,
  type TornTail,
  WalReplayer,
  type WalState,
  type WalTail,
} from './wal-replay.js';

/** Default segment size: 64 MiB (etcd's). */
export const DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024;
export const MIN_SEGMENT_BYTES = 1024;
export const MAX_SEGMENT_BYTES = 1024 * 1024 * 1024;

/** Entries are split into records of about this many payload bytes (bounds one record's size). */
const ENTRIES_RECORD_TARGET_BYTES = 1024 * 1024;

export interface WalOptions {
  /**
   * A new segment is started when the next record would take the current one past this size
   * (a single larger record gets a segment of its own). Default 64 MiB; allowed 1 KiB .. 1 GiB.
   */
  segmentBytes?: number;
  /** Membership recorded in a brand-new WAL's first header. Default: no voters, no learners. */
  bootstrapConf?: ConfState;
  /** Called with every non-fatal anomaly (torn tail cut, leftover temp file removed). Default: none. */
  onWarning?: (message: string) => void;
  /** The file system. Default: the real one (`nodeFs`). */
  fs?: StorageFs;
}

export type WalRecord =
  | { type: 'entries'; entries: readonly Entry[] }
  | { type: 'hardState'; hardState: HardState }
  | { type: 'snapshot'; marker: SnapshotMarker };

export interface AppendOptions {
  /** Resolve only after fdatasync. False: resolve after write() (survives a process crash, not power loss). */
  sync: boolean;
  /** Runs (in order) before this append's records are written, e.g. writing the snapshot file a marker names. */
  prepare?: () => Promise<void>;
  /** Runs synchronously once the records are durable, before the promise resolves (in append order). */
  onDurable?: () => void;
}

/** Counters since open. `syncs / appends` is the group-commit ratio. */
export interface WalStats {
  /** append() calls completed. */
  appends: number;
  /** Records written (segment headers not counted). */
  records: number;
  bytes: number;
  /** write() system calls for records. */
  writes: number;
  /** fdatasync() calls that made appends durable (segment creation and rolling not counted). */
  syncs: number;
  /** Most appends made durable by one fdatasync. */
  maxAppendsPerSync: number;
  segmentsCreated: number;
  segmentsDeleted: number;
}

interface Frame {
  bytes: Buffer;
  /** Advances the writer's view of the log (what the next segment header repeats). */
  advance(tail: WalTail): void;
}

interface WriteItem extends AppendOptions {
  kind: 'write';
  frames: Frame[];
  resolve: () => void;
  reject: (err: Error) => void;
}

interface TaskItem {
  kind: 'task';
  run: () => Promise<void>;
  resolve: () => void;
  reject: (err: Error) => void;
}

type Item = WriteItem | TaskItem;

/**
 * What recovery did to the tail of the log. When `tailCut`, an incomplete frame (and anything after
 * it) was cut off the end of the last segment, and the hard state was fenced: `hardStateAfter` is
 * `{ term: max(surviving term, last entry term) + 1, vote: UNKNOWN_VOTE }`, already durable, so the
 * node grants no vote in any term it may have voted in without the cut bytes (see docs/storage.md).
 */
export type WalRecovery =
  | { tailCut: false }
  | {
      tailCut: true;
      /** Segment file name (in the WAL directory) that was cut. */
      file: string;
      /** The file now ends here: where the incomplete frame started (before the fence record). */
      cutAtOffset: number;
      bytesCut: number;
      reason: string;
      /** The hard state the surviving records gave. */
      hardStateBefore: HardState;
      /** The fenced hard state written right after the cut and fsynced. */
      hardStateAfter: HardState;
    };

export interface WalOpenResult {
  wal: Wal;
  /** What the retained segments hold (a fresh WAL: empty). The hard state is the fenced one after a cut. */
  state: WalState;
  /** Set when a torn record at the end of the last segment was cut off. */
  torn: TornTail | undefined;
  recovery: WalRecovery;
}

export class Wal {
  private readonly queue: Item[] = [];
  private loop: Promise<void> = Promise.resolve();
  private running = false;
  private failure: StorageFailedError | undefined;
  private closed = false;
  /** Awaited before every new segment file (DurableStorage: the lock watchdog); a throw fails the WAL. */
  private beforeNewFile: (() => Promise<void>) | undefined;
  private readonly counters: WalStats = {
    appends: 0,
    records: 0,
    bytes: 0,
    writes: 0,
    syncs: 0,
    maxAppendsPerSync: 0,
    segmentsCreated: 0,
    segmentsDeleted: 0,
  };

  private constructor(
    readonly dir: string,
    private readonly fs: StorageFs,
    private readonly segmentBytes: number,
    private readonly segments: SegmentRef[],
    private fh: StorageFile,
    /** Bytes in the current (last) segment. */
    private size: number,
    /** Bytes of the current segment's header record. */
    private headerBytes: number,
    private readonly tail: WalTail,
  ) {}

  /**
   * Opens (creating if needed) the WAL in `dir`: removes leftover temp files, replays every segment,
   * cuts a torn tail off the last one, and positions the writer at the end.
   * Throws WalCorruptionError for anything that is not a torn tail.
   */
  static async open(dir: string, options: WalOptions = {}): Promise<WalOpenResult> {
    const segmentBytes = options.segmentBytes ?? DEFAULT_SEGMENT_BYTES;
    if (
      !Number.isSafeInteger(segmentBytes) ||
      segmentBytes < MIN_SEGMENT_BYTES ||
      segmentBytes > MAX_SEGMENT_BYTES
    ) {
      throw new StorageConfigError(
        `segmentBytes = ${segmentBytes}; allowed: an integer from ${MIN_SEGMENT_BYTES} to ${MAX_SEGMENT_BYTES}`,
      );
    }
    const warn = options.onWarning ?? (() => {});
    const fs = options.fs ?? nodeFs;
    await ensureDir(fs, dir);
    const refs: SegmentRef[] = [];
    for (const name of await fs.readdir(dir)) {
      const ref = parseSegmentFileName(name);
      if (ref) refs.push(ref);
      else if (name.endsWith('.tmp')) {
        // A segment whose creation was interrupted: it was never renamed into place, so never used.
        await removeIfExists(fs, path.join(dir, name));
        warn(`removed leftover temporary file ${path.join(dir, name)}`);
      } else warn(`ignoring unexpected file ${path.join(dir, name)} in the WAL directory`);
    }
    refs.sort((a, b) => a.seq - b.seq);

    if (refs.length === 0) {
      const tail: WalTail = {
        lastIndex: 0,
        lastTerm: 0,
        hardState: { term: 0, vote: 0, commit: 0 },
        snapshot: NO_SNAPSHOT,
        bootstrapConf: options.bootstrapConf ?? { voters: [], learners: [] },
      };
      const seg = await createSegment(fs, dir, 1, tail);
      const wal = new Wal(dir, fs, segmentBytes, [seg.ref], seg.fh, seg.size, seg.size, tail);
      wal.counters.segmentsCreated++;
      const state: WalState = {
        tail: { ...tail, hardState: { ...tail.hardState } },
        entries: [],
        prevIndex: 0,
        prevTerm: 0,
        markers: [],
        floor: 0,
      };
      return { wal, state, torn: undefined, recovery: { tailCut: false } };
    }

    const replayer = new WalReplayer();
    let torn: TornTail | undefined;
    let lastBuf: Buffer = Buffer.alloc(0);
    let lastHeaderBytes = 0;
    for (let i = 0; i < refs.length; i++) {
      const ref = refs[i]!;
      const isLast = i === refs.length - 1;
      const buf = await fs.readFile(path.join(dir, ref.name));
      torn = replayer.feed(ref, buf, isLast);
      if (isLast) {
        lastBuf = buf;
        const h = readFrame(buf, SEGMENT_PREAMBLE_BYTES);
        lastHeaderBytes = h.kind === 'ok' ? h.next : 0;
      }
    }
    const state = replayer.result()!;
    const last = refs[refs.length - 1]!;
    let recovery: WalRecovery = { tailCut: false };
    // The last segment as it is kept: what replay accepted (a torn tail cut off), in this build's format.
    const kept: Buffer[] = [segmentPreamble(), lastBuf.subarray(SEGMENT_PREAMBLE_BYTES, torn?.offset)];
    if (torn && !torn.unfenced) {
      // Protocol-aware recovery: the cut bytes may have held a vote in a newer term (only if fsync
      // lied: an incomplete frame was never covered by a completed fdatasync). Fence the next term
      // as "voted for someone unknown", in the same place, durable before open returns.
      const before = state.tail.hardState;
      const fence: HardState = {
        term: Math.max(before.term, state.tail.lastTerm) + 1,
        vote: UNKNOWN_VOTE,
        commit: before.commit,
      };
      kept.push(encodeFrame(RecordType.hardState, encodeHardState(fence)));
      state.tail.hardState = fence;
      recovery = {
        tailCut: true,
        file: torn.file,
        cutAtOffset: torn.offset,
        bytesCut: torn.fileBytes - torn.offset,
        reason: torn.reason,
        hardStateBefore: { ...before },
        hardStateAfter: { ...fence },
      };
    }
    // What replay read came through the page cache, and may not be on the disk: after an fsync that
    // failed (EIO), Linux drops the dirty pages from write-back but keeps them readable, and a later
    // fsync reports success without them (finding FS-1). Only the last segment can hold such bytes
    // (a segment is fdatasync'd whole before the next one is created, and any failure stops the
    // writer). So it is written again, to a new file made durable and renamed over it, before
    // anything recovered is used: from here on, everything open returns is on the disk.
    const fh = await rewriteSegment(fs, dir, last.name, kept);
    const lastBytes = kept.reduce((n, b) => n + b.length, 0);
    if (recovery.tailCut) {
      const { hardStateBefore: b, hardStateAfter: a } = recovery;
      warn(
        `cut a torn record off the end of ${path.join(dir, recovery.file)}: ${recovery.bytesCut} bytes ` +
          `from offset ${recovery.cutAtOffset} (${recovery.reason}); an incomplete record was never fsynced, so never ` +
          `acknowledged. Hard state fenced from term ${b.term} vote ${b.vote} to term ${a.term} ` +
          `with an unknown vote: this node grants no vote in term ${a.term} or below`,
      );
    }
    const tail: WalTail = { ...state.tail, hardState: { ...state.tail.hardState } };
    const wal = new Wal(dir, fs, segmentBytes, refs, fh, lastBytes, lastHeaderBytes, tail);
    return { wal, state, torn, recovery };
  }

  /**
   * Queues records; resolves once they are written (and fdatasync'd when `sync`). Records of one
   * append are written in order and never interleaved with another append's. Rejects with
   * StorageFailedError once any write or fsync has failed (the WAL then refuses all work).
   */
  append(records: readonly WalRecord[], options: AppendOptions): Promise<void> {
    if (this.closed) return Promise.reject(new StorageClosedError());
    if (this.failure) return Promise.reject(this.failure);
    const frames: Frame[] = [];
    for (const r of records) encodeRecord(r, frames);
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ kind: 'write', frames, ...options, resolve, reject });
      this.kick();
    });
  }

  /** Runs `fn` in the writer loop, after everything queued before it (e.g. deleting segments). */
  task(fn: () => Promise<void>): Promise<void> {
    if (this.closed) return Promise.reject(new StorageClosedError());
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ kind: 'task', run: fn, resolve, reject });
      this.kick();
    });
  }

  /**
   * Deletes whole segments (oldest first, never the current one) whose entries are all <= `index`,
   * then fsyncs the directory. Resolves with the number of segments deleted.
   */
  async releaseTo(index: number): Promise<number> {
    let deleted = 0;
    await this.task(async () => {
      while (this.segments.length > 1 && this.segments[1]!.firstIndex - 1 <= index) {
        await this.fs.unlink(path.join(this.dir, this.segments[0]!.name));
        this.segments.shift();
        deleted++;
      }
      if (deleted > 0) {
        await this.fs.syncDir(this.dir);
        this.counters.segmentsDeleted += deleted;
      }
    });
    return deleted;
  }

  /** Sets the check awaited before every new segment file is created; when it throws, the WAL fails (fail-stop). */
  guardNewFiles(check: () => Promise<void>): void {
    this.beforeNewFile = check;
  }

  /**
   * Fails the WAL from outside, as a failed write or fsync does: every queued and later append and task
   * is refused with the returned StorageFailedError (the first failure's, if it had failed already).
   */
  failStop(err: unknown): StorageFailedError {
    return this.fail(err);
  }

  /** Segment files currently on disk, oldest first. */
  segmentNames(): string[] {
    return this.segments.map((s) => s.name);
  }

  stats(): WalStats {
    return { ...this.counters };
  }

  /** Waits for queued work, then closes the current segment. Later appends are refused. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    while (this.running) await this.loop;
    await this.fh.close();
  }

  private kick(): void {
    if (this.running) return;
    this.running = true;
    // Start on a later microtask: callers woken by the previous batch (their continuations are
    // already queued) get to append first, so they share this round instead of the next one.
    this.loop = Promise.resolve().then(() => this.drain());
  }

  private async drain(): Promise<void> {
    for (;;) {
      if (this.queue.length === 0) {
        // Cleared in the same synchronous step that saw the queue empty: an append() made after
        // this point starts a new loop, one made before it was picked up by this one.
        this.running = false;
        return;
      }
      if (this.failure) {
        for (const item of this.queue.splice(0)) item.reject(this.failure);
        continue;
      }
      const head = this.queue[0]!;
      if (head.kind === 'task') {
        this.queue.shift();
        try {
          await head.run();
          head.resolve();
        } catch (err) {
          // A failed unlink or directory fsync leaves the directory's durable state unknown (an fsync error may
          // have dropped what it covered): refuse all further work, as after a failed write.
          head.reject(this.fail(err));
        }
        continue;
      }
      try {
        if (head.prepare) {
          const prepare = head.prepare;
          head.prepare = undefined;
          await prepare();
        }
        // Everything queued up to the next task or prepare shares one write and one fdatasync.
        let n = 1;
        while (n < this.queue.length) {
          const next = this.queue[n]!;
          if (next.kind !== 'write' || next.prepare) break;
          n++;
        }
        const batch = this.queue.splice(0, n) as WriteItem[];
        try {
          await this.writeBatch(batch);
        } catch (err) {
          for (const w of batch) w.reject(this.fail(err));
          continue;
        }
        for (const w of batch) {
          if (this.failure) {
            w.reject(this.failure);
            continue;
          }
          try {
            w.onDurable?.();
            this.counters.appends++;
            w.resolve();
          } catch (err) {
            w.reject(this.fail(err));
          }
        }
      } catch (err) {
        this.fail(err);
      }
    }
  }

  private async writeBatch(batch: WriteItem[]): Promise<void> {
    let chunk: Buffer[] = [];
    let chunkBytes = 0;
    let sync = false;
    for (const w of batch) {
      sync ||= w.sync;
      for (const f of w.frames) {
        const atLeastOneRecord = this.size + chunkBytes > this.headerBytes;
        if (atLeastOneRecord && this.size + chunkBytes + f.bytes.length > this.segmentBytes) {
          await this.flush(chunk, chunkBytes);
          chunk = [];
          chunkBytes = 0;
          await this.roll();
        }
        chunk.push(f.bytes);
        chunkBytes += f.bytes.length;
        f.advance(this.tail);
        this.counters.records++;
      }
    }
    await this.flush(chunk, chunkBytes);
    if (sync) {
      try {
        await this.fh.datasync();
      } catch (err) {
        // Test-only: the fsyncgate mistake, a failed fdatasync retried (the retry "succeeds" without the dropped data).
        if (!bugOn('wal-retry-failed-fsync')) throw err;
        await this.fh.datasync();
      }
      this.counters.syncs++;
      if (batch.length > this.counters.maxAppendsPerSync) this.counters.maxAppendsPerSync = batch.length;
    }
  }

  private async flush(chunk: Buffer[], bytes: number): Promise<void> {
    if (bytes === 0) return;
    await writeAll(this.fh, chunk, this.size);
    this.size += bytes;
    this.counters.bytes += bytes;
    this.counters.writes++;
  }

  /** Seals the current segment (fdatasync) and starts the next one. */
  private async roll(): Promise<void> {
    await this.fh.datasync();
    await this.fh.close();
    const prev = this.segments[this.segments.length - 1]!;
    if (this.beforeNewFile) await this.beforeNewFile();
    const seg = await createSegment(this.fs, this.dir, prev.seq + 1, this.tail);
    this.segments.push(seg.ref);
    this.fh = seg.fh;
    this.size = seg.size;
    this.headerBytes = seg.size;
    this.counters.segmentsCreated++;
  }

  private fail(err: unknown): StorageFailedError {
    if (!this.failure) {
      const e = asError(err);
      this.failure = new StorageFailedError(
        `WAL write failed in ${this.dir}; refusing further writes: ${e.message}`,
        {
          cause: e,
        },
      );
    }
    return this.failure;
  }
}

/**
 * Replaces segment `name` with `chunks`: written to `<name>.tmp`, fdatasync, renamed over the old
 * file, directory fsync. Returns the new file, open for appending. A crash leaves the old file or
 * the new one, never a mix; a leftover .tmp is removed by the next open. Any failure is a
 * StorageFailedError: open must not go on with bytes it could not make durable.
 */
async function rewriteSegment(
  fs: StorageFs,
  dir: string,
  name: string,
  chunks: readonly Buffer[],
): Promise<StorageFile> {
  const final = path.join(dir, name);
  const tmp = `${final}.tmp`;
  let fh: StorageFile | undefined;
  let renamed = false;
  try {
    fh = await fs.open(tmp, 'w');
    await writeAll(fh, chunks, 0);
    await fh.datasync();
    await fs.rename(tmp, final);
    renamed = true;
    await fs.syncDir(dir);
    return fh;
  } catch (err) {
    await fh?.close().catch(() => {});
    if (!renamed) await removeIfExists(fs, tmp).catch(() => {});
    throw new StorageFailedError(
      `could not make the recovered WAL segment ${final} durable (it is rewritten at every open, so that ` +
        `nothing recovery read is trusted unless it is on the disk); refusing to start: ${asError(err).message}`,
      { cause: err },
    );
  }
}

/**
 * Creates segment `seq` starting after the tail: header written to `<name>.tmp`, fdatasync,
 * rename, fsync the directory. A crash leaves either no segment or one with a complete header.
 */
async function createSegment(
  fs: StorageFs,
  dir: string,
  seq: number,
  tail: WalTail,
): Promise<{ ref: SegmentRef; fh: StorageFile; size: number }> {
  const firstIndex = tail.lastIndex + 1;
  const name = segmentFileName(seq, firstIndex);
  const header = encodeFrame(
    RecordType.segmentHeader,
    encodeHeader({
      seq,
      firstIndex,
      prevTerm: tail.lastTerm,
      hardState: tail.hardState,
      snapshot: tail.snapshot,
      bootstrapConf: tail.bootstrapConf,
    }),
  );
  const preamble = segmentPreamble();
  const final = path.join(dir, name);
  const tmp = `${final}.tmp`;
  let fh: StorageFile;
  try {
    fh = await fs.open(tmp, 'w');
  } catch (err) {
    throw new StorageConfigError(`cannot create WAL segment in ${dir}: ${asError(err).message}`, {
      cause: err,
    });
  }
  try {
    await writeAll(fh, [preamble, header], 0);
    await fh.datasync();
    await fs.rename(tmp, final);
    await fs.syncDir(dir);
  } catch (err) {
    await fh.close().catch(() => {});
    if (errCode(err) !== 'ENOENT') await removeIfExists(fs, tmp).catch(() => {});
    throw new StorageFailedError(`could not create WAL segment ${final}: ${asError(err).message}`, {
      cause: err,
    });
  }
  return { ref: { seq, firstIndex, name }, fh, size: preamble.length + header.length };
}

function encodeRecord(r: WalRecord, out: Frame[]): void {
  switch (r.type) {
    case 'entries': {
      const ents = r.entries;
      let start = 0;
      let bytes = 0;
      for (let i = 0; i < ents.length; i++) {
        const e = ents[i]!;
        bytes += 32 + (e.type === 'normal' ? e.data.length : (e.change.context?.length ?? 0));
        if (bytes >= ENTRIES_RECORD_TARGET_BYTES || i === ents.length - 1) {
          out.push(entriesFrame(ents.slice(start, i + 1)));
          start = i + 1;
          bytes = 0;
        }
      }
      return;
    }
    case 'hardState': {
      const hs = { ...r.hardState };
      out.push({
        bytes: encodeFrame(RecordType.hardState, encodeHardState(hs)),
        advance: (t) => {
          t.hardState = hs;
        },
      });
      return;
    }
    case 'snapshot': {
      const m = { ...r.marker };
      out.push({
        bytes: encodeFrame(RecordType.snapshot, encodeMarker(m)),
        advance: (t) => {
          t.snapshot = m;
          if (m.reset) {
            t.lastIndex = m.index;
            t.lastTerm = m.term;
          }
        },
      });
      return;
    }
  }
}

function entriesFrame(ents: readonly Entry[]): Frame {
  const last = ents[ents.length - 1]!;
  const lastIndex = last.index;
  const lastTerm = last.term;
  return {
    bytes: encodeFrame(RecordType.entries, encodeEntries(ents)),
    advance: (t) => {
      t.lastIndex = lastIndex;
      t.lastTerm = lastTerm;
    },
  };
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}
