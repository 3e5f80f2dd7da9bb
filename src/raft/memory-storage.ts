// Storage kept in memory: for tests, the simulator (which keeps a "durable" clone per node) and
// benchmarks. Layout follows etcd: ents[0] is a dummy entry standing for the snapshot (its index and
// term are the snapshot's), real entries follow contiguously.

import { limitSize } from './raft-log.js';
import {
  CompactedError,
  type ConfState,
  type Entry,
  type HardState,
  type Snapshot,
  SnapshotOutOfDateError,
  type Storage,
  UnavailableError,
} from './types.js';

const EMPTY = new Uint8Array(0);

export class MemoryStorage implements Storage {
  private hard: HardState = { term: 0, vote: 0, commit: 0 };
  private snap: Snapshot;
  /** ents[0] is the dummy at the snapshot index; ents[i].index === ents[0].index + i. */
  private ents: Entry[];

  /**
   * @param conf membership of a brand-new cluster (every founding member starts with the same one);
   *   omit it for a node that will join an existing cluster and learn everything from a snapshot.
   */
  constructor(conf: ConfState = { voters: [], learners: [] }) {
    this.snap = {
      metadata: { index: 0, term: 0, conf: { voters: [...conf.voters], learners: [...conf.learners] } },
      data: EMPTY,
    };
    this.ents = [dummy(0, 0)];
  }

  initialState(): { hardState: HardState; conf: ConfState } {
    return { hardState: { ...this.hard }, conf: cloneConf(this.snap.metadata.conf) };
  }

  setHardState(hs: HardState): void {
    this.hard = { term: hs.term, vote: hs.vote, commit: hs.commit };
  }

  hardState(): HardState {
    return { ...this.hard };
  }

  private get offset(): number {
    return (this.ents[0] as Entry).index;
  }

  entries(lo: number, hi: number, maxBytes = Number.POSITIVE_INFINITY): Entry[] {
    const off = this.offset;
    if (lo <= off) throw new CompactedError(lo);
    if (hi > this.lastIndex() + 1) throw new UnavailableError(hi - 1);
    if (lo >= hi) return [];
    return limitSize(this.ents.slice(lo - off, hi - off), maxBytes);
  }

  term(i: number): number {
    const off = this.offset;
    if (i < off) throw new CompactedError(i);
    const e = this.ents[i - off];
    if (e === undefined) throw new UnavailableError(i);
    return e.term;
  }

  firstIndex(): number {
    return this.offset + 1;
  }

  lastIndex(): number {
    return this.offset + this.ents.length - 1;
  }

  snapshot(): Snapshot {
    return this.snap;
  }

  /** Appends entries, overwriting any conflicting suffix; entries already compacted are skipped. */
  append(entries: readonly Entry[]): void {
    if (entries.length === 0) return;
    const first = this.firstIndex();
    const lastNew = (entries[entries.length - 1] as Entry).index;
    if (lastNew < first) return;
    let from = 0;
    if ((entries[0] as Entry).index < first) from = first - (entries[0] as Entry).index;
    const start = (entries[from] as Entry).index;
    const pos = start - this.offset;
    if (pos > this.ents.length) {
      throw new Error(
        `raft: storage append leaves a gap (last index ${this.lastIndex()}, appending ${start})`,
      );
    }
    if (pos < this.ents.length) this.ents.length = pos; // truncate the conflicting suffix
    for (let i = from; i < entries.length; i++) this.ents.push(entries[i] as Entry);
  }

  /** Replaces the whole log with a snapshot (a follower installing one from the leader). */
  applySnapshot(snap: Snapshot): void {
    const cur = this.snap.metadata.index;
    if (snap.metadata.index < cur) throw new SnapshotOutOfDateError(snap.metadata.index, cur);
    this.snap = snap;
    this.ents = [dummy(snap.metadata.index, snap.metadata.term)];
  }

  /**
   * Records a snapshot of the application state as of `index` (which must be applied, hence in the
   * log). Entries are kept: call compact() to drop the ones the snapshot covers.
   */
  createSnapshot(index: number, conf: ConfState, data: Uint8Array): Snapshot {
    const cur = this.snap.metadata.index;
    if (index < cur) throw new SnapshotOutOfDateError(index, cur);
    if (index > this.lastIndex()) {
      throw new UnavailableError(index);
    }
    const term = index === this.offset ? (this.ents[0] as Entry).term : this.term(index);
    this.snap = { metadata: { index, term, conf: cloneConf(conf) }, data };
    return this.snap;
  }

  /**
   * Discards entries <= index. The current snapshot must cover index (so a lagging follower can always
   * be sent the snapshot instead); compacting what is already compacted is a no-op.
   */
  compact(index: number): void {
    const off = this.offset;
    if (index <= off) return;
    if (index > this.snap.metadata.index) {
      throw new RangeError(
        `raft: cannot compact to ${index}: the snapshot only covers up to ${this.snap.metadata.index}`,
      );
    }
    const e = this.ents[index - off] as Entry;
    const rest = this.ents.slice(index - off + 1);
    rest.unshift(dummy(index, e.term));
    this.ents = rest;
  }

  clone(): MemoryStorage {
    const c = new MemoryStorage();
    c.hard = { ...this.hard };
    c.snap = this.snap;
    c.ents = this.ents.slice();
    return c;
  }
}

function dummy(index: number, term: number): Entry {
  return { type: 'normal', index, term, data: EMPTY };
}

function cloneConf(c: ConfState): ConfState {
  return { voters: [...c.voters], learners: [...c.learners] };
}
