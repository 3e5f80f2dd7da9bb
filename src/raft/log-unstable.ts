// Entries (and at most one snapshot) that the core holds but the caller has not yet persisted.
// They leave this structure when the caller calls advance() for the Ready that carried them.
//
// Invariant: entries[i].index === offset + i, and, when a snapshot is held, offset === snapshot index + 1.

import type { Entry, Snapshot } from './types.js';

export class UnstableLog {
  snapshot: Snapshot | undefined;
  entries: Entry[] = [];
  /** Index of entries[0] (or where it would be). Everything below is in storage (or the snapshot). */
  offset: number;

  constructor(offset: number) {
    this.offset = offset;
  }

  /** First index known only from the unstable snapshot, if any. */
  maybeFirstIndex(): number | undefined {
    return this.snapshot === undefined ? undefined : this.snapshot.metadata.index + 1;
  }

  maybeLastIndex(): number | undefined {
    if (this.entries.length > 0) return this.offset + this.entries.length - 1;
    return this.snapshot === undefined ? undefined : this.snapshot.metadata.index;
  }

  /** Term of index i if this structure knows it. */
  maybeTerm(i: number): number | undefined {
    if (i < this.offset) {
      const s = this.snapshot;
      return s !== undefined && s.metadata.index === i ? s.metadata.term : undefined;
    }
    const e = this.entries[i - this.offset];
    return e === undefined ? undefined : e.term;
  }

  /** The caller persisted entries up to (i, t): drop them, unless they were replaced meanwhile. */
  stableTo(i: number, t: number): void {
    if (i < this.offset) return;
    const e = this.entries[i - this.offset];
    if (e === undefined || e.term !== t) return;
    const n = i + 1 - this.offset;
    this.entries = n === this.entries.length ? [] : this.entries.slice(n);
    this.offset = i + 1;
  }

  stableSnapTo(i: number): void {
    if (this.snapshot !== undefined && this.snapshot.metadata.index === i) this.snapshot = undefined;
  }

  restore(s: Snapshot): void {
    this.offset = s.metadata.index + 1;
    this.entries = [];
    this.snapshot = s;
  }

  /** Appends ents (contiguous, non-empty), first truncating whatever they overwrite. */
  truncateAndAppend(ents: readonly Entry[]): void {
    const first = (ents[0] as Entry).index;
    const end = this.offset + this.entries.length;
    if (first === end) {
      // The common case: a plain append. Push, never copy the whole array.
      for (let i = 0; i < ents.length; i++) this.entries.push(ents[i] as Entry);
    } else if (first <= this.offset) {
      // Replaces everything unstable (and moves back into what storage holds; the caller overwrites).
      this.offset = first;
      this.entries = ents.slice();
    } else {
      // Truncate to first - 1, then append.
      this.entries = this.entries.slice(0, first - this.offset);
      for (let i = 0; i < ents.length; i++) this.entries.push(ents[i] as Entry);
    }
  }

  /** Entries in [lo, hi); both must be within [offset, offset + entries.length]. */
  slice(lo: number, hi: number): Entry[] {
    return this.entries.slice(lo - this.offset, hi - this.offset);
  }
}
