// FS-3 and issue 9: membership changes through the node runtime. A learner is promoted only once it
// holds the log the leader had committed when the promotion was asked for, and is answering.
import { afterEach, describe, expect, it } from 'vitest';
import { encodeKvCommand, type KvResult, KvStateMachine } from '../state/kv-state-machine.js';
import { MemberNotCaughtUpError } from './errors.js';
import type { MemberInfo } from './members.js';
import { MemoryNetwork, MemoryNodeStorage } from './memory-seams.js';
import { FloeNode } from './node.js';

function seeded(seed: number) {
  let s = seed >>> 0;
  return (n: number) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
}

interface Member {
  id: number;
  node: FloeNode<KvResult>;
  kv: KvStateMachine;
}

const running: Member[] = [];
const founders: MemberInfo[] = [1, 2, 3].map((id) => ({ id, peerAddr: `mem:${id}` }));

/** Starts a member: a founder (bootstrap membership) or a joiner (empty storage). */
function boot(net: MemoryNetwork, id: number, joiner = false): Member {
  const storage = new MemoryNodeStorage(joiner ? undefined : { voters: [1, 2, 3], learners: [] });
  const transport = net.endpoint(id);
  const kv = new KvStateMachine();
  const node = new FloeNode<KvResult>({
    id,
    storage,
    transport,
    stateMachine: kv,
    initialMembers: joiner ? [...founders, { id, peerAddr: `mem:${id}` }] : founders,
    tickMs: 10,
    electionTicks: 10,
    random: seeded(id * 7919),
  });
  transport.bind(node);
  const m = { id, node, kv };
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

/** Polls the leader's view of a peer; replication progress changes without an event. */
async function until(pred: () => boolean): Promise<void> {
  while (!pred()) await new Promise((r) => setTimeout(r, 5));
}

const put = (v: string) => encodeKvCommand({ op: 'put', key: 'k', value: v });

afterEach(async () => {
  await Promise.all(running.splice(0).map((m) => m.node.stop('test over')));
});

describe('addMember (FS-3)', () => {
  it('addMember does not promote a learner that has acknowledged nothing while the log is short', async () => {
    const net = new MemoryNetwork();
    const nodes = [1, 2, 3].map((id) => boot(net, id));
    const leader = await leaderOf(nodes);
    await leader.node.propose(put('a'));
    // Member 4 is never started: it cannot acknowledge anything. The log is far shorter than 100.
    expect(leader.node.status().lastIndex).toBeLessThan(20);
    const err = await leader.node.addMember({ id: 4, peerAddr: 'mem:4' }, 300).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MemberNotCaughtUpError);
    expect((err as Error).message).toMatch(/member 4 .*learner.*match 0/);
    const conf = leader.node.status().conf;
    expect(conf.voters).not.toContain(4);
    expect(conf.learners).toContain(4);
  });

  it('addMember promotes a learner once it has acknowledged the leader’s committed log', async () => {
    const net = new MemoryNetwork();
    const nodes = [1, 2, 3].map((id) => boot(net, id));
    const leader = await leaderOf(nodes);
    for (let i = 0; i < 5; i++) await leader.node.propose(put(String(i)));
    const commitBefore = leader.node.status().commit;
    boot(net, 4, true);
    await leader.node.addMember({ id: 4, peerAddr: 'mem:4' }, 30_000);
    const st = leader.node.status();
    expect(st.conf.voters).toContain(4);
    expect(st.progress?.[4]?.match).toBeGreaterThanOrEqual(commitBefore);
  });

  it('addMember of a learner that holds the log but stopped answering waits instead of promoting it', async () => {
    const net = new MemoryNetwork();
    const nodes = [1, 2, 3].map((id) => boot(net, id));
    const leader = await leaderOf(nodes);
    await leader.node.propose(put('a'));
    boot(net, 4, true);
    await leader.node.addLearner({ id: 4, peerAddr: 'mem:4' });
    const commit = leader.node.status().commit;
    await until(() => (leader.node.status().progress?.[4]?.match ?? 0) >= commit);
    net.isolate(4, [1, 2, 3]);
    // The next check-quorum round forgets it; nothing sets it again while it is cut off.
    await until(() => leader.node.status().progress?.[4]?.recentActive === false);
    const err = await leader.node.addMember({ id: 4, peerAddr: 'mem:4' }, 300).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MemberNotCaughtUpError);
    expect(leader.node.status().conf.voters).not.toContain(4);
    // Once it answers again, the same call promotes it (a learner is not added twice).
    net.heal();
    await leader.node.addMember({ id: 4, peerAddr: 'mem:4' }, 30_000);
    expect(leader.node.status().conf.voters).toContain(4);
  });
});

// FS-24 (open; `it.fails` pins it — when it is fixed this fails, and becomes `it`): nothing refuses re-adding a
// removed node ID (docs say IDs are never reused), and a new machine under that ID replays the old removal of its ID
// from the log and stops itself, since the removal check looks only at the ID.
describe('re-adding a removed node ID (FS-24)', () => {
  it.fails('FS-24 (open): a new machine added under a removed ID keeps running as a member', async () => {
    const net = new MemoryNetwork();
    const nodes = [1, 2, 3].map((id) => boot(net, id));
    const leader = await leaderOf(nodes);
    await leader.node.propose(put('a'));
    const first = boot(net, 4, true);
    await leader.node.addMember({ id: 4, peerAddr: 'mem:4' }, 30_000);
    await leader.node.removeMember(4);
    await until(() => first.node.stopped !== undefined);
    const again = boot(net, 4, true);
    await leader.node.addMember({ id: 4, peerAddr: 'mem:4' }, 30_000);
    await leader.node.propose(put('b'));
    await until(() => again.kv.get('k') === 'b' || again.node.stopped !== undefined);
    expect(again.node.stopped).toBeUndefined();
    expect(leader.node.status().conf.voters).toContain(4);
  });
});
