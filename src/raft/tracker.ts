// Membership (voters, learners), per-member replication progress and the votes of the current
// election. The leader uses the progress; every role uses the membership.

import { Progress } from './progress.js';
import { majority, majorityValue, type VoteResult, voteResult } from './quorum.js';
import type { ConfState, NodeId } from './types.js';

export class ProgressTracker {
  readonly voters = new Set<NodeId>();
  readonly learners = new Set<NodeId>();
  readonly progress = new Map<NodeId, Progress>();
  readonly votes = new Map<NodeId, boolean>();
  private readonly scratch: number[] = [];
  private readonly matchOf = (id: NodeId): number => this.progress.get(id)?.match ?? 0;

  constructor(
    private readonly maxInflight: number,
    private readonly maxInflightBytes: number,
  ) {}

  /** Replaces the membership (restart, snapshot restore). Progress of kept members is reset. */
  setConf(conf: ConfState, lastIndex: number): void {
    this.voters.clear();
    this.learners.clear();
    this.progress.clear();
    for (const id of conf.voters) this.addVoter(id, lastIndex);
    for (const id of conf.learners) this.addLearner(id, lastIndex);
  }

  confState(): ConfState {
    return {
      voters: [...this.voters].sort((a, b) => a - b),
      learners: [...this.learners].sort((a, b) => a - b),
    };
  }

  /** Adds a voter or promotes a learner. */
  addVoter(id: NodeId, lastIndex: number): void {
    this.learners.delete(id);
    this.voters.add(id);
    this.ensureProgress(id, lastIndex).isLearner = false;
  }

  /** Adds a learner or demotes a voter. */
  addLearner(id: NodeId, lastIndex: number): void {
    this.voters.delete(id);
    this.learners.add(id);
    this.ensureProgress(id, lastIndex).isLearner = true;
  }

  /** Installs a whole membership, keeping the progress of members that stay. */
  applyConf(conf: ConfState, lastIndex: number): void {
    const keep = new Set<NodeId>([...conf.voters, ...conf.learners]);
    for (const id of [...this.voters, ...this.learners]) if (!keep.has(id)) this.remove(id);
    for (const id of conf.voters) this.addVoter(id, lastIndex);
    for (const id of conf.learners) this.addLearner(id, lastIndex);
  }

  remove(id: NodeId): void {
    this.voters.delete(id);
    this.learners.delete(id);
    this.progress.delete(id);
  }

  isMember(id: NodeId): boolean {
    return this.voters.has(id) || this.learners.has(id);
  }

  private ensureProgress(id: NodeId, lastIndex: number): Progress {
    let pr = this.progress.get(id);
    if (pr === undefined) {
      pr = new Progress(lastIndex + 1, this.maxInflight, this.maxInflightBytes, false);
      // A new member is presumed alive so that a snapshot can be sent to it right away.
      pr.recentActive = true;
      this.progress.set(id, pr);
    }
    return pr;
  }

  resetProgress(lastIndex: number): void {
    for (const pr of this.progress.values()) pr.reset(lastIndex + 1);
  }

  /** Highest index replicated on a majority of voters. */
  committedIndex(): number {
    return majorityValue(this.voters, this.matchOf, 0, this.scratch);
  }

  /**
   * Highest leader send-tick that a majority of voters has echoed back (`self` counts as `now`).
   * -Infinity when no quorum has acknowledged anything this term.
   */
  quorumAckedSentTick(self: NodeId, now: number): number {
    return majorityValue(
      this.voters,
      (id) => (id === self ? now : (this.progress.get(id)?.ackedSentTick ?? Number.NEGATIVE_INFINITY)),
      Number.NEGATIVE_INFINITY,
      this.scratch,
    );
  }

  isSingleton(self: NodeId): boolean {
    return this.voters.size === 1 && this.voters.has(self);
  }

  resetVotes(): void {
    this.votes.clear();
  }

  recordVote(id: NodeId, granted: boolean): void {
    if (!this.votes.has(id)) this.votes.set(id, granted);
  }

  tallyVotes(): VoteResult {
    return voteResult(this.voters, this.votes);
  }

  /** Whether a majority of voters has been heard from recently (the leader counts itself). */
  quorumActive(self: NodeId): boolean {
    let active = 0;
    for (const id of this.voters) {
      if (id === self || this.progress.get(id)?.recentActive) active++;
    }
    return active >= majority(this.voters.size);
  }

  /** Whether the set of acknowledging ids contains a majority of voters. */
  hasQuorum(acks: ReadonlySet<NodeId>): boolean {
    let n = 0;
    for (const id of this.voters) if (acks.has(id)) n++;
    return n >= majority(this.voters.size);
  }
}
