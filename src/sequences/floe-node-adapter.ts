import { leaseNodeOf } from '../lease/floe-node-adapter.js';
import { NotLeaderError } from '../node/errors.js';
import type { FloeNode } from '../node/node.js';
import type { SequenceNode } from './sequence-service.js';

/** Adapts a FloeNode to what the SequenceService needs (the lease service's adapter plus the term). */
export function sequenceNodeOf<R>(node: FloeNode<R>, opts: { leaderLease?: boolean } = {}): SequenceNode {
  return {
    ...leaseNodeOf(node),
    term: () => node.currentTerm,
    notLeaderError: () => new NotLeaderError(node.id, node.leaderHint()),
    // Strict values from the leader lease (decision 0009): only where the node runs with `leaderLease`.
    ...(opts.leaderLease ? { holdsLeaderLease: (term: number) => node.holdsLeaderLease(term) } : {}),
  };
}
