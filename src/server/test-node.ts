// A one-member FloeNode on an in-memory network and storage, for the servers' tests (no sockets, no disk).

import { leaseNodeOf } from '../lease/floe-node-adapter.js';
import { LeaseService } from '../lease/lease-service.js';
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

/**
 * A one-member node, its lease service and the app `build` makes over them (built before the node starts, as `floe
 * serve` does), the node leading and the lease service ready; `stop` closes all three.
 */
export async function singleNodeWithApp<A extends { close(): Promise<unknown> }>(
  build: (parts: { node: FloeNode<unknown>; state: FloeStateMachine; leases: LeaseService }) => Promise<A>,
): Promise<{
  node: FloeNode<unknown>;
  state: FloeStateMachine;
  leases: LeaseService;
  app: A;
  stop: () => Promise<void>;
}> {
  const { node, state } = memorySingleNode();
  const leases = new LeaseService({ node: leaseNodeOf(node), state: state.leases });
  const app = await build({ node, state, leases });
  node.start();
  await node.waitForLeader();
  await leases.whenReady();
  const stop = async () => {
    leases.close();
    await node.stop('test over');
    await app.close();
  };
  return { node, state, leases, app, stop };
}
