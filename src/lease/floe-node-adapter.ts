import { NotLeaderError } from '../node/errors.js';
import type { FloeNode } from '../node/node.js';
import type { Role } from '../raft/types.js';
import type { LeaseNode } from './lease-service.js';

/**
 * Adapts a FloeNode to what the LeaseService needs. Followers' errors carry the leader's
 * address (NotLeaderError), so servers can redirect (RESP MOVED, HTTP 307/421).
 * A node that stops counts as no longer leading: the service forgets its deadlines.
 */
export function leaseNodeOf<R>(node: FloeNode<R>): LeaseNode {
  return {
    propose: (command) => node.propose(command),
    linearizableRead: () => node.linearizableRead(),
    isLeader: () => node.isLeader && node.stopped === undefined,
    onRoleChange: (cb) => {
      // A leadership in a later term is a new one, even without a step down in between: report the end of the old.
      let leaderTerm: number | undefined;
      const onRole = (role: Role) => {
        if (role !== 'leader') {
          leaderTerm = undefined;
          cb(false);
          return;
        }
        const term = node.status().term;
        if (leaderTerm !== undefined && leaderTerm !== term) cb(false);
        leaderTerm = term;
        cb(true);
      };
      const onStopped = () => cb(false);
      node.on('role', onRole);
      node.on('stopped', onStopped);
      return () => {
        node.off('role', onRole);
        node.off('stopped', onStopped);
      };
    },
    notLeaderError: () => new NotLeaderError(node.id, node.leaderHint()),
  };
}
