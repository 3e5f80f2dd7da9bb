import type { NodeId } from '../raft/types.js';

/** Where the leader can be reached, as far as this node knows. */
export interface LeaderHint {
  id: NodeId;
  peerAddr?: string;
  httpAddr?: string;
  respAddr?: string;
}

/** A write (or linearizable read) reached a node that is not the leader. Fails fast, never queues. */
export class NotLeaderError extends Error {
  readonly leader: LeaderHint | undefined;
  constructor(self: NodeId, leader: LeaderHint | undefined) {
    super(
      leader
        ? `node ${self} is not the leader; the leader is node ${leader.id}${leader.httpAddr ? ` at ${leader.httpAddr}` : ''}`
        : `node ${self} is not the leader and no leader is known (election in progress?)`,
    );
    this.name = 'NotLeaderError';
    this.leader = leader;
  }
}

/** Why a proposal's outcome is unknown. */
export type OutcomeUnknownReason = 'timeout' | 'leadershipLost' | 'stopped' | 'snapshot';

/**
 * The proposal is in a log but this node can no longer see whether it commits: it may still
 * commit (and be applied) later, or never. Retry only with an idempotent command (e.g. the same
 * requestId); answer the client "outcome unknown", never success or a definite failure.
 */
export class ProposalOutcomeUnknownError extends Error {
  readonly reason: OutcomeUnknownReason;
  constructor(reason: OutcomeUnknownReason, detail: string) {
    super(`${detail}; the proposal's outcome is unknown (it may still commit)`);
    this.name = 'ProposalOutcomeUnknownError';
    this.reason = reason;
  }
}

/** The proposal was not applied in time: its outcome is unknown (see ProposalOutcomeUnknownError). */
export class ProposalTimeoutError extends ProposalOutcomeUnknownError {
  constructor(timeoutMs: number) {
    super('timeout', `proposal not applied within ${timeoutMs} ms`);
    this.name = 'ProposalTimeoutError';
  }
}

/**
 * The proposal definitely did not commit: another entry committed at its index (its leader lost
 * the term it was proposed in). Nothing was applied for it, so retrying is always safe.
 */
export class ProposalNotCommittedError extends Error {
  readonly term: number;
  readonly index: number;
  constructor(term: number, index: number, committedTerm: number) {
    super(
      `proposal at index ${index} (term ${term}) was not committed: the entry committed there is from term ${committedTerm}; retry`,
    );
    this.name = 'ProposalNotCommittedError';
    this.term = term;
    this.index = index;
  }
}

export class ReadTimeoutError extends Error {
  constructor(timeoutMs: number) {
    super(`linearizable read not confirmed within ${timeoutMs} ms (no quorum reachable?)`);
    this.name = 'ReadTimeoutError';
  }
}

export class NodeStoppedError extends Error {
  constructor(reason: string) {
    super(`node stopped: ${reason}`);
    this.name = 'NodeStoppedError';
  }
}

/** Too many proposals are waiting to commit; back off and retry. Keeps memory bounded. */
export class OverloadedError extends Error {
  constructor(limit: number) {
    super(`too many pending proposals (limit ${limit}); retry later`);
    this.name = 'OverloadedError';
  }
}

/**
 * `addMember` added the member as a learner but did not promote it: it has not acknowledged the
 * leader's log up to the commit index of when the promotion was asked for, or it is not answering.
 * It stays a learner (it holds no vote); start it or repair its link and call `addMember` again,
 * or remove it.
 */
export class MemberNotCaughtUpError extends Error {
  readonly memberId: number;
  constructor(memberId: number, detail: string) {
    super(`member ${memberId} stays a learner: ${detail}`);
    this.name = 'MemberNotCaughtUpError';
    this.memberId = memberId;
  }
}

/**
 * The strict reconfiguration check refused `removeMember` (like etcd's `--strict-reconfig-check`):
 * after the removal, fewer than a quorum of the voters that would remain are known to be active
 * (the leader itself, and voters that answered the leader within the last election timeout), so
 * the cluster could not elect a leader or commit anything until one of them came back. Nothing was
 * proposed. Start or repair the inactive voters first, remove an inactive voter instead, or pass
 * `force` if they are known to come back.
 */
export class UnsafeRemovalError extends Error {
  readonly memberId: number;
  /** The voters the removal would leave. */
  readonly remaining: readonly number[];
  /** Those of `remaining` known to be active. */
  readonly active: readonly number[];
  /** How many of `remaining` a quorum needs. */
  readonly quorum: number;
  constructor(memberId: number, remaining: readonly number[], active: readonly number[], quorum: number) {
    const inactive = remaining.filter((id) => !active.includes(id));
    super(
      `removing voter ${memberId} would leave voters [${remaining.join(', ')}], of which ${active.length} ` +
        `${active.length === 1 ? 'is' : 'are'} known active ([${active.join(', ')}]; not answering the leader: ` +
        `[${inactive.join(', ')}]), and a quorum of them needs ${quorum}: the cluster could not elect a leader or ` +
        'commit until enough of them answer again. Start or repair the inactive voters first, or remove an ' +
        'inactive one instead; force the removal only if they are known to come back',
    );
    this.name = 'UnsafeRemovalError';
    this.memberId = memberId;
    this.remaining = remaining;
    this.active = active;
    this.quorum = quorum;
  }
}
