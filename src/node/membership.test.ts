// FS-3 and issue 9: membership changes through the node runtime. A learner is promoted only once it
// holds the log the leader had committed when the promotion was asked for, and is answering.
import { afterEach, describe, expect, it } from 'vitest';
import { InvalidConfChangeError } from '../raft/types.js';
import { encodeKvCommand, type KvResult, KvStateMachine } from '../state/kv-state-machine.js';
import { MemberNotCaughtUpError } from './errors.js';
import type { MemberInfo } from './members.js';
import { MemoryNetwork, MemoryNodeStorage } from './memory-seams.js';
import { FloeNode } from './node.js';
import { seeded } from './test-doubles.js';

interface Member {
  id: number;
  node: FloeNode<KvResult>;
  kv: KvStateMachine;
}

const running: Member[] = [];
const founders: MemberInfo[] = [1, 2, 3].map((id) => ({ id, peerAddr: `mem:${id}` }));

/**
 * Starts a member: a founder (bootstrap membership) or a joiner (empty storage), or a restarted one on
 * `storage` (what its previous process left).
 */
function boot(
  net: MemoryNetwork,
  id: number,
  joiner = false,
  opts: { snapshotEvery?: number; storage?: MemoryNodeStorage } = {},
): Member & { storage: MemoryNodeStorage } {
  const storage =
    opts.storage ??
    new MemoryNodeStorage(joiner ? undefined : { voters: [1, 2, 3], learners: [] }, {
      // With snapshots on, keep no entries behind them: compaction is what the snapshot tests are about.
      ...(opts.snapshotEvery ? { trailingEntries: 0 } : {}),
    });
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
    ...(opts.snapshotEvery ? { snapshotEvery: opts.snapshotEvery } : {}),
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

// FS-24: nothing refused re-adding a removed node ID (the docs said IDs are never reused), and a new machine under
// that ID replayed the old removal of its ID from the log and stopped itself. The cluster now keeps every removed ID
// (tombstones, replicated and in snapshots) and refuses to add one again.
describe('re-adding a removed node ID (FS-24)', () => {
  const reused = /node id 4 was removed from this cluster \(at log index \d+\) and is never reused/;

  it('FS-24: adding a removed ID again is refused with an error naming it, and the new machine joins under a new ID', async () => {
    const net = new MemoryNetwork();
    const nodes = [1, 2, 3].map((id) => boot(net, id));
    const leader = await leaderOf(nodes);
    await leader.node.propose(put('a'));
    const first = boot(net, 4, true);
    await leader.node.addMember({ id: 4, peerAddr: 'mem:4' }, 30_000);
    await leader.node.removeMember(4);
    await until(() => first.node.stopped !== undefined);
    const removedAt = leader.node.status().removed.find((r) => r.id === 4)?.removedAt;
    expect(removedAt).toBeGreaterThan(0);

    boot(net, 4, true);
    for (const attempt of [
      () => leader.node.addMember({ id: 4, peerAddr: 'mem:4' }, 30_000),
      () => leader.node.addLearner({ id: 4, peerAddr: 'mem:4' }),
      () => leader.node.promote(4),
    ]) {
      const err = await attempt().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidConfChangeError);
      expect((err as Error).message).toMatch(reused);
      expect((err as Error).message).toContain(`index ${removedAt})`);
    }
    const conf = leader.node.status().conf;
    expect([...conf.voters, ...conf.learners]).not.toContain(4);

    const fresh = boot(net, 5, true);
    await leader.node.addMember({ id: 5, peerAddr: 'mem:5' }, 30_000);
    await leader.node.propose(put('b'));
    await until(() => fresh.kv.get('k') === 'b');
    expect(fresh.node.stopped).toBeUndefined();
    expect(leader.node.status().conf.voters).toContain(5);
  });

  it('FS-24: every member keeps the removed ID, through a snapshot, a restart and a snapshot sent to a new member', async () => {
    const net = new MemoryNetwork();
    const nodes = [1, 2, 3].map((id) => boot(net, id, false, { snapshotEvery: 10 }));
    let leader = await leaderOf(nodes);
    await leader.node.propose(put('a'));
    boot(net, 4, true, { snapshotEvery: 10 });
    await leader.node.addMember({ id: 4, peerAddr: 'mem:4' }, 30_000);
    await leader.node.removeMember(4);
    // Enough entries that every member snapshots past the removal and compacts its log behind it.
    for (let i = 0; i < 40; i++) await leader.node.propose(put(`v${i}`));
    const applied = leader.node.status().appliedIndex;
    for (const m of nodes) await until(() => m.node.status().appliedIndex >= applied);
    for (const m of nodes) {
      expect(m.node.status().snapshotIndex).toBeGreaterThan(leader.node.status().removed[0]!.removedAt);
      expect(m.storage.storage.firstIndex()).toBeGreaterThan(leader.node.status().removed[0]!.removedAt);
    }

    // A member that joins now gets the snapshot, not the removal's entry: it learns the tombstone from the snapshot.
    const late = boot(net, 5, true, { snapshotEvery: 10 });
    await leader.node.addMember({ id: 5, peerAddr: 'mem:5' }, 30_000);
    await until(() => late.node.status().appliedIndex >= leader.node.status().commit);
    expect(late.node.status().removed.map((r) => r.id)).toEqual([4]);

    // Every follower restarts from its own snapshot and still knows; then one of them leads and refuses the ID.
    const old = leader;
    for (const m of nodes.filter((n) => n !== old)) {
      await m.node.stop('restart');
      running.splice(running.indexOf(m), 1);
      const again = boot(net, m.id, false, { snapshotEvery: 10, storage: m.storage.crash('process') });
      expect(again.node.status().removed.map((r) => r.id)).toEqual([4]);
      nodes[nodes.indexOf(m)] = again;
    }
    await old.node.stop('the old leader goes');
    leader = await leaderOf([...nodes.filter((n) => n !== old), late]);
    expect(leader.id).not.toBe(old.id);
    const err = await leader.node.addMember({ id: 4, peerAddr: 'mem:4' }, 30_000).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidConfChangeError);
    expect((err as Error).message).toMatch(reused);
  });
});

/** Resolves with the node's stop reason, or rejects after `ms` (a bound, not a wait: the event is what counts). */
function stopReason(node: FloeNode<KvResult>, ms = 5_000): Promise<string> {
  if (node.stopped !== undefined) return Promise.resolve(node.stopped);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`node ${node.status().id} still running after ${ms} ms`)),
      ms,
    );
    node.once('stopped', (reason) => {
      clearTimeout(timer);
      resolve(reason);
    });
  });
}

// FS-23: a node stopped itself only when it applied its own removal. One that never receives the commit of it (down
// when it committed, or the one message lost) lingered for ever as a pre-candidate. Now a member that applied the
// removal refuses its connection with the removal verdict (decision 0008; the memory twin gives it as the handshake).
describe('a removed member that never applied its removal (FS-23)', () => {
  it('FS-23: a member removed while it was down, restarted later from its data, stops by itself', async () => {
    const net = new MemoryNetwork();
    const nodes = [1, 2, 3].map((id) => boot(net, id));
    const leader = await leaderOf(nodes);
    await leader.node.propose(put('a'));
    const gone = nodes.find((m) => m !== leader) as Member & { storage: MemoryNodeStorage };
    await gone.node.stop('machine switched off');
    running.splice(running.indexOf(gone), 1);
    await leader.node.removeMember(gone.id);
    await leader.node.propose(put('b'));
    const removedAt = leader.node.status().removed.find((r) => r.id === gone.id)?.removedAt as number;
    expect(removedAt).toBeGreaterThan(0);

    // Its disk holds no removal: it boots as a voter of the old configuration and campaigns.
    const again = boot(net, gone.id, false, { storage: gone.storage.crash('process') });
    expect(again.node.status().conf.voters).toContain(gone.id);
    const reason = await stopReason(again.node);
    expect(reason).toMatch(
      new RegExp(`^removed from the cluster \\(told by node \\d: removal at index ${removedAt}\\)$`),
    );
    expect(again.node.status().appliedIndex).toBeLessThan(removedAt);
    // The cluster went on without it.
    expect(await leader.node.propose(put('c'))).toBeDefined();
    expect(leader.node.status().conf.voters).not.toContain(gone.id);
  });

  it('FS-23: a node told it was removed before it started never starts ticking (the process could not exit)', async () => {
    // In `floe serve` the transport dials before the node starts: the verdict can stop the node first.
    let intervals = 0;
    const timers = {
      setTimeout: (fn: () => void, ms: number) => setTimeout(fn, ms),
      clearTimeout: (h: unknown) => clearTimeout(h as NodeJS.Timeout),
      setInterval: (fn: () => void, ms: number) => {
        intervals++;
        return setInterval(fn, ms);
      },
      clearInterval: (h: unknown) => clearInterval(h as NodeJS.Timeout),
      setImmediate: (fn: () => void) => setImmediate(fn),
    };
    const net = new MemoryNetwork();
    const transport = net.endpoint(2);
    const node = new FloeNode<KvResult>({
      id: 2,
      storage: new MemoryNodeStorage({ voters: [1, 2, 3], learners: [] }),
      transport,
      stateMachine: new KvStateMachine(),
      initialMembers: founders,
      random: seeded(7),
      timers,
    });
    transport.bind(node);
    node.onRemoved(1, 9);
    expect(await stopReason(node)).toBe('removed from the cluster (told by node 1: removal at index 9)');
    node.start();
    expect(intervals).toBe(0);
  });

  it('FS-23: a verdict that does not match this node’s membership is ignored (removal before its generation, or already applied)', async () => {
    const net = new MemoryNetwork();
    const nodes = [1, 2, 3].map((id) => boot(net, id));
    const leader = await leaderOf(nodes);
    await leader.node.propose(put('a'));
    const joined = boot(net, 4, true);
    await leader.node.addMember({ id: 4, peerAddr: 'mem:4' }, 30_000);
    await leader.node.propose(put('b'));
    await until(() => joined.kv.get('k') === 'b');
    const since = joined.node.status().members.find((m) => m.id === 4)?.since as number;
    expect(since).toBeGreaterThan(0);
    const applied = joined.node.status().appliedIndex;
    expect(applied).toBeGreaterThan(since);
    // A removal older than its generation (an earlier holder of the id, before FS-24 forbade reuse): not about it.
    joined.node.onRemoved(leader.id, since - 1);
    joined.node.onRemoved(leader.id, since);
    // A removal at or before what it applied: it would have applied it (and stopped) if it removed this node.
    joined.node.onRemoved(leader.id, applied);
    await leader.node.propose(put('c'));
    await until(() => joined.kv.get('k') === 'c');
    expect(joined.node.stopped).toBeUndefined();
    // A founder (generation unknown: 0) that has not applied that far believes it.
    const founder = nodes.find((m) => m !== leader) as Member;
    expect(founder.node.status().members.find((m) => m.id === founder.id)?.since).toBeUndefined();
    founder.node.onRemoved(leader.id, founder.node.status().appliedIndex + 1000);
    expect(await stopReason(founder.node)).toMatch(/^removed from the cluster \(told by node/);
  });
});
