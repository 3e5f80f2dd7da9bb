// DurableStorage: the Raft log on disk (WAL + snapshot files) with a synchronous in-memory read
// side (a MemoryStorage) for the Raft core, as etcd does it. The memory only ever shows what is
// already durable: a save() updates it after its fdatasync, just before its promise resolves.
//
// Data directory layout:
//   <dir>/LOCK                               kernel-locked by the process that has the directory open;
//                                            it records that process's PID, host and start time
//   <dir>/wal/<seq>-<firstIndex>.wal         WAL segments (see wal.ts, record.ts)
//   <dir>/snap/<index>-<term>.snap           snapshot files (see snapshot-store.ts)
import * as path from 'node:path';
import type { NodeStorage } from '../node/seams.js';
import { MemoryStorage } from '../raft/memory-storage.js';
import type { ConfState, Entry, HardState, Snapshot, Storage } from '../raft/types.js';
import {
  SnapshotCorruptionError,
  StorageClosedError,
  StorageConfigError,
  StorageUsageError,
  WalCorruptionError,
} from './errors.js';
import { nodeFs, type StorageFs } from './file-system.js';
import { ensureDir, errCode } from './fs-util.js';
import {
  describeHolder,
  LockFile,
  type LockOwner,
  processLockOwner,
  type UnsupportedLockPolicy,
} from './lock-file.js';
import type { SnapshotMarker } from './payload.js';
import { SnapshotStore } from './snapshot-store.js';
import { DEFAULT_SEGMENT_BYTES, Wal, type WalRecord, type WalRecovery, type WalStats } from './wal.js';
import { sameConf, termIn, type WalState } from './wal-replay.js';

export interface DurableStorageOptions {
  /**
   * Membership of a brand-new cluster, recorded in the first WAL segment. Omit it for a node that
   * joins an existing cluster (it learns everything from a snapshot). When the directory already
   * holds a log, a bootstrapConf that differs from the recorded one is refused (StorageConfigError):
   * it means the node is started with another cluster's configuration.
   */
  bootstrapConf?: ConfState;
  /** WAL segment size. Default 64 MiB; allowed 1 KiB .. 1 GiB. */
  segmentBytes?: number;
  /**
   * Entries kept behind each snapshot (in memory and in the WAL) so that a slightly lagging follower
   * can still be sent entries instead of a whole snapshot. Default 5000; allowed 0 .. 100,000,000.
   */
  trailingEntries?: number;
  /** Snapshot files kept on disk (the newest K). Default 2; allowed 1 .. 100. */
  keepSnapshots?: number;
  /** Called with each warning (torn tail cut, leftover temp file removed, snapshot fallback). */
  onWarning?: (message: string) => void;
  /** Every file operation goes through this. Default: the real file system (`nodeFs`); tests and simulations pass a `MemoryFs`. */
  fs?: StorageFs;
  /**
   * Identity recorded in the LOCK file (informational: the kernel lock decides), and the liveness test
   * for an old-format record or the opted-in PID rule. Default: this process (`process.pid`, `kill(pid, 0)`).
   */
  lockOwner?: LockOwner;
  /**
   * Where the platform or file system has no kernel file lock: 'refuse' (default: StorageLockUnsupportedError)
   * or 'pid-file' (the weaker PID rule, with a warning; see docs/storage.md, "The lock").
   */
  unsupportedLock?: UnsupportedLockPolicy;
  /**
   * Take a LOCK in the old format (a bare PID, written by a Floe version that locked by PID only or by the PID
   * rule) instead of refusing it (StorageLegacyLockError). Only for the one start after every such process using
   * this directory was stopped (an upgrade). Default false.
   */
  takeLegacyLock?: boolean;
}

export const DEFAULT_TRAILING_ENTRIES = 5000;
export const DEFAULT_KEEP_SNAPSHOTS = 2;

export interface SaveBatch {
  hardState?: HardState;
  entries: readonly Entry[];
  /** A snapshot sent by the leader: it replaces the whole log. */
  snapshot?: Snapshot;
}

export interface DurableStorageStats extends WalStats {
  /** Snapshot files written (local and received). */
  snapshotsWritten: number;
}

const EMPTY = new Uint8Array(0);

export class DurableStorage implements NodeStorage {
  /** Synchronous read side for the Raft core: everything here is durable. */
  readonly storage: Storage;
  /** Warnings raised while opening (also passed to onWarning). */
  readonly warnings: readonly string[];
  /**
   * What recovery did to the WAL's tail. After a cut (`tailCut: true`) the recovered hard state is
   * already fenced (`hardStateAfter`: the next term, vote UNKNOWN_VOTE), so the Raft core refuses
   * every vote in that term and below with no help from the caller; log or export this report.
   */
  readonly recovery: WalRecovery;

  private closed = false;
  /** Last index once every queued save is written (validates new saves before they are queued). */
  private pendingLast: number;
  /** Newest snapshot index once every queued save/snapshot is written. */
  private pendingSnapIndex: number;
  /**
   * Entries at or below this index are never rewritten: the highest snapshot index the WAL has
   * recorded (it can exceed the snapshot in use after a fallback to an older snapshot file).
   */
  private rewriteFloor: number;
  /** Newest durable snapshot markers, oldest first (the snapshot files to keep). */
  private readonly recentMarkers: SnapshotMarker[];
  private snapshotsWritten = 0;

  private constructor(
    readonly dir: string,
    private readonly mem: MemoryStorage,
    private readonly wal: Wal,
    private readonly snaps: SnapshotStore,
    private readonly lock: LockFile,
    private readonly trailing: number,
    private readonly keep: number,
    private readonly warn: (message: string) => void,
    warnings: string[],
    recentMarkers: SnapshotMarker[],
    walFloor: number,
    recovery: WalRecovery,
  ) {
    this.storage = mem;
    this.warnings = warnings;
    this.recovery = recovery;
    this.pendingLast = mem.lastIndex();
    this.pendingSnapIndex = mem.snapshot().metadata.index;
    this.rewriteFloor = Math.max(walFloor, this.pendingSnapIndex);
    this.recentMarkers = recentMarkers;
    wal.guardNewFiles(() => this.lock.verify());
  }

  /**
   * Opens (creating if needed) the data directory `dir`: takes the lock, replays the WAL (cutting a
   * torn tail), loads the newest snapshot the WAL vouches for, and rebuilds the in-memory log.
   * Throws StorageLockedError, StorageConfigError, WalCorruptionError or SnapshotCorruptionError.
   */
  static async open(dataDir: string, options: DurableStorageOptions = {}): Promise<DurableStorage> {
    const trailing = options.trailingEntries ?? DEFAULT_TRAILING_ENTRIES;
    const keep = options.keepSnapshots ?? DEFAULT_KEEP_SNAPSHOTS;
    checkInt('trailingEntries', trailing, 0, 100_000_000);
    checkInt('keepSnapshots', keep, 1, 100);
    if (options.bootstrapConf) checkConf(options.bootstrapConf);
    if (options.unsupportedLock !== undefined && !['refuse', 'pid-file'].includes(options.unsupportedLock)) {
      throw new StorageConfigError(
        `unsupportedLock must be 'refuse' or 'pid-file', got ${JSON.stringify(options.unsupportedLock)}`,
      );
    }
    const warnings: string[] = [];
    const warn = (m: string) => {
      warnings.push(m);
      options.onWarning?.(m);
    };

    const fs = options.fs ?? nodeFs;
    // Absolute: every later file (WAL segment, snapshot) is created by path, and a caller may chdir.
    const dir = path.resolve(dataDir);
    try {
      await ensureDir(fs, dir);
    } catch (err) {
      const why = errCode(err) === 'ENOTDIR' ? 'it (or a parent) is not a directory' : (err as Error).message;
      throw new StorageConfigError(`cannot use data dir ${dir}: ${why}`, { cause: err });
    }
    const lock = await LockFile.acquire(dir, fs, options.lockOwner ?? processLockOwner, {
      unsupportedLock: options.unsupportedLock,
      takeLegacyLock: options.takeLegacyLock === true,
      onWarning: warn,
    });
    if (lock.tookOverFrom !== undefined)
      warn(
        `took over a stale lock left by dead process ${lock.tookOverFrom}${describeHolder(lock.previous)}`,
      );
    const hadLog =
      lock.by === 'kernel' &&
      lock.previous === undefined &&
      (await fs.stat(path.join(dir, 'wal')).then(
        () => true,
        () => false,
      ));
    if (hadLog) {
      // Every open records its holder (fdatasynced) before the log exists, and LOCK is never deleted.
      warn(
        `${lock.file} was missing or empty although ${dir} holds a log: if it was deleted or replaced while ` +
          'another process had this directory open, that process still runs without the lock: stop it now ' +
          '(never delete LOCK; a crash or power loss while this process took the lock, or an upgrade from a ' +
          'Floe version that removed LOCK at shutdown, also leaves this)',
      );
    }
    try {
      const { wal, state, recovery } = await Wal.open(path.join(dir, 'wal'), {
        segmentBytes: options.segmentBytes ?? DEFAULT_SEGMENT_BYTES,
        bootstrapConf: options.bootstrapConf,
        onWarning: warn,
        fs,
      });
      try {
        const recorded = state.tail.bootstrapConf;
        if (options.bootstrapConf && !sameConf(sortedConf(options.bootstrapConf), sortedConf(recorded))) {
          throw new StorageConfigError(
            `data dir ${dir} was bootstrapped with voters [${recorded.voters}] learners [${recorded.learners}]; ` +
              `open() was given voters [${options.bootstrapConf.voters}] learners [${options.bootstrapConf.learners}]`,
          );
        }
        const snaps = await SnapshotStore.open(path.join(dir, 'snap'), warn, fs);
        const chosen = await chooseSnapshot(state, snaps, warn);
        refuseMembershipOfItsOwn(dir, state, chosen !== undefined);
        const mem = buildMemory(state, chosen?.snap, trailing, wal.segmentNames());
        // Keep the newest K snapshots the WAL knows about; a file without a marker was never acknowledged.
        const files = await snaps.list();
        const known = state.markers.filter(
          (m) =>
            (!chosen || m.index <= chosen.marker.index) &&
            files.some((f) => f.index === m.index && f.term === m.term),
        );
        const recent = known.slice(-keep);
        if (chosen && !recent.includes(chosen.marker)) recent.push(chosen.marker);
        const removed = await snaps.retainOnly(recent);
        for (const r of removed)
          warn(
            `removed snapshot file ${path.join(snaps.dir, r)} (older than the newest ${keep}, or never recorded in the WAL)`,
          );
        return new DurableStorage(
          dir,
          mem,
          wal,
          snaps,
          lock,
          trailing,
          keep,
          warn,
          warnings,
          recent,
          state.floor,
          recovery,
        );
      } catch (err) {
        await wal.close();
        throw err;
      }
    } catch (err) {
      await lock.release();
      throw err;
    }
  }

  /**
   * Persists a Ready's hard state, snapshot and entries; resolves once they are durable (after one
   * fdatasync shared with every save queued at the same time) and visible through `storage`.
   * On disk the order is snapshot file, snapshot marker, entries, hard state.
   * `sync: false` resolves after write() (no fdatasync): use it only for commit-index-only changes.
   */
  save(batch: SaveBatch, options: { sync: boolean }): Promise<void> {
    if (this.closed) return Promise.reject(new StorageClosedError());
    const { entries, hardState, snapshot } = batch;
    const records: WalRecord[] = [];
    let last = this.pendingLast;
    let snapIndex = this.pendingSnapIndex;
    let marker: SnapshotMarker | undefined;
    if (snapshot) {
      const md = snapshot.metadata;
      if (md.index < snapIndex) {
        return Promise.reject(
          new StorageUsageError(
            `snapshot at index ${md.index} is older than the snapshot already saved (${snapIndex})`,
          ),
        );
      }
      marker = { index: md.index, term: md.term, reset: true };
      records.push({ type: 'snapshot', marker });
      last = md.index;
      snapIndex = md.index;
    }
    if (entries.length > 0) {
      const problem = checkEntries(entries, last, Math.max(snapIndex, this.rewriteFloor));
      if (problem) return Promise.reject(new StorageUsageError(problem));
      records.push({ type: 'entries', entries });
      last = entries[entries.length - 1]!.index;
    }
    if (hardState) {
      // Recovery refuses a commit index beyond the log, so never write one.
      if (hardState.commit > last) {
        return Promise.reject(
          new StorageUsageError(`hard state commit ${hardState.commit} is beyond the last index ${last}`),
        );
      }
      records.push({ type: 'hardState', hardState });
    }
    this.pendingLast = last;
    this.pendingSnapIndex = snapIndex;
    if (snapIndex > this.rewriteFloor) this.rewriteFloor = snapIndex;
    const mem = this.mem;
    const done = this.wal.append(records, {
      sync: options.sync || snapshot !== undefined,
      prepare: snapshot ? () => this.writeSnapshotFile(snapshot) : undefined,
      onDurable: () => {
        if (snapshot) {
          mem.applySnapshot(snapshot);
          this.noteMarker(marker!);
        }
        if (entries.length > 0) mem.append(entries);
        if (hardState) mem.setHardState(hardState);
      },
    });
    if (snapshot) {
      // Compaction behind the leader's snapshot, queued right behind it. The save resolves after it
      // (snapshots are rare; this keeps what is on disk predictable). The snapshot is durable either
      // way, but a failed unlink or directory fsync fails the WAL (fail-stop), so the save says so.
      const index = snapshot.metadata.index;
      return done.then(() =>
        this.compactBehind(index).catch((err) => {
          if (err instanceof StorageClosedError) return;
          this.warn(`compaction after snapshot ${index} failed: ${err}`);
          throw err;
        }),
      );
    }
    return done;
  }

  /**
   * Persists a snapshot of the applied state at `index` (which must be durable and committed), then
   * compacts: the in-memory log and whole WAL segments keep only `trailingEntries` behind it, and
   * only the newest `keepSnapshots` snapshot files stay. Resolves after all of that. A snapshot at
   * the index of the current one is a no-op.
   */
  async createSnapshot(index: number, conf: ConfState, data: Uint8Array): Promise<void> {
    if (this.closed) throw new StorageClosedError();
    if (index === this.pendingSnapIndex) return;
    const term = this.termForSnapshot(index);
    await this.saveLocalSnapshot({
      metadata: { index, term, conf: { voters: [...conf.voters], learners: [...conf.learners] } },
      data,
    });
  }

  /** Like createSnapshot, with the metadata given (its term must match the log at its index). */
  async saveSnapshot(snapshot: Snapshot): Promise<void> {
    if (this.closed) throw new StorageClosedError();
    const { index, term } = snapshot.metadata;
    if (index === this.pendingSnapIndex) return;
    const have = this.termForSnapshot(index);
    if (have !== term) {
      throw new StorageUsageError(`snapshot says entry ${index} has term ${term}, the log has term ${have}`);
    }
    await this.saveLocalSnapshot(snapshot);
  }

  /** Counters since open (group commit: compare `appends` with `syncs`). */
  stats(): DurableStorageStats {
    return { ...this.wal.stats(), snapshotsWritten: this.snapshotsWritten };
  }

  /** The current durable hard state. */
  hardState(): HardState {
    return this.mem.hardState();
  }

  /** WAL segment file names, oldest first. */
  segmentNames(): string[] {
    return this.wal.segmentNames();
  }

  /**
   * The lock watchdog (also run before every new WAL segment and snapshot file): checks that LOCK still names
   * the file this storage locked. When it does not (LOCK deleted or replaced, the data dir moved or copied while
   * open), another process may open the directory: the storage fail-stops as after a failed fsync (every
   * later save is refused with StorageFailedError) and this rejects with that error. Call it periodically
   * (the node runtime does, from its tick).
   */
  async checkLock(): Promise<void> {
    if (this.closed) return;
    try {
      await this.lock.verify();
    } catch (err) {
      if (this.closed) return;
      throw this.wal.failStop(err);
    }
  }

  /** Waits for queued saves, closes files and releases the lock. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      await this.wal.close();
    } finally {
      await this.lock.release();
    }
  }

  private termForSnapshot(index: number): number {
    const m = this.mem;
    const problem = checkSnapshotIndex(index, this.pendingSnapIndex, m.lastIndex(), m.hardState().commit);
    if (problem) throw new StorageUsageError(problem);
    return m.term(index);
  }

  private async saveLocalSnapshot(snap: Snapshot): Promise<void> {
    const { index, term, conf } = snap.metadata;
    this.pendingSnapIndex = index;
    if (index > this.rewriteFloor) this.rewriteFloor = index;
    const marker: SnapshotMarker = { index, term, reset: false };
    await this.wal.append([{ type: 'snapshot', marker }], {
      sync: true,
      prepare: () => this.writeSnapshotFile(snap),
      onDurable: () => {
        const m = this.mem;
        // A leader's snapshot queued in between may have superseded this one: then there is nothing to do.
        if (index <= m.snapshot().metadata.index) return;
        m.createSnapshot(index, conf, snap.data);
        this.noteMarker(marker);
        const c = index - this.trailing;
        if (c > m.firstIndex() - 1) m.compact(c);
      },
    });
    await this.compactBehind(index);
  }

  private async writeSnapshotFile(snap: Snapshot): Promise<void> {
    // Runs in the WAL's writer loop: a lost lock fails the WAL there (fail-stop), before the file exists.
    await this.lock.verify();
    await this.snaps.save(snap);
    this.snapshotsWritten++;
  }

  private noteMarker(m: SnapshotMarker): void {
    this.recentMarkers.push(m);
    if (this.recentMarkers.length > this.keep)
      this.recentMarkers.splice(0, this.recentMarkers.length - this.keep);
  }

  /** Deletes WAL segments wholly behind the trailing window and snapshot files beyond the newest K. */
  private async compactBehind(snapIndex: number): Promise<void> {
    await this.wal.releaseTo(snapIndex - this.trailing);
    await this.wal.task(async () => {
      await this.snaps.retainOnly(this.recentMarkers);
    });
  }
}

/**
 * Picks the snapshot to start from: the newest one the WAL has a marker for. If its file is missing
 * or corrupt, an older snapshot is used only when the WAL still holds every entry between the two
 * (no leader snapshot replaced the log in between): then nothing is lost. Otherwise refuse to start.
 */
async function chooseSnapshot(
  state: WalState,
  snaps: SnapshotStore,
  warn: (m: string) => void,
): Promise<{ snap: Snapshot; marker: SnapshotMarker } | undefined> {
  const markers = state.markers;
  const newest = markers[markers.length - 1];
  if (!newest) return undefined;
  let firstErr: SnapshotCorruptionError;
  try {
    return { snap: await snaps.load(newest.index, newest.term), marker: newest };
  } catch (err) {
    if (!(err instanceof SnapshotCorruptionError)) throw err;
    firstErr = err;
  }
  for (let i = markers.length - 2; i >= 0; i--) {
    const m = markers[i]!;
    if (markers.slice(i + 1).some((x) => x.reset)) break; // a leader's snapshot voided the entries before it
    if (state.prevIndex > m.index || termIn(state, m.index) !== m.term) break; // the WAL no longer reaches back
    try {
      const snap = await snaps.load(m.index, m.term);
      let moved = '(missing)';
      try {
        moved = await snaps.quarantine(newest.index, newest.term);
      } catch (err) {
        if (errCode(err) !== 'ENOENT') throw err;
      }
      warn(
        `${firstErr.message}; using the older snapshot at index ${m.index} instead (the WAL holds every entry after it); ` +
          `the bad file was moved to ${moved}`,
      );
      return { snap, marker: m };
    } catch (err) {
      if (!(err instanceof SnapshotCorruptionError)) throw err;
    }
  }
  throw new SnapshotCorruptionError(
    firstErr.file,
    `${firstErr.detail}; no older valid snapshot that the WAL can bridge, refusing to start ` +
      '(restore this node from a peer: move the data dir aside and rejoin)',
  );
}

/**
 * A node that joined a running cluster (no bootstrap membership) and has no snapshot rebuilds its
 * membership from its conf entries alone; one without its resulting membership (written before WAL
 * format 4) would be applied to an empty membership and leave the node a majority of its own
 * (finding FS-2). Refuse to start rather than run on it.
 */
function refuseMembershipOfItsOwn(dir: string, state: WalState, hasSnapshot: boolean): void {
  if (hasSnapshot || state.tail.bootstrapConf.voters.length > 0) return;
  const bad = state.entries.find((e) => e.type === 'conf' && e.change.resulting === undefined);
  if (bad === undefined) return;
  throw new StorageConfigError(
    `data dir ${dir}: this node joined a running cluster (no bootstrap membership, no snapshot) and its log ` +
      `holds conf entry ${bad.index} without the membership it results in (written before WAL format 4); ` +
      'replaying it would give the node a membership of its own. Move the data directory aside and let the node rejoin.',
  );
}

/** Rebuilds the in-memory log: the snapshot, the trailing window behind it, and every entry after it. */
function buildMemory(
  state: WalState,
  snap: Snapshot | undefined,
  trailing: number,
  segments: string[],
): MemoryStorage {
  const first = segments[0] ?? 'wal';
  let mem: MemoryStorage;
  const s = snap?.metadata.index ?? 0;
  if (!snap) {
    if (state.prevIndex !== 0) {
      throw new WalCorruptionError(
        first,
        0,
        `the log starts at index ${state.prevIndex + 1} but there is no snapshot before it`,
      );
    }
    mem = new MemoryStorage(state.tail.bootstrapConf);
    mem.append(state.entries);
  } else {
    const md = snap.metadata;
    if (state.prevIndex > s) {
      throw new WalCorruptionError(
        first,
        0,
        `the oldest WAL segment starts after index ${state.prevIndex}, but the snapshot only covers up to ${s}: entries are missing`,
      );
    }
    const t = termIn(state, s);
    if (t !== undefined && t !== md.term) {
      throw new WalCorruptionError(
        first,
        0,
        `snapshot (${s}, term ${md.term}) disagrees with the WAL's entry ${s} (term ${t})`,
      );
    }
    // Oldest index we can keep: one whose term the WAL knows (the in-memory log needs it as its base).
    const lowest = state.prevTerm !== undefined ? state.prevIndex : state.prevIndex + 1;
    const c = Math.min(s, Math.max(s - trailing, lowest));
    mem = new MemoryStorage();
    if (c === s) {
      mem.applySnapshot(snap);
      mem.append(state.entries);
    } else {
      // Base the log at c (a placeholder snapshot), fill in the entries, then record the real snapshot.
      mem.applySnapshot({ metadata: { index: c, term: termIn(state, c)!, conf: md.conf }, data: EMPTY });
      mem.append(state.entries);
      mem.createSnapshot(s, md.conf, snap.data);
    }
  }
  const hs = state.tail.hardState;
  // A snapshot only ever holds committed state: its marker may be durable while the hard state
  // written after it was torn off, so the commit index is at least the snapshot's.
  const commit = Math.max(hs.commit, s);
  if (commit > mem.lastIndex()) {
    throw new WalCorruptionError(
      segments[segments.length - 1] ?? 'wal',
      0,
      `hard state commit ${commit} is beyond the last durable entry ${mem.lastIndex()}`,
    );
  }
  mem.setHardState({ term: hs.term, vote: hs.vote, commit });
  return mem;
}

/**
 * Returns why `entries` cannot follow a log ending at `last` with a snapshot at `snapIndex`, if so.
 * Exported for the in-memory twin (src/node/memory-seams.ts), which refuses the same saves.
 */
export function checkEntries(entries: readonly Entry[], last: number, snapIndex: number): string | undefined {
  const lo = entries[0]!.index;
  if (lo > last + 1) return `entries start at ${lo} but the log ends at ${last} (gap)`;
  if (lo <= snapIndex)
    return `entries start at ${lo}, at or below the snapshot index ${snapIndex} (committed entries cannot change)`;
  for (let i = 1; i < entries.length; i++) {
    if (entries[i]!.index !== entries[i - 1]!.index + 1) {
      return `entry indexes not consecutive: ${entries[i - 1]!.index} then ${entries[i]!.index}`;
    }
  }
  // Recovery refuses a conf entry it cannot decode, so never write one (the node would not restart).
  const isId = (n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n > 0;
  for (const e of entries) {
    if (e.type !== 'conf') continue;
    const c = e.change;
    if (!isId(c.nodeId)) return `conf entry ${e.index}: nodeId ${c.nodeId} is not a positive integer`;
    const r = c.resulting;
    if (
      r !== undefined &&
      !(Array.isArray(r.voters) && Array.isArray(r.learners) && [...r.voters, ...r.learners].every(isId))
    ) {
      return `conf entry ${e.index}: resulting membership must list voters and learners as positive integer node IDs`;
    }
  }
  return undefined;
}

function checkInt(name: string, v: number, min: number, max: number): void {
  if (!Number.isSafeInteger(v) || v < min || v > max) {
    throw new StorageConfigError(`${name} = ${v}; allowed: an integer from ${min} to ${max}`);
  }
}

function checkConf(c: ConfState): void {
  const ok = (ids: unknown) => Array.isArray(ids) && ids.every((n) => Number.isSafeInteger(n) && n > 0);
  if (!ok(c.voters) || !ok(c.learners)) {
    throw new StorageConfigError(
      'bootstrapConf must have voters and learners as lists of positive integer node IDs',
    );
  }
}

function sortedConf(c: ConfState): ConfState {
  return { voters: [...c.voters].sort((a, b) => a - b), learners: [...c.learners].sort((a, b) => a - b) };
}

/** Why a local snapshot at `index` cannot be taken (older than the current one, past the durable log or the commit). */
export function checkSnapshotIndex(
  index: number,
  current: number,
  lastIndex: number,
  commit: number,
): string | undefined {
  if (index < current) return `snapshot at index ${index} is older than the current snapshot (${current})`;
  if (index > lastIndex) return `cannot snapshot at ${index}: the durable log ends at ${lastIndex}`;
  if (index > commit)
    return `cannot snapshot at ${index}: only entries up to the commit index ${commit} may be snapshotted`;
  return undefined;
}
