// Snapshots and log compaction (Raft §7), and restart from storage.

import { describe, expect, it } from 'vitest';
import { MemoryStorage } from './memory-storage.js';
import { RawNode } from './raw-node.js';
import { bytes, Solo, TestNetwork } from './test-network.js';
import type { AppendResponse, Entry, Snapshot } from './types.js';

const conf3 = { voters: [1, 2, 3], learners: [] };

function entries(from: number, terms: number[]): Entry[] {
  return terms.map((term, i) => ({ type: 'normal', term, index: from + i, data: bytes(`e${from + i}`) }));
}

function snapAt(index: number, term: number): Snapshot {
  return { metadata: { index, term, conf: conf3 }, data: new Uint8Array() };
}

describe('snapshots and log compaction (§7)', () => {
  it('a lagging follower whose entries were compacted away gets the snapshot, then the rest of the log', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.isolate(3);
    for (let i = 0; i < 20; i++) net.propose(1, `v${i}`);
    net.stabilize();
    net.tick(2, [1, 2]);
    // Keep a trailing window of 5 entries after the snapshot point.
    const snap = net.snapshotAndCompact(1, net.peer(1).appliedIndex - 5);
    expect(snap.metadata.index).toBe(21);
    expect(net.peer(1).storage.firstIndex()).toBe(17);
    net.heal();
    net.tick(3);
    expect(net.sent.some((m) => m.type === 'snap' && m.to === 3)).toBe(true);
    expect(net.peer(3).storage.snapshot().metadata.index).toBe(21);
    expect(net.appliedData(3)).toEqual(net.appliedData(1));
    net.propose(1, 'after');
    net.stabilize();
    net.tick(1);
    expect(net.appliedData(3).at(-1)).toBe('after');
    expect(net.node(1).status().progress?.[3]?.state).toBe('replicate');
  });

  it('a follower inside the trailing window is caught up from the log, without a snapshot', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.isolate(3);
    for (let i = 0; i < 3; i++) net.propose(1, `v${i}`);
    net.stabilize();
    net.tick(2, [1, 2]);
    net.snapshotAndCompact(1, 1); // node 3 has index 1; entries 2.. are kept
    net.heal();
    net.tick(3);
    expect(net.sent.some((m) => m.type === 'snap')).toBe(false);
    expect(net.appliedData(3)).toEqual(['v0', 'v1', 'v2']);
  });

  it('progress enters snapshot state, and a failed snapshot sends it back to probe', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.isolate(3);
    for (let i = 0; i < 5; i++) net.propose(1, `v${i}`);
    net.stabilize();
    net.tick(2, [1, 2]);
    net.snapshotAndCompact(1);
    // Heartbeats reach 3 again but the snapshot is lost on the way.
    net.heal();
    net.dropIf = (m) => m.type === 'snap';
    net.node(1).tick();
    // Heartbeat, answer, a rejected append (3 lacks the entries), a probe that finds them compacted.
    for (let i = 0; i < 10 && net.node(1).status().progress?.[3]?.state !== 'snapshot'; i++) {
      net.processReadies();
      net.deliverQueued();
    }
    expect(net.node(1).status().progress?.[3]?.state).toBe('snapshot');
    net.processReadies();
    net.deliverQueued(); // the snapshot is dropped: the network reports the failure
    expect(net.node(1).status().progress?.[3]?.state).toBe('probe');
    net.dropIf = undefined;
    net.tick(3);
    expect(net.appliedData(3)).toEqual(net.appliedData(1));
  });

  it('a follower whose log contains the snapshot index with the same term keeps its log and advances commit', () => {
    const storage = new MemoryStorage(conf3);
    storage.append(entries(1, [1, 1, 1, 1, 1]));
    storage.setHardState({ term: 1, vote: 0, commit: 1 });
    const s = new Solo(1, conf3, {}, storage);
    s.node.step({ type: 'snap', from: 2, to: 1, term: 1, snapshot: snapAt(3, 1) });
    const msgs = s.drain();
    expect(s.storage.lastIndex()).toBe(5); // suffix 4..5 kept
    expect(s.storage.snapshot().metadata.index).toBe(0); // no snapshot installed
    expect(s.node.status().commit).toBe(3);
    const resp = msgs.find((m): m is AppendResponse => m.type === 'appResp');
    expect(resp).toMatchObject({ reject: false, index: 3 });
  });

  it('a follower whose log disagrees at the snapshot index replaces its log with the snapshot', () => {
    const storage = new MemoryStorage(conf3);
    storage.append(entries(1, [1, 1, 1, 1, 1]));
    storage.setHardState({ term: 2, vote: 0, commit: 1 });
    const s = new Solo(1, conf3, {}, storage);
    s.node.step({ type: 'snap', from: 2, to: 1, term: 2, snapshot: snapAt(4, 2) });
    const msgs = s.drain();
    expect(s.storage.snapshot().metadata.index).toBe(4);
    expect(s.storage.lastIndex()).toBe(4);
    expect(s.storage.firstIndex()).toBe(5);
    expect(s.node.status()).toMatchObject({ commit: 4, applied: 4 });
    expect(msgs.find((m) => m.type === 'appResp')).toMatchObject({ reject: false, index: 4 });
  });

  it('a snapshot older than the commit index is ignored', () => {
    const storage = new MemoryStorage(conf3);
    storage.append(entries(1, [1, 1, 1, 1, 1]));
    storage.setHardState({ term: 1, vote: 0, commit: 4 });
    const s = new Solo(1, conf3, {}, storage);
    s.node.step({ type: 'snap', from: 2, to: 1, term: 1, snapshot: snapAt(3, 5) });
    const msgs = s.drain();
    expect(s.storage.snapshot().metadata.index).toBe(0);
    expect(s.storage.lastIndex()).toBe(5);
    expect(s.node.status().commit).toBe(4);
    expect(msgs.find((m) => m.type === 'appResp')).toMatchObject({ reject: false, index: 4 });
  });

  it('a snapshot is handed out before any later committed entries and nothing is applied twice', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.isolate(3);
    for (let i = 0; i < 10; i++) net.propose(1, `v${i}`);
    net.stabilize();
    net.tick(2, [1, 2]);
    net.snapshotAndCompact(1);
    for (let i = 10; i < 15; i++) net.propose(1, `v${i}`);
    net.stabilize();
    net.heal();
    net.tick(4);
    // TestNetwork throws on any gap or repeat in applied indexes; the data must match too.
    expect(net.appliedData(3)).toEqual(net.appliedData(1));
    expect(net.appliedData(3)).toHaveLength(15);
  });
});

describe('restart from storage', () => {
  it('a restarted node keeps its term, vote, log and commit index', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    for (let i = 0; i < 5; i++) net.propose(1, `v${i}`);
    net.stabilize();
    net.tick(2);
    for (const id of [1, 2]) {
      const before = net.node(id).status();
      const p = net.restart(id);
      const after = p.node.status();
      expect(after).toMatchObject({
        term: before.term,
        vote: before.vote,
        commit: before.commit,
        lastIndex: before.lastIndex,
        role: 'follower',
      });
      expect(after.conf).toEqual(before.conf);
    }
    net.tick(30);
    const leader = net.leader() as number;
    expect(leader).toBeDefined();
    net.propose(leader, 'later');
    net.stabilize();
    net.tick(2);
    expect(net.appliedData(3)).toEqual(['v0', 'v1', 'v2', 'v3', 'v4', 'later']);
  });

  it('a restarted node re-delivers committed entries after its snapshot, and respects config.applied', () => {
    const storage = new MemoryStorage(conf3);
    storage.append(entries(1, [1, 1, 1, 1]));
    storage.setHardState({ term: 1, vote: 2, commit: 3 });
    const a = new Solo(1, conf3, {}, storage.clone());
    a.drain();
    expect(a.committed.map((e) => e.index)).toEqual([1, 2, 3]);
    const b = new Solo(1, conf3, { applied: 2 }, storage.clone());
    b.drain();
    expect(b.committed.map((e) => e.index)).toEqual([3]);
  });

  it('a restarted node with a snapshot starts from it', () => {
    const storage = new MemoryStorage(conf3);
    storage.append(entries(1, [1, 1, 1, 1, 1]));
    storage.setHardState({ term: 1, vote: 0, commit: 5 });
    storage.createSnapshot(4, conf3, bytes('state@4'));
    storage.compact(4);
    const s = new Solo(1, conf3, {}, storage);
    expect(s.node.status()).toMatchObject({ commit: 5, applied: 4, lastIndex: 5 });
    s.drain();
    expect(s.committed.map((e) => e.index)).toEqual([5]);
  });

  it('a stored snapshot newer than the stored commit index counts as committed (torn write of the hard state)', () => {
    const storage = new MemoryStorage(conf3);
    storage.applySnapshot({ metadata: { index: 7, term: 2, conf: conf3 }, data: bytes('state@7') });
    storage.setHardState({ term: 1, vote: 0, commit: 3 });
    const s = new Solo(1, conf3, {}, storage);
    expect(s.node.status()).toMatchObject({ commit: 7, applied: 7, lastIndex: 7 });
    expect(s.drain().length).toBe(0);
  });

  it('a stored commit index beyond the stored log is refused', () => {
    const storage = new MemoryStorage(conf3);
    storage.setHardState({ term: 1, vote: 0, commit: 3 });
    expect(() => new Solo(1, conf3, {}, storage)).toThrow(/outside the stored log/);
  });
});

describe('a received snapshot that is still being saved (issue 9 item 6)', () => {
  // The follower applied nothing yet; the snapshot lifts its commit index far above its applied
  // index, and no Ready has been handled (the runtime is still fsyncing the snapshot).
  function followerWithPendingSnapshot(): RawNode {
    const node = new RawNode(
      { id: 3, electionTicks: 10, heartbeatTicks: 1, random: () => 0 },
      new MemoryStorage(conf3),
    );
    node.step({ type: 'snap', from: 1, to: 3, term: 2, snapshot: snapAt(50, 2) });
    expect(node.hasReady()).toBe(true);
    return node;
  }

  it('a tick that times out the election while the snapshot is being saved campaigns instead of throwing', () => {
    const node = followerWithPendingSnapshot();
    for (let i = 0; i < 25; i++) node.tick();
    expect(node.status().role).toBe('preCandidate');
  });

  it('a leadership transfer (timeoutNow) that arrives while the snapshot is being saved is not lost', () => {
    const node = followerWithPendingSnapshot();
    node.step({ type: 'timeoutNow', from: 1, to: 3, term: 2 });
    expect(node.status()).toMatchObject({ role: 'candidate', term: 3 });
    // The vote requests go out with the Ready that also persists the snapshot.
    const rd = node.ready();
    expect(rd.snapshot?.metadata.index).toBe(50);
    expect(rd.messages.filter((m) => m.type === 'vote').map((m) => m.to)).toEqual([1, 2]);
  });
});
