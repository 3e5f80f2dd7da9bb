// The log as the core sees it: the caller's durable Storage followed by the unstable tail, plus the
// commit and applied indexes.
//
//   storage:  [snapshot] [firstIndex ... unstable.offset - 1]
//   unstable:                              [unstable.offset ... lastIndex]
//   committed <= lastIndex;  applied <= committed

import { UnstableLog } from './log-unstable.js';
import { CompactedError, type Entry, type Snapshot, type Storage, UnavailableError } from './types.js';

/** Bytes an entry counts for in message-size, flow-control and uncommitted-size limits. */
export function payloadSize(e: Entry): number {
  return e.type === 'normal' ? e.data.length : 16 + (e.change.context?.length ?? 0);
}

/** Keeps the longest prefix of ents within maxBytes, but always at least one entry. */
export function limitSize(ents: Entry[], maxBytes: number): Entry[] {
  if (ents.length <= 1) return ents;
  let size = payloadSize(ents[0] as Entry);
  for (let i = 1; i < ents.length; i++) {
    size += payloadSize(ents[i] as Entry);
    if (size > maxBytes) return ents.slice(0, i);
  }
  return ents;
}

export class RaftLog {
  readonly storage: Storage;
  readonly unstable: UnstableLog;
  committed: number;
  applied: number;

  constructor(storage: Storage) {
    this.storage = storage;
    const first = storage.firstIndex();
    const last = storage.lastIndex();
    this.unstable = new UnstableLog(last + 1);
    // Everything up to the snapshot is committed and applied by definition.
    this.committed = first - 1;
    this.applied = first - 1;
  }

  firstIndex(): number {
    return this.unstable.maybeFirstIndex() ?? this.storage.firstIndex();
  }

  lastIndex(): number {
    return this.unstable.maybeLastIndex() ?? this.storage.lastIndex();
  }

  /** Term of entry i, or undefined when i is compacted away or beyond the last index. */
  termAt(i: number): number | undefined {
    const t = this.unstable.maybeTerm(i);
    if (t !== undefined) return t;
    const dummy = this.firstIndex() - 1;
    if (i < dummy || i > this.lastIndex()) return undefined;
    // i is below the unstable offset: storage knows it (or i is the dummy/snapshot index).
    try {
      return this.storage.term(i);
    } catch (err) {
      if (err instanceof CompactedError || err instanceof UnavailableError) return undefined;
      throw err;
    }
  }

  lastTerm(): number {
    const t = this.termAt(this.lastIndex());
    if (t === undefined) throw new Error(`raft: term of last index ${this.lastIndex()} is unknown`);
    return t;
  }

  matchTerm(i: number, t: number): boolean {
    return this.termAt(i) === t;
  }

  /** Raft §5.4.1: is a log ending at (lastIndex, lastTerm) at least as up-to-date as ours? */
  isUpToDate(lastIndex: number, lastTerm: number): boolean {
    const ourTerm = this.lastTerm();
    return lastTerm > ourTerm || (lastTerm === ourTerm && lastIndex >= this.lastIndex());
  }

  /** Index of the first entry of ents that is missing or conflicts with our log; 0 if none. */
  findConflict(ents: readonly Entry[]): number {
    for (let i = 0; i < ents.length; i++) {
      const e = ents[i] as Entry;
      if (!this.matchTerm(e.index, e.term)) return e.index;
    }
    return 0;
  }

  /**
   * The largest index <= `index` whose term is <= `term`, with that term. Used on both sides of a
   * rejected append to skip, in one round trip, every index that cannot possibly match.
   * Returns [index, 0] when the term is unknown (compacted).
   */
  findConflictByTerm(index: number, term: number): [number, number] {
    for (; index > 0; index--) {
      const t = this.termAt(index);
      if (t === undefined) return [index, 0];
      if (t <= term) return [index, t];
    }
    return [0, 0];
  }

  /**
   * Follower side of AppendEntries: if our log holds (index, logTerm), append ents (truncating any
   * conflicting suffix) and advance commit. Returns the index of the last new entry, or -1 on mismatch.
   */
  maybeAppend(index: number, logTerm: number, committed: number, ents: readonly Entry[]): number {
    if (!this.matchTerm(index, logTerm)) return -1;
    const lastNew = index + ents.length;
    const ci = this.findConflict(ents);
    if (ci !== 0) {
      if (ci <= this.committed) {
        throw new Error(`raft: entry ${ci} conflicts with a committed entry (committed ${this.committed})`);
      }
      const from = ci - (index + 1);
      this.append(from === 0 ? ents : ents.slice(from));
    }
    this.commitTo(Math.min(committed, lastNew));
    return lastNew;
  }

  append(ents: readonly Entry[]): number {
    if (ents.length === 0) return this.lastIndex();
    const after = (ents[0] as Entry).index - 1;
    if (after < this.committed) {
      throw new Error(`raft: appending after ${after} would overwrite committed entries (${this.committed})`);
    }
    this.unstable.truncateAndAppend(ents);
    return this.lastIndex();
  }

  commitTo(index: number): void {
    if (index <= this.committed) return;
    if (index > this.lastIndex()) {
      throw new Error(
        `raft: commit ${index} is beyond the last index ${this.lastIndex()} (was the log lost or truncated?)`,
      );
    }
    this.committed = index;
  }

  /** Commits up to maxIndex if that entry is from `term` (Raft §5.4.2). */
  maybeCommit(maxIndex: number, term: number): boolean {
    if (maxIndex > this.committed && this.termAt(maxIndex) === term) {
      this.committed = maxIndex;
      return true;
    }
    return false;
  }

  appliedTo(index: number): void {
    if (index === 0 || index <= this.applied) return;
    if (index > this.committed) {
      throw new Error(`raft: applied ${index} is beyond committed ${this.committed}`);
    }
    this.applied = index;
  }

  /** Last index that is in storage and not superseded by the unstable part. */
  stableIndex(): number {
    return this.unstable.snapshot === undefined ? this.unstable.offset - 1 : 0;
  }

  /** Committed entries can be applied only once persisted locally and after any pending snapshot. */
  private maxApplicable(): number {
    if (this.unstable.snapshot !== undefined) return this.applied;
    return Math.min(this.committed, this.unstable.offset - 1);
  }

  hasNextCommittedEntries(): boolean {
    return this.maxApplicable() > this.applied;
  }

  nextCommittedEntries(maxCount: number): Entry[] {
    const hi = this.maxApplicable();
    if (hi <= this.applied) return [];
    const lo = this.applied + 1;
    return this.slice(lo, Math.min(hi + 1, lo + maxCount), Number.POSITIVE_INFINITY);
  }

  /** Entries in [lo, hi), at most maxBytes of payload (at least one entry). */
  slice(lo: number, hi: number, maxBytes: number): Entry[] {
    if (lo < this.firstIndex()) throw new CompactedError(lo);
    if (hi > this.lastIndex() + 1) throw new UnavailableError(hi - 1);
    if (lo >= hi) return [];
    const off = this.unstable.offset;
    if (lo >= off) return limitSize(this.unstable.slice(lo, hi), maxBytes);
    const storedHi = Math.min(hi, off);
    const stored = this.storage.entries(lo, storedHi, maxBytes);
    if (stored.length < storedHi - lo || hi <= off) return stored;
    const rest = this.unstable.slice(off, hi);
    for (let i = 0; i < rest.length; i++) stored.push(rest[i] as Entry);
    return limitSize(stored, maxBytes);
  }

  /** Every entry from i to the end, limited by size. */
  entriesFrom(i: number, maxBytes: number, maxCount: number): Entry[] {
    const last = this.lastIndex();
    if (i > last) return [];
    return this.slice(i, Math.min(last + 1, i + maxCount), maxBytes);
  }

  snapshot(): Snapshot {
    return this.unstable.snapshot ?? this.storage.snapshot();
  }

  restore(s: Snapshot): void {
    this.committed = s.metadata.index;
    this.unstable.restore(s);
  }
}
