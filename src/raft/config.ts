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
  const leaseMarginTicks = c.leaseMarginTicks ?? Math.max(1, Math.floor(c.electionTicks / 5));
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
