// Adversarial review of FS-23 (cc0c984) and FS-25 (18379a1): failing tests for the holes found.
import { afterEach, describe, expect, it } from 'vitest';
import { encodeKvCommand, type KvResult, KvStateMachine } from '../state/kv-state-machine.js';
import type { MemberInfo } from './members.js';
import { MemoryNetwork, MemoryNodeStorage } from './memory-seams.js';
import { FloeNode } from './node.js';
import { seeded } from './test-doubles.js';

interface Member {
  id: number;
  node: FloeNode<KvResult>;
  kv: KvStateMachine;
  storage: MemoryNodeStorage;
}

const running: Member[] = [];
const info = (id: number): MemberInfo => ({ id, peerAddr: `mem:${id}` });
const founders = [1, 2, 3].map(info);

function boot(
  net: MemoryNetwork,
  id: number,
  initialMembers: MemberInfo[],
  storage = new MemoryNodeStorage(
    initialMembers === founders ? { voters: [1, 2, 3], learners: [] } : undefined,
  ),
): Member {
  const transport = net.endpoint(id);
  const kv = new KvStateMachine();
  const node = new FloeNode<KvResult>({
    id,
    storage,
    transport,
    stateMachine: kv,
    initialMembers,
    tickMs: 10,
    electionTicks: 10,
    random: seeded(id * 7919),
    proposalTimeoutMs: 20_000,
  });
  transport.bind(node);
  const m = { id, node, kv, storage };
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

async function until(pred: () => boolean, ms = 10_000): Promise<boolean> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 5));
  }
  return true;
}

const put = (k: string, v: string) => encodeKvCommand({ op: 'put', key: k, value: v });

afterEach(async () => {
  await Promise.all(running.splice(0).map((m) => m.node.stop('test over')));
});

describe('review of FS-23: syncTransportPeers and lagging nodes', () => {
  it('a joiner replaying the log from its start does not drop the current leader (added later, listed in its initial cluster) from its transport', async () => {
    const net = new MemoryNetwork();
    const nodes = [1, 2, 3].map((id) => boot(net, id, founders));
    let leader = await leaderOf(nodes);
    await leader.node.propose(put('k', 'a'));
    // Member 4 joins early: its add is one of the first conf entries of the log.
    const four = boot(net, 4, [...founders, info(4)]);
    nodes.push(four);
    await leader.node.addMember(info(4), 30_000);
    // More than one append's worth of log (maxMessageBytes is 1 MiB) before member 5 is added.
    const big = 'x'.repeat(400 * 1024);
    for (let i = 0; i < 4; i++) await leader.node.propose(put(`big${i}`, big));
    const five = boot(net, 5, [...founders, info(4), info(5)]);
    nodes.push(five);
    await leader.node.addMember(info(5), 30_000);
    if (leader.id !== 5) await leader.node.transferLeadership(5, 5_000);
    leader = await leaderOf([five]);
    expect(leader.id).toBe(5);
    await leader.node.propose(put('k', 'b'));

    // A new member joins, started as the docs say: --initial-cluster lists the current members. The leader's log
    // starts at 1 (no snapshot yet), so it replays it; applying the add of 4 gives it a configuration without 5.
    const six = boot(net, 6, [...founders, info(4), info(5), info(6)]);
    await leader.node.addLearner(info(6));
    const commit = leader.node.status().commit;
    const caughtUp = await until(() => six.node.status().appliedIndex >= commit, 5_000);
    expect({
      caughtUp,
      applied: six.node.status().appliedIndex,
      commit,
      sixConf: six.node.status().conf,
    }).toMatchObject({ caughtUp: true });
  }, 60_000);
});

describe('review of FS-23: the MemoryNetwork twin and the production transport', () => {
  it('a removed learner that missed the commit of its removal stops by itself (production dials every peer and is told; the twin tells only a node that sends)', async () => {
    const net = new MemoryNetwork();
    const nodes = [1, 2, 3].map((id) => boot(net, id, founders));
    const leader = await leaderOf(nodes);
    await leader.node.propose(put('k', 'a'));
    const learner = boot(net, 4, [...founders, info(4)]);
    await leader.node.addLearner(info(4));
    await leader.node.propose(put('k', 'b'));
    expect(await until(() => learner.kv.get('k') === 'b')).toBe(true);
    // Cut off while it is removed: it never receives the commit of its removal.
    net.isolate(4, [1, 2, 3]);
    await leader.node.removeMember(4);
    await leader.node.propose(put('k', 'c'));
    await until(() => nodes.every((m) => m.kv.get('k') === 'c'));
    net.heal();
    // A learner never campaigns, so it sends no Raft message. PeerTransport dials every configured peer whatever it
    // has to send, so the members that applied the removal give it the verdict within a backoff (≤ 2 s).
    const stopped = await until(() => learner.node.stopped !== undefined, 3_000);
    expect({ stopped, reason: learner.node.stopped }).toMatchObject({ stopped: true });
  }, 30_000);
});
