// Regression (FS-19, full-stack simulator, swarm seed 1015218): processes started to join a cluster and never added
// (their `floe cluster add` failed during a leadership transfer) sat behind the load balancer answering
// `503 not_leader` with nothing else: a client that reached only them (and configured members that were gone) could
// not find the leader, and nothing in the answer said the process was not a member at all.

import { afterEach, describe, expect, it } from 'vitest';
import { MemoryNetwork, MemoryNodeStorage } from '../node/memory-seams.js';
import { FloeNode } from '../node/node.js';
import { FloeStateMachine } from '../state/floe-state-machine.js';
import { buildHttpAdmin } from './http-admin.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Node `id` on an in-memory network that nobody else is on; `conf` undefined: started to join, never added. */
async function appOf(id: number, conf: { voters: number[]; learners: number[] } | undefined) {
  const net = new MemoryNetwork();
  const transport = net.endpoint(id);
  const state = new FloeStateMachine();
  const node = new FloeNode<unknown>({
    id,
    storage: new MemoryNodeStorage(conf),
    transport,
    stateMachine: state,
    initialMembers: [
      { id: 1, peerAddr: 'mem:1', httpAddr: '10.0.0.1:8080' },
      { id: 2, peerAddr: 'mem:2' }, // no HTTP address known: nothing to tell a client
      { id: 5, peerAddr: 'mem:5', httpAddr: '10.0.0.5:8080' },
      { id, peerAddr: `mem:${id}`, httpAddr: `10.0.0.${id}:8080` },
    ],
    tickMs: 10,
    random: () => 0,
  });
  transport.bind(node);
  node.start();
  const app = await buildHttpAdmin({ node, kv: state.kv, defaultMetrics: false, dashboard: false });
  cleanups.push(async () => {
    await app.close();
    await node.stop('test over');
  });
  return app;
}

describe('not_leader with no leader to redirect to (FS-19)', () => {
  it('a process started to join and never added names the members it knows and says it is not a member', async () => {
    const app = await appOf(7, undefined);
    const res = await app.inject({ method: 'PUT', url: '/v1/kv/k', payload: { value: 'v' } });
    expect(res.statusCode).toBe(503);
    const body = res.json() as { error: string; message: string; members: unknown };
    expect(body.error).toBe('not_leader');
    expect(body.members).toEqual([
      { id: 1, httpAddr: '10.0.0.1:8080' },
      { id: 5, httpAddr: '10.0.0.5:8080' },
    ]);
    expect(body.message).toMatch(/this node is not a member of the cluster \(not added yet, or removed/);
  });

  it('a member during an election names the other members, and does not call itself a non-member', async () => {
    const app = await appOf(3, { voters: [1, 3, 5], learners: [] });
    const res = await app.inject({ method: 'PUT', url: '/v1/kv/k', payload: { value: 'v' } });
    expect(res.statusCode).toBe(503);
    const body = res.json() as { error: string; message: string; members: unknown };
    expect(body).toMatchObject({ error: 'not_leader' });
    expect(body.members).toEqual([
      { id: 1, httpAddr: '10.0.0.1:8080' },
      { id: 5, httpAddr: '10.0.0.5:8080' },
    ]);
    expect(body.message).not.toMatch(/not a member/);
  });
});
