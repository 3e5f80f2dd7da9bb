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

/** The proposal may or may not have been committed: the caller must treat the outcome as unknown. */
export class ProposalTimeoutError extends Error {
  constructor(timeoutMs: number) {
    super(`proposal not applied within ${timeoutMs} ms; its outcome is unknown (it may still commit)`);
    this.name = 'ProposalTimeoutError';
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
