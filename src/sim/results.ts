// What a run reports: the first safety violation (if any), the liveness verdict, counters, the
// trace digest and tail, and the replay command.

import type { NodeId } from '../raft/types.js';
import type { Invariant } from './checker.js';
import type { BugName } from './options.js';

export interface SafetyFailure {
  invariant: Invariant;
  message: string;
  node?: NodeId;
  term?: number;
  index?: number;
  atUs: number;
  event: number;
}

export interface LivenessOutcome {
  /** True when the cluster recovered within the budget (or the run stopped on a safety violation first). */
  ok: boolean;
  /** Virtual time from healing to recovery. */
  recoveredAfterUs?: number;
  /** Why the cluster was not live by the deadline. */
  reason?: string;
}

export interface SimStats {
  leaderTerms: number;
  maxTerm: number;
  committed: number;
  proposals: number;
  proposalsDropped: number;
  reads: number;
  readsAnswered: number;
  confChanges: number;
  transfers: number;
  snapshotsTaken: number;
  snapshotsInstalled: number;
  crashes: number;
  tornWrites: number;
  pauses: number;
  partitions: number;
  messages: number;
  messagesLost: number;
  messagesDuplicated: number;
  nodesCreated: number;
}

export function emptyStats(): SimStats {
  return {
    leaderTerms: 0,
    maxTerm: 0,
    committed: 0,
    proposals: 0,
    proposalsDropped: 0,
    reads: 0,
    readsAnswered: 0,
    confChanges: 0,
    transfers: 0,
    snapshotsTaken: 0,
    snapshotsInstalled: 0,
    crashes: 0,
    tornWrites: 0,
    pauses: 0,
    partitions: 0,
    messages: 0,
    messagesLost: 0,
    messagesDuplicated: 0,
    nodesCreated: 0,
  };
}

export interface SimResult {
  seed: number;
  nodes: 3 | 5;
  steps: number;
  faults: string;
  bug?: BugName;
  safety?: SafetyFailure;
  liveness: LivenessOutcome;
  virtualUs: number;
  events: number;
  traceHash: string;
  traceTail: string[];
  stats: SimStats;
  /** One shell line that replays this run. */
  replay: string;
}
