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
      const onRole = (role: Role) => cb(role === 'leader');
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
