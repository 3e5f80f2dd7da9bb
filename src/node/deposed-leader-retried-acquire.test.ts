// FS-13's adversarial review, on the real FloeNode: a retried acquire answered by a leader that lost its
// term in the same Ready in which it learned that (only) the retry's entry was committed. Its own expire of that
// token, proposed while it led and placed after the retry in the log, is committed by the next leader afterwards.
import { afterEach, expect, it } from 'vitest';
import { leaseNodeOf } from '../lease/floe-node-adapter.js';
import { LeaseService } from '../lease/lease-service.js';
import { FloeStateMachine } from '../state/floe-state-machine.js';
import type { AcquireOk } from '../state/leases/types.js';
import { MemoryNetwork, MemoryNodeStorage } from './memory-seams.js';
import { FloeNode } from './node.js';
import { seeded } from './test-doubles.js';

const members = [1, 2, 3].map((id) => ({ id, peerAddr: `mem:${id}` }));
const running: FloeNode<unknown>[] = [];
const services: LeaseService[] = [];
afterEach(async () => {
  for (const s of services.splice(0)) s.close();
  await Promise.all(running.splice(0).map((n) => n.stop('test over')));
});
const tick = () => new Promise<void>((r) => setImmediate(r));

it('a deposed leader never answers a retried acquire with the lease when its own stale expiry frees the worker ID', async () => {
  const net = new MemoryNetwork();
  const sms = new Map<number, FloeStateMachine>();
  const nodes = members.map((m) => {
    const transport = net.endpoint(m.id);
    const sm = new FloeStateMachine();
    sms.set(m.id, sm);
    const node = new FloeNode<unknown>({
      id: m.id,
      storage: new MemoryNodeStorage({ voters: [1, 2, 3], learners: [] }),
      transport,
      stateMachine: sm,
      initialMembers: members,
      tickMs: 10,
      electionTicks: m.id === 1 ? 100_000 : 10,
      random: seeded(m.id * 7919),
      proposalTimeoutMs: 60_000,
    });
    transport.bind(node);
    running.push(node);
    node.start();
    return node;
  });
  let first = nodes.find((n) => n.isLeader);
  while (!first) {
    await tick();
    first = nodes.find((n) => n.isLeader);
  }
  const l1 = nodes[0]!;
  if (first !== l1) await first.transferLeadership(1, 60_000);
  const svc = new LeaseService({ node: leaseNodeOf(l1), state: sms.get(1)!.leases, defaultTtlMs: 1_000 });
  services.push(svc);
  await svc.whenReady();
  const grant = (await svc.acquire({
    app: 'app',
    nodeId: 'c4',
    requestId: 'r',
    incarnation: 'p',
  })) as AcquireOk;
  expect(grant).toMatchObject({ ok: true, retried: false });
  await new Promise((r) => setTimeout(r, 900)); // the first answer was lost; c4 retries near the deadline
  net.isolate(1, [2, 3]);
  const t1 = l1.status().term;
  const i = l1.status().lastIndex + 1;
  const sentAt = performance.now();
  const retry = svc.acquire({ app: 'app', nodeId: 'c4', requestId: 'r', incarnation: 'p' });
  while (svc.stats.expireProposals === 0) await new Promise((r) => setTimeout(r, 5)); // the pump: expire at i+1
  expect(l1.status().lastIndex).toBe(i + 1);
  // In one turn: node 2's ack of the retry's entry (only), then node 3's append of term t1+1 (it won with e2 and x).
  l1.onMessage({
    type: 'appResp',
    from: 2,
    to: 1,
    term: t1,
    index: i,
    reject: false,
    rejectHint: 0,
    logTermHint: 0,
  });
  l1.onMessage({
    type: 'app',
    from: 3,
    to: 1,
    term: t1 + 1,
    logIndex: i + 1,
    logTerm: t1,
    entries: [],
    commit: 0,
  });
  const answer = (await retry.catch((e: Error) => ({ ok: false as const, code: e.name }))) as {
    ok: boolean;
    code?: string;
    retried?: boolean;
  };
  // The new leader commits its no-op after x: the old leader's expire applies.
  l1.onMessage({
    type: 'app',
    from: 3,
    to: 1,
    term: t1 + 1,
    logIndex: i + 1,
    logTerm: t1,
    entries: [{ type: 'normal', term: t1 + 1, index: i + 2, data: new Uint8Array() }],
    commit: i + 2,
  });
  while (l1.status().appliedIndex < i + 2) await tick();
  const freedAt = performance.now();
  const c4HoldsUntil = answer.ok ? sentAt + 1_000 - (100 + 100) : Number.NEGATIVE_INFINITY;
  const live = sms.get(1)!.leases.liveToken('app', grant.workerId);
  // P1: while c4 holds (by the answer it got), the worker ID must not be free for the next leader to grant.
  expect({
    answer: answer.ok ? `grant retried=${answer.retried}` : answer.code,
    freeWhileHeld: live === 0 && freedAt < c4HoldsUntil,
  }).toEqual({ answer: expect.anything(), freeWhileHeld: false });
}, 20_000);
