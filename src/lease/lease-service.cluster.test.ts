// The lease service on real FloeNodes (in-memory network and storage): real Raft, real ReadIndex,
// real failover. Lease deadlines run on a fake clock so that nothing depends on wall time.
import { afterEach, describe, expect, it } from 'vitest';
import { NotLeaderError } from '../node/errors.js';
import { MemoryNetwork, MemoryNodeStorage } from '../node/memory-seams.js';
import { FloeNode } from '../node/node.js';
import { LeaseStateMachine } from '../state/leases/lease-state-machine.js';
import type { LeaseResult } from '../state/leases/types.js';
import { leaseNodeOf } from './floe-node-adapter.js';
import { LeaseService } from './lease-service.js';
import { FakeTime } from './test-doubles.js';

interface Member {
  node: FloeNode<LeaseResult>;
  sm: LeaseStateMachine;
  svc: LeaseService;
}

const running: Member[] = [];

function seeded(seed: number) {
  let s = seed >>> 0;
  return (n: number) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
}

function cluster(size: number, time: FakeTime): Member[] {
  const net = new MemoryNetwork();
  const members = Array.from({ length: size }, (_, i) => ({ id: i + 1, peerAddr: `mem:${i + 1}` }));
  const conf = { voters: members.map((m) => m.id), learners: [] };
  const out = members.map((m) => {
    const transport = net.endpoint(m.id);
    const sm = new LeaseStateMachine();
    const node = new FloeNode<LeaseResult>({
      id: m.id,
      storage: new MemoryNodeStorage(conf),
      transport,
      stateMachine: sm,
      initialMembers: members,
      tickMs: 10,
      electionTicks: 10,
      random: seeded(m.id * 7919),
    });
    transport.bind(node);
    const svc = new LeaseService({
      node: leaseNodeOf(node),
      state: sm,
      clock: time,
      timers: time,
      defaultTtlMs: 5_000,
    });
    return { node, sm, svc };
  });
  running.push(...out);
  for (const m of out) m.node.start();
  return out;
}

async function leaderOf(members: Member[]): Promise<Member> {
  const live = members.filter((m) => !m.node.stopped);
  await Promise.all(live.map((m) => m.node.waitForLeader()));
  for (;;) {
    const l = live.find((m) => m.node.isLeader);
    if (l) return l;
    await new Promise<void>((r) => live[0]!.node.once('role', () => r()));
  }
}

async function caughtUp(m: Member, index: number): Promise<void> {
  while (m.node.status().appliedIndex < index) await new Promise((r) => m.node.once('applied', r));
}

afterEach(async () => {
  for (const m of running) m.svc.close();
  await Promise.all(running.splice(0).map((m) => m.node.stop('test over')));
});

describe('LeaseService on a 3-node FloeNode cluster', () => {
  it('grants, renews with and without the log, redirects followers, and survives a failover', async () => {
    const time = new FakeTime();
    const members = cluster(3, time);
    const first = await leaderOf(members);
    await first.svc.whenReady();

    const lease = await first.svc.acquire({ app: 'orders', nodeId: 'svc-1', requestId: 'r1' });
    expect(lease).toMatchObject({ ok: true, workerId: 0, highWaterMs: 0 });
    if (!lease.ok) return;

    const follower = members.find((m) => m !== first)!;
    const err = await follower.svc.renew({ app: 'orders', workerId: 0, token: lease.token }).catch((e) => e);
    expect(err).toBeInstanceOf(NotLeaderError);
    expect((err as NotLeaderError).leader?.id).toBe(first.node.id);

    const applied = first.node.status().appliedIndex;
    const local = await first.svc.renew({ app: 'orders', workerId: 0, token: lease.token });
    expect(local).toMatchObject({ ok: true, logged: false });
    expect(first.node.status().appliedIndex).toBe(applied); // no log entry

    const boundMs = time.wallMs() + 3_000;
    const logged = await first.svc.renew({ app: 'orders', workerId: 0, token: lease.token, boundMs });
    expect(logged).toMatchObject({ ok: true, logged: true, boundMs });
    for (const m of members) {
      await caughtUp(m, first.node.status().appliedIndex);
      expect(m.sm.highWaterMs('orders', 0)).toBe(boundMs);
    }

    // Failover: the old leader hands over and stops; the new one takes over the deadline.
    await first.node.stop('test: leader stops');
    const rest = members.filter((m) => m !== first);
    const second = await leaderOf(rest);
    await second.svc.whenReady();
    expect(second.svc.trackedCount).toBe(1);
    const renewed = await second.svc.renew({ app: 'orders', workerId: 0, token: lease.token });
    expect(renewed).toMatchObject({ ok: true, token: lease.token });

    // Abandoned from now on: the new leader expires it after a full TTL and the ID comes back.
    await time.advance(5_000 - 1);
    expect(second.sm.lease('orders', 0)).toBeDefined();
    await time.advance(1);
    while (second.sm.lease('orders', 0)) await new Promise((r) => second.node.once('applied', r));
    const again = await second.svc.acquire({ app: 'orders', nodeId: 'svc-1', requestId: 'r2' });
    expect(again).toMatchObject({ ok: true, workerId: 0, highWaterMs: boundMs });
  });
});
