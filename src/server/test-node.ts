// A one-member FloeNode on an in-memory network and storage, for the servers' tests (no sockets, no disk).

import { MemoryNetwork, MemoryNodeStorage } from '../node/memory-seams.js';
import { FloeNode } from '../node/node.js';
import { FloeStateMachine } from '../state/floe-state-machine.js';

export function memorySingleNode(): { node: FloeNode<unknown>; state: FloeStateMachine } {
  const net = new MemoryNetwork();
  const transport = net.endpoint(1);
  const state = new FloeStateMachine();
  const node = new FloeNode<unknown>({
    id: 1,
    storage: new MemoryNodeStorage({ voters: [1], learners: [] }),
    transport,
    stateMachine: state,
    initialMembers: [{ id: 1, peerAddr: 'mem:1' }],
    tickMs: 10,
    random: () => 0,
  });
  transport.bind(node);
  return { node, state };
}
