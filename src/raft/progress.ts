// The leader's view of one follower: how much of the log it is known to hold (match), what to send
// next (next), and how aggressively to send it (state).
//
//  probe     — we do not know where the follower's log ends; send one append per heartbeat interval
//              and wait for the answer before sending more.
//  replicate — the follower is keeping up; stream appends optimistically (next moves ahead of match)
//              bounded by the in-flight window.
//  snapshot  — the entries the follower needs are compacted; a snapshot is on its way; send nothing
//              until the caller reports it (reportSnapshot) or the follower acknowledges it.

import { Inflights } from './inflights.js';

export type ProgressState = 'probe' | 'replicate' | 'snapshot';

export class Progress {
  match = 0;
  next: number;
  state: ProgressState = 'probe';
  /** Index of the snapshot in flight (snapshot state only). */
  pendingSnapshot = 0;
  /** Heard from this member since the last check-quorum round (also gates sending snapshots). */
  recentActive = false;
  /** Probe state: an append is out and unanswered; wait for its answer or the next heartbeat response. */
  probeSent = false;
  isLearner: boolean;
  readonly inflights: Inflights;
  /** Latest leader send-tick this member echoed back (leader lease); -Infinity when none this term. */
  ackedSentTick = Number.NEGATIVE_INFINITY;

  constructor(next: number, maxInflight: number, maxInflightBytes: number, isLearner: boolean) {
    this.next = next;
    this.isLearner = isLearner;
    this.inflights = new Inflights(maxInflight, maxInflightBytes);
  }

  /** Forget everything learnt about the follower (a new term or a new leader). */
  reset(next: number): void {
    this.match = 0;
    this.next = next;
    this.state = 'probe';
    this.pendingSnapshot = 0;
    this.recentActive = false;
    this.probeSent = false;
    this.inflights.reset();
    this.ackedSentTick = Number.NEGATIVE_INFINITY;
  }

  becomeProbe(): void {
    // After a snapshot, the follower has at least the snapshot: resume right after it.
    if (this.state === 'snapshot') {
      this.next = Math.max(this.match + 1, this.pendingSnapshot + 1);
    } else {
      this.next = this.match + 1;
    }
    this.state = 'probe';
    this.pendingSnapshot = 0;
    this.probeSent = false;
    this.inflights.reset();
  }

  becomeReplicate(): void {
    this.state = 'replicate';
    this.next = this.match + 1;
    this.pendingSnapshot = 0;
    this.probeSent = false;
    this.inflights.reset();
  }

  becomeSnapshot(snapshotIndex: number): void {
    this.state = 'snapshot';
    this.pendingSnapshot = snapshotIndex;
    this.probeSent = false;
    this.inflights.reset();
  }

  /** The follower acknowledged entries up to n. Returns whether match moved forward. */
  maybeUpdate(n: number): boolean {
    let updated = false;
    if (this.match < n) {
      this.match = n;
      updated = true;
      this.probeSent = false;
    }
    if (this.next < n + 1) this.next = n + 1;
    return updated;
  }

  /**
   * The follower rejected an append anchored at `rejected`; `matchHint` is the leader's best guess of
   * the last index where the logs agree. Returns false when the rejection is stale (out of order).
   */
  maybeDecrTo(rejected: number, matchHint: number): boolean {
    if (this.state === 'replicate') {
      // A rejection for something already known to match is a delayed duplicate.
      if (rejected <= this.match) return false;
      this.next = this.match + 1;
      return true;
    }
    // In probe state only the latest probe (at next - 1) is meaningful.
    if (this.next - 1 !== rejected) return false;
    this.next = Math.max(Math.min(rejected, matchHint + 1), this.match + 1);
    this.probeSent = false;
    return true;
  }

  /** Bookkeeping after sending an append whose last entry is `lastIndex` (entries > 0) or an empty one. */
  sentAppend(entries: number, lastIndex: number, bytes: number): void {
    if (this.state === 'replicate') {
      if (entries > 0) {
        this.next = lastIndex + 1;
        this.inflights.add(lastIndex, bytes);
      }
    } else if (this.state === 'probe') {
      this.probeSent = true;
    }
  }

  isPaused(): boolean {
    switch (this.state) {
      case 'probe':
        return this.probeSent;
      case 'replicate':
        return this.inflights.full();
      case 'snapshot':
        return true;
    }
  }
}
