// Log replication and commitment (Raft §5.3, §5.4.2, §8), flow control and progress states.

import { describe, expect, it } from 'vitest';
import { MemoryStorage } from './memory-storage.js';
import { bytes, Solo, TestNetwork } from './test-network.js';
import type { AppendMessage, AppendResponse, Entry, Message } from './types.js';

function logWithTerms(terms: number[]): Entry[] {
  return terms.map((term, i) => ({ type: 'normal', term, index: i + 1, data: bytes(`t${term}i${i + 1}`) }));
}

function storageWith(terms: number[], term: number, voters = [1, 2, 3]): MemoryStorage {
  const s = new MemoryStorage({ voters, learners: [] });
  s.append(logWithTerms(terms));
  s.setHardState({ term, vote: 0, commit: 0 });
  return s;
}

const isApp = (m: Message): m is AppendMessage => m.type === 'app';

describe('log replication (§5.3)', () => {
  it('a new leader appends an empty entry of its own term (§8)', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    const last = net.peer(1).storage.lastIndex();
    expect(last).toBe(1);
    const e = net.peer(1).storage.entries(1, 2)[0] as Entry;
    expect(e).toMatchObject({ type: 'normal', term: 1, index: 1 });
    expect(e.type === 'normal' && e.data.length).toBe(0);
  });

  it('a leader commits an entry once a majority stores it and every member applies it in order', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    for (const s of ['a', 'b', 'c']) net.propose(1, s);
    net.stabilize();
    net.tick(2);
    for (const id of [1, 2, 3]) expect(net.appliedData(id)).toEqual(['a', 'b', 'c']);
  });

  it('an entry stored on a minority is not committed; it commits when a majority has it', () => {
    const net = new TestNetwork([1, 2, 3, 4, 5]);
    net.elect(1);
    net.isolate(3);
    net.isolate(4);
    net.isolate(5);
    net.propose(1, 'x');
    net.stabilize();
    expect(net.node(1).status().commit).toBe(1);
    expect(net.appliedData(1)).toEqual([]);
    net.heal();
    net.tick(2);
    expect(net.node(1).status().commit).toBe(2);
    for (const id of [1, 2, 3, 4, 5]) expect(net.appliedData(id)).toEqual(['x']);
  });

  it('a follower rejects an append whose previous entry does not match, with a hint (§5.3)', () => {
    const s = new Solo(1, { voters: [1, 2, 3], learners: [] }, {}, storageWith([1, 1, 2], 2));
    s.node.step({ type: 'app', from: 2, to: 1, term: 3, logIndex: 5, logTerm: 3, entries: [], commit: 0 });
    const r = s.drain().filter((m): m is AppendResponse => m.type === 'appResp');
    expect(r).toEqual([expect.objectContaining({ reject: true, index: 5, rejectHint: 3, logTermHint: 2 })]);
    expect(s.storage.lastIndex()).toBe(3);
  });

  it('a follower deletes a conflicting suffix and appends the leader entries (§5.3)', () => {
    const s = new Solo(1, { voters: [1, 2, 3], learners: [] }, {}, storageWith([1, 1, 2, 2], 2));
    const ents = logWithTerms([1, 1, 3]).slice(2);
    s.node.step({ type: 'app', from: 2, to: 1, term: 3, logIndex: 2, logTerm: 1, entries: ents, commit: 3 });
    s.drain();
    expect(s.storage.lastIndex()).toBe(3);
    expect(s.storage.term(3)).toBe(3);
    expect(s.node.status().commit).toBe(3);
  });

  it('a diverged follower is repaired with about one round trip per term (fast backtracking)', () => {
    // The etcd example: leader terms 1 3 3 3 5 5 5 5 5, follower 1 1 1 1 2 2.
    const net = new TestNetwork([1, 2, 3]);
    net.start(1, storageWith([1, 3, 3, 3, 5, 5, 5, 5, 5], 5));
    net.start(2, storageWith([1, 1, 1, 1, 2, 2], 2));
    net.start(3, storageWith([1, 3, 3, 3, 5, 5, 5, 5, 5], 5));
    expect(net.elect(1)).toBe(1);
    net.tick(3);
    const leaderLog = net.peer(1).storage.entries(1, 11);
    expect(net.peer(2).storage.entries(1, 11)).toEqual(leaderLog);
    const rejections = net.sent.filter((m) => m.type === 'appResp' && m.from === 2 && m.reject);
    expect(rejections.length).toBeLessThanOrEqual(2);
  });

  it('batching: proposals made between Readies go out as one append per follower', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.tick(1);
    const before = net.sent.length;
    for (let i = 0; i < 100; i++) net.propose(1, `p${i}`);
    net.processReadies();
    const apps = net.sent.slice(before).filter(isApp);
    expect(apps.map((m) => m.to).sort()).toEqual([2, 3]);
    expect(apps.every((m) => m.entries.length === 100)).toBe(true);
  });

  it('pipelining: a follower in replicate state gets new appends before earlier ones are acked', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.tick(1);
    net.holdIf = (m) => m.type === 'appResp' && m.from === 2;
    const before = net.sent.length;
    for (let i = 0; i < 3; i++) {
      net.propose(1, `p${i}`);
      net.stabilize();
    }
    const apps = net.sent.slice(before).filter((m) => isApp(m) && m.to === 2 && m.entries.length > 0);
    expect(apps.length).toBe(3);
  });

  it('messages respect maxMessageBytes and maxEntriesPerMessage', () => {
    const cfg = { electionTicks: 10, heartbeatTicks: 1, maxMessageBytes: 1000, maxEntriesPerMessage: 10 };
    const net = new TestNetwork([1, 2, 3], cfg);
    net.elect(1);
    const before = net.sent.length;
    for (let i = 0; i < 100; i++) net.node(1).propose(new Uint8Array(64 + (i % 3) * 50));
    net.stabilize();
    const apps = net.sent.slice(before).filter(isApp);
    for (const m of apps) {
      const size = m.entries.reduce((s, e) => s + (e.type === 'normal' ? e.data.length : 0), 0);
      expect(m.entries.length).toBeLessThanOrEqual(10);
      if (m.entries.length > 1) expect(size).toBeLessThanOrEqual(1000);
    }
    expect(net.node(2).status().commit).toBe(101);
  });
});

describe('commitment (§5.4.2)', () => {
  it('a leader does not commit an entry of an earlier term by counting replicas; its own no-op commits it', () => {
    // Node 1 holds index 1 and 2 from term 1 (never committed), becomes leader of term 3.
    const s = new Solo(1, { voters: [1, 2, 3], learners: [] }, { preVote: false }, storageWith([1, 1], 2));
    s.node.campaign();
    s.drain();
    s.node.step({ type: 'voteResp', from: 2, to: 1, term: 3, reject: false });
    s.drain();
    expect(s.node.status()).toMatchObject({ role: 'leader', term: 3, lastIndex: 3 });
    // Both followers hold index 2 (term 1) but not the no-op at 3: a majority, from an older term.
    for (const from of [2, 3]) {
      s.node.step({
        type: 'appResp',
        from,
        to: 1,
        term: 3,
        index: 2,
        reject: false,
        rejectHint: 0,
        logTermHint: 0,
      });
    }
    s.drain();
    expect(s.node.status().commit).toBe(0);
    s.node.step({
      type: 'appResp',
      from: 2,
      to: 1,
      term: 3,
      index: 3,
      reject: false,
      rejectHint: 0,
      logTermHint: 0,
    });
    s.drain();
    expect(s.node.status().commit).toBe(3);
  });

  it('a leader only commits entries from its current term (§5.4.2, Figure 8)', () => {
    const cfg = {
      electionTicks: 10,
      heartbeatTicks: 1,
      preVote: false,
      checkQuorum: false,
      maxEntriesPerMessage: 1,
    };
    const net = new TestNetwork([1, 2, 3, 4, 5], cfg);
    // (a) S1 leads term 1 and replicates X (index 2) to S2 only.
    net.elect(1);
    for (const id of [3, 4, 5]) net.cut(1, id);
    net.propose(1, 'X');
    net.stabilize();
    expect(net.peer(2).storage.lastIndex()).toBe(2);
    // (b) S1 crashes; S5 is elected for term 2 by S3, S4, S5 and appends at index 2 without replicating.
    net.stop(1);
    net.dropIf = (m) => m.from === 5 && m.type === 'app';
    expect(net.elect(5)).toBe(5);
    expect(net.node(5).status().term).toBe(2);
    net.stop(5);
    // (c) S1 restarts, is elected for a later term and replicates X to S3 but not its own no-op.
    net.heal();
    net.restart(1);
    let firstProbeTo3 = true;
    net.dropIf = (m) => {
      if (!isApp(m) || m.from !== 1) return false;
      if (m.to === 4) return true;
      if (!m.entries.some((e) => e.term > 2)) return false;
      if (m.to === 3 && firstProbeTo3) {
        firstProbeTo3 = false; // delivered: S3 rejects it (it lacks index 2) and the leader backs off
        return false;
      }
      return true;
    };
    for (let i = 0; i < 5 && net.leader() !== 1; i++) net.elect(1);
    expect(net.leader()).toBe(1);
    net.tick(3, [1, 2, 3]);
    const term3 = net.node(1).status().term;
    // X (term 1) is on S1, S2, S3: a majority of five. It must not be committed.
    for (const id of [1, 2, 3]) expect(net.peer(id).storage.term(2)).toBe(1);
    expect(net.node(1).status().commit).toBe(1);
    expect(net.appliedData(1)).toEqual([]);
    // (d) S1 crashes; S5 (last term 2 > 1) wins and overwrites X everywhere. Had X been committed,
    //     this would lose a committed entry: that is why counting replicas is not enough.
    net.stop(1);
    net.heal();
    net.restart(5);
    for (let i = 0; i < 5 && net.leader() !== 5; i++) net.elect(5);
    expect(net.leader()).toBe(5);
    expect(net.node(5).status().term).toBeGreaterThan(term3);
    net.tick(3, [2, 3, 4, 5]);
    for (const id of [2, 3, 4, 5]) {
      expect(net.peer(id).storage.term(2)).toBe(2);
      expect(net.appliedData(id)).not.toContain('X');
    }
  });

  it('once the leader replicates an entry of its own term to a majority, earlier entries commit with it (Figure 8e)', () => {
    const cfg = { electionTicks: 10, heartbeatTicks: 1, preVote: false, checkQuorum: false };
    const net = new TestNetwork([1, 2, 3, 4, 5], cfg);
    net.elect(1);
    for (const id of [3, 4, 5]) net.cut(1, id);
    net.propose(1, 'X');
    net.stabilize();
    net.stop(1);
    net.restart(1);
    net.heal();
    for (let i = 0; i < 5 && net.leader() !== 1; i++) net.elect(1);
    net.tick(2);
    for (const id of [1, 2, 3, 4, 5]) expect(net.appliedData(id)).toEqual(['X']);
  });
});

describe('flow control and progress', () => {
  it('never more than maxInflightMessages unacknowledged appends to a follower', () => {
    const cfg = { electionTicks: 10, heartbeatTicks: 5, maxInflightMessages: 4, maxEntriesPerMessage: 1 };
    const net = new TestNetwork([1, 2, 3], cfg);
    net.elect(1);
    expect(net.node(1).status().progress?.[2]?.state).toBe('replicate');
    net.holdIf = (m) => m.type === 'appResp' && m.from === 2;
    const before = net.sent.length;
    for (let i = 0; i < 20; i++) net.propose(1, `p${i}`);
    net.stabilize();
    const toFollower = () =>
      net.sent.slice(before).filter((m) => isApp(m) && m.to === 2 && m.entries.length > 0);
    expect(toFollower().length).toBe(4);
    // Acks free the window; the leader streams the next batch, again at most 4 ahead.
    for (let round = 0; round < 10 && net.node(2).status().lastIndex < 21; round++) {
      const acked = net.held.length;
      net.deliverHeld();
      net.stabilize();
      expect(toFollower().length).toBeLessThanOrEqual(4 * (round + 2));
      expect(acked).toBeGreaterThan(0);
    }
    net.heal();
    net.tick(5);
    expect(net.node(2).status().commit).toBe(21);
  });

  it('in-flight bytes are bounded per follower', () => {
    const cfg = { electionTicks: 10, heartbeatTicks: 5, maxInflightBytes: 100, maxEntriesPerMessage: 1 };
    const net = new TestNetwork([1, 2, 3], cfg);
    net.elect(1);
    net.holdIf = (m) => m.type === 'appResp' && m.from === 2;
    const before = net.sent.length;
    for (let i = 0; i < 10; i++) net.node(1).propose(new Uint8Array(40));
    net.stabilize();
    const sent = net.sent.slice(before).filter((m) => isApp(m) && m.to === 2 && m.entries.length > 0);
    // 40 + 40 + 40 >= 100 fills the window after the third message.
    expect(sent.length).toBe(3);
  });

  it('in probe state a leader sends one append and waits for an answer', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.isolate(3);
    net.elect(1);
    expect(net.node(1).status().progress?.[3]?.state).toBe('probe');
    const before = net.sent.length;
    for (let i = 0; i < 5; i++) {
      net.propose(1, `p${i}`);
      net.stabilize();
    }
    // The probe sent at election is still unanswered: nothing more goes to 3 until a heartbeat answer.
    expect(net.sent.slice(before).filter((m) => isApp(m) && m.to === 3).length).toBe(0);
  });

  it('progress moves probe -> replicate on success and back to probe when reported unreachable', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    expect(net.node(1).status().progress?.[2]?.state).toBe('replicate');
    net.node(1).reportUnreachable(2);
    expect(net.node(1).status().progress?.[2]?.state).toBe('probe');
    net.tick(1);
    expect(net.node(1).status().progress?.[2]?.state).toBe('replicate');
  });

  it('a leader refuses proposals beyond maxUncommittedBytes and accepts them again after commit', () => {
    const cfg = { electionTicks: 10, heartbeatTicks: 1, maxUncommittedBytes: 1000 };
    const net = new TestNetwork([1, 2, 3], cfg);
    net.elect(1);
    net.isolate(2);
    net.isolate(3);
    let accepted = 0;
    let error: unknown;
    for (let i = 0; i < 100 && error === undefined; i++) {
      try {
        net.node(1).propose(new Uint8Array(64));
        accepted++;
      } catch (e) {
        error = e;
      }
    }
    expect(accepted).toBe(15); // 15 * 64 = 960; the 16th would exceed 1000
    expect(error).toMatchObject({ name: 'ProposalDroppedError', reason: 'tooMuchUncommitted' });
    net.heal();
    net.tick(3);
    expect(() => net.node(1).propose(new Uint8Array(64))).not.toThrow();
  });

  it('a follower refuses proposals, naming the leader', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    expect(() => net.propose(2, 'x')).toThrow(expect.objectContaining({ reason: 'notLeader', lead: 1 }));
  });

  it('ignores messages addressed to another node and messages from non-members', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    const term = net.node(1).status().term;
    const before = net.node(1).status();
    net.node(1).step({
      type: 'appResp',
      from: 2,
      to: 3,
      term,
      index: 99,
      reject: false,
      rejectHint: 0,
      logTermHint: 0,
    });
    net.node(1).step({
      type: 'appResp',
      from: 9,
      to: 1,
      term,
      index: 99,
      reject: false,
      rejectHint: 0,
      logTermHint: 0,
    });
    net.node(1).step({ type: 'heartbeatResp', from: 9, to: 1, term, context: new Uint8Array() });
    expect(net.node(1).status()).toEqual(before);
  });
});
