import { afterEach, describe, expect, it } from 'vitest';
import { encodeKvCommand, type KvResult, KvStateMachine } from '../state/kv-state-machine.js';
import { NotLeaderError } from './errors.js';
import { MemoryNetwork, MemoryNodeStorage } from './memory-seams.js';
import { FloeNode } from './node.js';
import { seeded } from './test-doubles.js';

interface TestNode {
  node: FloeNode<KvResult>;
  kv: KvStateMachine;
  storage: MemoryNodeStorage;
}

const running: TestNode[] = [];

function cluster(size: number, net = new MemoryNetwork(), snapshotEvery = 10_000): TestNode[] {
  const members = Array.from({ length: size }, (_, i) => ({ id: i + 1, peerAddr: `mem:${i + 1}` }));
  const conf = { voters: members.map((m) => m.id), learners: [] };
  const nodes = members.map((m) => {
    const storage = new MemoryNodeStorage(conf);
    const transport = net.endpoint(m.id);
    const kv = new KvStateMachine();
    const node = new FloeNode<KvResult>({
      id: m.id,
      storage,
      transport,
      stateMachine: kv,
      initialMembers: members,
      self: { httpAddr: `http:${m.id}` },
      tickMs: 10,
      electionTicks: 10,
      random: seeded(m.id * 7919),
      snapshotEvery,
    });
    transport.bind(node);
    return { node, kv, storage };
  });
  running.push(...nodes);
  for (const n of nodes) n.node.start();
  return nodes;
}

async function leaderOf(nodes: TestNode[]): Promise<TestNode> {
  await Promise.all(nodes.filter((n) => !n.node.stopped).map((n) => n.node.waitForLeader()));
  for (;;) {
    const l = nodes.find((n) => !n.node.stopped && n.node.isLeader);
    if (l) return l;
    await new Promise<void>((r) => nodes[0]!.node.once('role', () => r()));
  }
}

afterEach(async () => {
  await Promise.all(running.splice(0).map((n) => n.node.stop('test over')));
});

describe('FloeNode runtime (in-memory seams)', () => {
  it('a single-voter node elects itself and applies proposals', async () => {
    const [n] = cluster(1);
    await n!.node.waitForLeader();
    const r = await n!.node.propose(encodeKvCommand({ op: 'put', key: 'a', value: '1' }));
    expect(r).toMatchObject({ ok: true, value: '1' });
    expect(n!.kv.get('a')).toBe('1');
  });

  it('propose resolves only after the entry is applied on the proposing node, and replicates to all', async () => {
    const nodes = cluster(3);
    const leader = await leaderOf(nodes);
    const results = await Promise.all(
      Array.from({ length: 50 }, () =>
        leader.node.propose(encodeKvCommand({ op: 'incr', key: 'c', by: '1' })),
      ),
    );
    const values = results.map((r) => (r.ok ? Number(r.value) : -1)).sort((a, b) => a - b);
    expect(values).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(leader.kv.counter('c')).toBe('50');
    // followers catch up: wait for their applied index to reach the leader's
    const target = leader.node.status().appliedIndex;
    for (const n of nodes) {
      while (n.node.status().appliedIndex < target) await new Promise((r) => n.node.once('applied', r));
      expect(n.kv.counter('c')).toBe('50');
    }
  });

  it('a follower fails fast with the leader’s identity and published address', async () => {
    const nodes = cluster(3);
    const leader = await leaderOf(nodes);
    await leader.node.propose(encodeKvCommand({ op: 'put', key: 'x', value: 'y' }));
    const follower = nodes.find((n) => n !== leader)!;
    while (follower.node.status().appliedIndex < leader.node.status().appliedIndex)
      await new Promise((r) => follower.node.once('applied', r));
    const err = await follower.node
      .propose(encodeKvCommand({ op: 'put', key: 'x', value: 'z' }))
      .catch((e) => e);
    expect(err).toBeInstanceOf(NotLeaderError);
    expect((err as NotLeaderError).leader?.id).toBe(leader.node.id);
    expect((err as NotLeaderError).leader?.httpAddr).toBe(`http:${leader.node.id}`);
  });

  it('linearizable reads on a follower see every write acknowledged before the read began', async () => {
    const nodes = cluster(3);
    const leader = await leaderOf(nodes);
    const follower = nodes.find((n) => n !== leader)!;
    for (let i = 1; i <= 20; i++) {
      await leader.node.propose(encodeKvCommand({ op: 'put', key: 'k', value: String(i) }));
      await follower.node.linearizableRead();
      expect(follower.kv.get('k')).toBe(String(i));
    }
  });

  it('a new leader takes over when the old one stops, and nothing acknowledged is lost', async () => {
    const nodes = cluster(3);
    const first = await leaderOf(nodes);
    for (let i = 0; i < 10; i++) await first.node.propose(encodeKvCommand({ op: 'incr', key: 'n', by: '1' }));
    await first.node.stop('test: leader stops');
    const rest = nodes.filter((n) => n !== first);
    const second = await leaderOf(rest);
    expect(second).not.toBe(first);
    const r = await second.node.propose(encodeKvCommand({ op: 'incr', key: 'n', by: '1' }));
    expect(r).toMatchObject({ ok: true, value: '11' });
  });

  it('snapshots every N entries and a restarted-from-scratch member catches up from a snapshot', async () => {
    const net = new MemoryNetwork();
    const nodes = cluster(3, net, 20);
    const leader = await leaderOf(nodes);
    const lagging = nodes.find((n) => n !== leader)!;
    net.isolate(
      lagging.node.id,
      nodes.filter((n) => n !== lagging).map((n) => n.node.id),
    );
    for (let i = 0; i < 300; i++)
      await leader.node.propose(encodeKvCommand({ op: 'incr', key: 's', by: '1' }));
    expect(leader.node.status().snapshotIndex).toBeGreaterThan(0);
    expect(leader.storage.storage.firstIndex()).toBeGreaterThan(2); // compacted behind the snapshot
    net.heal();
    const target = leader.node.status().appliedIndex;
    while (lagging.node.status().appliedIndex < target)
      await new Promise((r) => lagging.node.once('applied', r));
    expect(lagging.kv.counter('s')).toBe('300');
  });
});
