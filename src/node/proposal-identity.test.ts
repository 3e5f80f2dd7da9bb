// Issue 9 item 1: a proposal is answered only with the result of its own log entry. The in-memory
// network decides who can talk to whom, so the old leader's uncommitted entries commit exactly
// when its next incarnation wins the election.
import { afterEach, describe, expect, it } from 'vitest';
import { encodeLeaseCommand } from '../state/leases/codec.js';
import { LeaseStateMachine } from '../state/leases/lease-state-machine.js';
import type { LeaseResult } from '../state/leases/types.js';
import { MemoryNetwork, MemoryNodeStorage } from './memory-seams.js';
import { FloeNode } from './node.js';
import { seeded } from './test-doubles.js';

interface Member {
  id: number;
  node: FloeNode<LeaseResult>;
  sm: LeaseStateMachine;
  storage: MemoryNodeStorage;
}

const running: Member[] = [];
const members = [1, 2, 3].map((id) => ({ id, peerAddr: `mem:${id}` }));
const conf = { voters: [1, 2, 3], learners: [] };

/** Starts (or restarts, on the storage it is given) one member. */
function boot(net: MemoryNetwork, id: number, storage = new MemoryNodeStorage(conf), seed = id): Member {
  const transport = net.endpoint(id);
  const sm = new LeaseStateMachine();
  const node = new FloeNode<LeaseResult>({
    id,
    storage,
    transport,
    stateMachine: sm,
    initialMembers: members,
    self: { httpAddr: `http:${id}` },
    tickMs: 10,
    electionTicks: 10,
    random: seeded(seed * 7919),
  });
  transport.bind(node);
  const m = { id, node, sm, storage };
  running.push(m);
  node.start();
  return m;
}

async function leaderOf(ms: Member[]): Promise<Member> {
  for (;;) {
    const l = ms.find((m) => !m.node.stopped && m.node.isLeader);
    if (l) return l;
    await Promise.race(ms.map((m) => new Promise<void>((r) => m.node.once('role', () => r()))));
  }
}

const acquire = (nodeId: string) =>
  encodeLeaseCommand({ op: 'acquire', app: 'orders', nodeId, ttlMs: 10_000, requestId: `req-${nodeId}` });

afterEach(async () => {
  await Promise.all(running.splice(0).map((m) => m.node.stop('test over')));
});

describe('proposal identity across incarnations (in-memory seams)', () => {
  it('an uncommitted acquire of a previous incarnation that commits later does not answer a new acquire', async () => {
    const net = new MemoryNetwork();
    const all = [1, 2, 3].map((id) => boot(net, id));
    const first = await leaderOf(all);
    const others = all.filter((m) => m !== first);
    await first.node.propose(
      encodeLeaseCommand({ op: 'configurePool', app: 'orders', bits: 4, datacenterBits: 0 }),
    );

    // The leader is cut off, appends five acquires it cannot commit, persists them and dies. The
    // survivors cannot reach each other either, so nobody else can be elected meanwhile.
    net.isolate(
      first.id,
      others.map((m) => m.id),
    );
    net.isolate(others[0]!.id, [others[1]!.id]);
    const target = first.storage.storage.lastIndex() + 5;
    const victims = Array.from({ length: 5 }, (_, i) =>
      first.node.propose(acquire(`victim-${i}`)).catch((err: Error) => err),
    );
    while (first.storage.storage.lastIndex() < target) await new Promise((r) => setImmediate(r));
    await first.node.stop('test: crash');
    for (const v of await Promise.all(victims)) expect(v).toBeInstanceOf(Error);

    // Still cut from each other, the survivors can elect only the restarted node (the longest log).
    net.heal();
    net.isolate(others[0]!.id, [others[1]!.id]);
    const again = boot(net, first.id, first.storage, first.id + 100);
    // The moment it leads, before its old entries commit, five new clients ask for leases.
    const bobs = await new Promise<Promise<LeaseResult | Error>[]>((resolve) => {
      const onRole = (role: string) => {
        if (role !== 'leader') return;
        again.node.off('role', onRole);
        resolve(
          Array.from({ length: 5 }, (_, i) =>
            again.node.propose(acquire(`bob-${i}`)).catch((err: Error) => err),
          ),
        );
      };
      again.node.on('role', onRole);
    });
    const results = await Promise.all(bobs);
    results.forEach((r, i) => {
      // Either its own grant, or an error; never somebody else's lease.
      if (r instanceof Error) return;
      expect(r).toMatchObject({ ok: true, op: 'acquire', nodeId: `bob-${i}`, requestId: `req-bob-${i}` });
    });
    expect(results.filter((r) => !(r instanceof Error)).length).toBe(5);
    // The victims' entries did commit: five victims and five bobs hold distinct worker IDs.
    const holders = new Set<string>();
    for (let w = 0; w < 16; w++) {
      const l = again.sm.lease('orders', w);
      if (l) holders.add(l.nodeId);
    }
    expect(holders.size).toBe(10);
  });
});
