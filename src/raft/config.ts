// RaftConfig with every default filled in and every range checked up front (sonyflake style):
// a bad config fails at construction with a message naming the field and its allowed range.

import { type NodeId, type RaftConfig, RaftConfigError, type RandomInt } from './types.js';

export interface ResolvedConfig {
  id: NodeId;
  electionTicks: number;
  heartbeatTicks: number;
  random: RandomInt;
  preVote: boolean;
  checkQuorum: boolean;
  leaderLease: boolean;
  leasePromise: boolean;
  soleVoterSkipsPromise: boolean;
  clockDriftBound: number;
  leaseMarginTicks: number;
  maxInflightMessages: number;
  maxInflightBytes: number;
  maxMessageBytes: number;
  maxEntriesPerMessage: number;
  maxUncommittedBytes: number;
  maxCommittedEntriesPerReady: number;
  applied: number | undefined;
}

export const DEFAULTS = {
  preVote: true,
  checkQuorum: true,
  leaderLease: false,
  clockDriftBound: 0.1,
  maxInflightMessages: 256,
  maxInflightBytes: 8 * 1024 * 1024,
  maxMessageBytes: 1024 * 1024,
  maxEntriesPerMessage: 4096,
  maxUncommittedBytes: 64 * 1024 * 1024,
  maxCommittedEntriesPerReady: 4096,
} as const;

function positiveInt(name: string, v: number, min = 1): number {
  if (!Number.isSafeInteger(v) || v < min) {
    throw new RaftConfigError(`${name} must be an integer >= ${min}, got ${v}`);
  }
  return v;
}

/**
 * The smallest safe lease margin for a drift bound ε (every member's tick period within
 * (1 ± ε) × nominal; see docs/decisions/0001-raft-core.md §5).
 *
 * A quorum echoed a message the leader sent at its tick T. Each of those voters refuses votes
 * until electionTicks of its own ticks have passed since it received the message: at least
 * (E − 1) of its periods after T in real time (its first tick may come at once). The leader
 * believes its lease until its tick T + (E − M), i.e. for (E − M) of its own periods. With the
 * leader at the slowest rate and a voter at the fastest, the lease is safe when
 *   (E − M)(1 + ε) ≤ (E − 1)(1 − ε),  i.e.  M ≥ E − ⌊(E − 1)(1 − ε) / (1 + ε)⌋.
 * Returns electionTicks when no lease at all is safe.
 */
export function leaseMarginFor(electionTicks: number, drift: number): number {
  const budget = (electionTicks - 1) * (1 - drift);
  // floor((E-1)(1-ε)/(1+ε)), settled by the inequality itself so rounding cannot overstate it.
  let leaseTicks = Math.floor(budget / (1 + drift));
  while (leaseTicks > 0 && leaseTicks * (1 + drift) > budget) leaseTicks--;
  while ((leaseTicks + 1) * (1 + drift) <= budget) leaseTicks++;
  return electionTicks - Math.max(0, leaseTicks);
}

export function resolveConfig(c: RaftConfig): ResolvedConfig {
  positiveInt('id', c.id);
  positiveInt('heartbeatTicks', c.heartbeatTicks);
  positiveInt('electionTicks', c.electionTicks, 2);
  if (c.electionTicks <= c.heartbeatTicks) {
    throw new RaftConfigError(
      `electionTicks (${c.electionTicks}) must be greater than heartbeatTicks (${c.heartbeatTicks})`,
    );
  }
  if (typeof c.random !== 'function') throw new RaftConfigError('random must be a function (n) => [0, n)');
  const checkQuorum = c.checkQuorum ?? DEFAULTS.checkQuorum;
  const leaderLease = c.leaderLease ?? DEFAULTS.leaderLease;
  if (leaderLease && !checkQuorum) {
    throw new RaftConfigError(
      'leaderLease requires checkQuorum (followers must refuse votes while in lease)',
    );
  }
  // A node that uses its lease keeps the promise too: it is a follower of other leaders in other terms.
  const leasePromise = leaderLease || (c.leasePromise ?? false);
  if (leasePromise && !checkQuorum) {
    throw new RaftConfigError(
      'leasePromise requires checkQuorum (followers must refuse votes while in lease)',
    );
  }
  const clockDriftBound = c.clockDriftBound ?? DEFAULTS.clockDriftBound;
  if (!(clockDriftBound >= 0 && clockDriftBound < 0.5)) {
    throw new RaftConfigError(`clockDriftBound must be a number in [0, 0.5), got ${clockDriftBound}`);
  }
  const derived = leaseMarginFor(c.electionTicks, clockDriftBound);
  if (leaderLease && c.leaseMarginTicks === undefined && derived >= c.electionTicks) {
    throw new RaftConfigError(
      `electionTicks ${c.electionTicks} leaves no safe leader lease with clockDriftBound ${clockDriftBound}; raise electionTicks`,
    );
  }
  // Without leaderLease the margin is never used; keep it in range.
  const leaseMarginTicks = c.leaseMarginTicks ?? Math.min(derived, c.electionTicks - 1);
  if (
    !Number.isSafeInteger(leaseMarginTicks) ||
    leaseMarginTicks < 0 ||
    leaseMarginTicks >= c.electionTicks
  ) {
    throw new RaftConfigError(
      `leaseMarginTicks must be an integer in [0, ${c.electionTicks - 1}], got ${leaseMarginTicks}`,
    );
  }
  if (c.applied !== undefined) positiveInt('applied', c.applied, 0);
  return {
    id: c.id,
    electionTicks: c.electionTicks,
    heartbeatTicks: c.heartbeatTicks,
    random: c.random,
    preVote: c.preVote ?? DEFAULTS.preVote,
    checkQuorum,
    leaderLease,
    leasePromise,
    soleVoterSkipsPromise: c.soleVoterSkipsPromise ?? false,
    clockDriftBound,
    leaseMarginTicks,
    maxInflightMessages: positiveInt(
      'maxInflightMessages',
      c.maxInflightMessages ?? DEFAULTS.maxInflightMessages,
    ),
    maxInflightBytes: positiveInt('maxInflightBytes', c.maxInflightBytes ?? DEFAULTS.maxInflightBytes),
    maxMessageBytes: positiveInt('maxMessageBytes', c.maxMessageBytes ?? DEFAULTS.maxMessageBytes),
    maxEntriesPerMessage: positiveInt(
      'maxEntriesPerMessage',
      c.maxEntriesPerMessage ?? DEFAULTS.maxEntriesPerMessage,
    ),
    maxUncommittedBytes: positiveInt(
      'maxUncommittedBytes',
      c.maxUncommittedBytes ?? DEFAULTS.maxUncommittedBytes,
    ),
    maxCommittedEntriesPerReady: positiveInt(
      'maxCommittedEntriesPerReady',
      c.maxCommittedEntriesPerReady ?? DEFAULTS.maxCommittedEntriesPerReady,
    ),
    applied: c.applied,
  };
}
