// Leader election (Raft §5.2, §5.4.1), pre-vote (thesis §9.6), check-quorum and leader stickiness
// (thesis §6.2, §4.2.3).

import { describe, expect, it } from 'vitest';
import { MemoryStorage } from './memory-storage.js';
import { bytes, Solo, TestNetwork } from './test-network.js';
import type { Message, VoteRequest, VoteResponse } from './types.js';

const conf3 = { voters: [1, 2, 3], learners: [] };

function voteReq(from: number, to: number, term: number, lastIndex: number, lastTerm: number): VoteRequest {
  return { type: 'vote', from, to, term, lastIndex, lastTerm, transfer: false };
}

function responses(msgs: Message[], type: 'voteResp' | 'preVoteResp'): VoteResponse[] {
  return msgs.filter((m): m is VoteResponse => m.type === type);
}

describe('leader election (§5.2)', () => {
  it('a follower starts an election after a randomized timeout in [electionTicks, 2*electionTicks)', () => {
    const seen = new Set<number>();
    for (let id = 1; id <= 20; id++) {
      const voters = [id, 100, 101];
      const s = new Solo(id, { voters, learners: [] }, { preVote: false });
      let ticks = 0;
      while (s.node.status().role === 'follower') {
        s.node.tick();
        ticks++;
        if (ticks > 100) throw new Error('never campaigned');
      }
      expect(s.node.status().role).toBe('candidate');
      expect(ticks).toBeGreaterThanOrEqual(10);
      expect(ticks).toBeLessThan(20);
      seen.add(ticks);
    }
    // Randomized: 20 nodes do not all pick the same timeout.
    expect(seen.size).toBeGreaterThan(1);
  });

  it('a candidate increments its term, votes for itself and requests votes from every other voter', () => {
    const s = new Solo(1, conf3, { preVote: false });
    s.node.campaign();
    const msgs = s.drain();
    expect(s.node.status()).toMatchObject({ role: 'candidate', term: 1, vote: 1 });
    expect(s.storage.hardState()).toMatchObject({ term: 1, vote: 1 });
    const reqs = msgs.filter((m) => m.type === 'vote');
    expect(reqs.map((m) => m.to).sort()).toEqual([2, 3]);
    expect(reqs.every((m) => m.term === 1)).toBe(true);
  });

  it('a candidate that receives votes from a majority becomes leader and others follow it', () => {
    const net = new TestNetwork([1, 2, 3]);
    expect(net.elect(1)).toBe(1);
    for (const id of [2, 3])
      expect(net.node(id).status()).toMatchObject({ role: 'follower', lead: 1, term: 1 });
  });

  it('each server votes for at most one candidate in a given term, first-come-first-served', () => {
    const s = new Solo(1, conf3);
    s.node.step(voteReq(2, 1, 1, 0, 0));
    const first = responses(s.drain(), 'voteResp');
    expect(first).toEqual([expect.objectContaining({ to: 2, reject: false, term: 1 })]);
    s.node.step(voteReq(3, 1, 1, 0, 0));
    expect(responses(s.drain(), 'voteResp')).toEqual([expect.objectContaining({ to: 3, reject: true })]);
    // A repeated request from the candidate we voted for is granted again (lost response).
    s.node.step(voteReq(2, 1, 1, 0, 0));
    expect(responses(s.drain(), 'voteResp')).toEqual([expect.objectContaining({ to: 2, reject: false })]);
  });

  it('a vote response is only emitted in a Ready that persists the vote', () => {
    const s = new Solo(1, conf3);
    s.node.step(voteReq(2, 1, 5, 0, 0));
    const rd = s.node.ready();
    expect(rd.messages.some((m) => m.type === 'voteResp' && !m.reject)).toBe(true);
    expect(rd.hardState).toEqual({ term: 5, vote: 2, commit: 0 });
    expect(rd.mustSync).toBe(true);
    s.node.advance(rd);
  });

  it('a follower rejects votes for a candidate whose log is less up-to-date (§5.4.1)', () => {
    // Node 1 holds entries up to index 2 at term 2.
    const storage = new MemoryStorage(conf3);
    storage.append([
      { type: 'normal', term: 1, index: 1, data: bytes('a') },
      { type: 'normal', term: 2, index: 2, data: bytes('b') },
    ]);
    storage.setHardState({ term: 2, vote: 0, commit: 0 });
    const cases: [lastIndex: number, lastTerm: number, granted: boolean][] = [
      [1, 1, false], // older last term
      [3, 1, false], // longer but older last term
      [1, 2, false], // same last term, shorter
      [2, 2, true], // same
      [3, 2, true], // same term, longer
      [1, 3, true], // newer last term
    ];
    for (const [li, lt, granted] of cases) {
      const s = new Solo(1, conf3, {}, storage.clone());
      s.node.step(voteReq(2, 1, 3, li, lt));
      const r = responses(s.drain(), 'voteResp');
      expect(r, `candidate log (${li}, ${lt})`).toEqual([expect.objectContaining({ reject: !granted })]);
    }
  });

  it('a vote request from an older term is rejected with the current term, so the candidate catches up (§5.1)', () => {
    // Simulator finding F3: staying silent here deadlocked elections with pre-vote off.
    const storage = new MemoryStorage(conf3);
    storage.setHardState({ term: 9, vote: 0, commit: 0 });
    const s = new Solo(1, conf3, { preVote: false }, storage);
    s.node.step(voteReq(2, 1, 4, 0, 0));
    const r = responses(s.drain(), 'voteResp');
    expect(r).toEqual([expect.objectContaining({ term: 9, reject: true, to: 2 })]);
    expect(s.node.status().term).toBe(9);
  });

  it('a candidate returns to follower when it discovers a leader of its term (§5.2)', () => {
    const s = new Solo(1, conf3, { preVote: false });
    s.node.campaign();
    s.drain();
    s.node.step({ type: 'heartbeat', from: 2, to: 1, term: 1, commit: 0, context: new Uint8Array() });
    expect(s.node.status()).toMatchObject({ role: 'follower', lead: 2, term: 1 });
  });

  it('a server that sees a higher term adopts it and a leader steps down (§5.1)', () => {
    const net = new TestNetwork([1, 2, 3], {
      electionTicks: 10,
      heartbeatTicks: 1,
      checkQuorum: false,
      preVote: false,
    });
    net.elect(1);
    net.node(1).step({
      type: 'appResp',
      from: 2,
      to: 1,
      term: 7,
      index: 0,
      reject: false,
      rejectHint: 0,
      logTermHint: 0,
    });
    expect(net.node(1).status()).toMatchObject({ role: 'follower', term: 7, lead: 0 });
  });

  it('split vote: no candidate wins the term and a later election with a higher term does (§5.2)', () => {
    const net = new TestNetwork([1, 2, 3, 4], { electionTicks: 10, heartbeatTicks: 1, preVote: false });
    // 1 and 2 campaign simultaneously; 3 hears 1 first, 4 hears 2 first: 2 votes each, no majority of 4.
    net.holdIf = (m) => m.type === 'vote';
    net.node(1).campaign();
    net.node(2).campaign();
    net.stabilize();
    const order = (to: number, first: number) => (m: Message) => m.to === to && m.from === first;
    net.holdIf = undefined;
    net.deliverHeld(order(3, 1));
    net.deliverHeld(order(4, 2));
    net.deliverHeld();
    net.stabilize();
    expect(net.leader()).toBeUndefined();
    expect(net.node(1).status()).toMatchObject({ term: 1 });
    // Randomized timeouts break the tie.
    for (let i = 0; i < 40 && net.leader() === undefined; i++) net.tick();
    const leader = net.leader();
    expect(leader).toBeDefined();
    expect(net.node(leader as number).status().term).toBeGreaterThan(1);
  });

  it('elections happen on their own from ticks alone', () => {
    const net = new TestNetwork([1, 2, 3]);
    for (let i = 0; i < 30 && net.leader() === undefined; i++) net.tick();
    expect(net.leader()).toBeDefined();
  });
});

describe('pre-vote (thesis §9.6)', () => {
  it('a pre-candidate does not change its term or vote', () => {
    const s = new Solo(1, conf3);
    s.node.campaign();
    const msgs = s.drain();
    expect(s.node.status()).toMatchObject({ role: 'preCandidate', term: 0, vote: 0 });
    const reqs = msgs.filter((m) => m.type === 'preVote');
    expect(reqs.map((m) => m.to).sort()).toEqual([2, 3]);
    expect(reqs.every((m) => m.term === 1)).toBe(true); // asks for the term it would use
  });

  it('a node that receives a pre-vote for a higher term does not bump its own term', () => {
    const s = new Solo(1, conf3);
    s.node.step({ type: 'preVote', from: 2, to: 1, term: 4, lastIndex: 0, lastTerm: 0, transfer: false });
    const r = responses(s.drain(), 'preVoteResp');
    expect(r).toEqual([expect.objectContaining({ reject: false, term: 4 })]);
    expect(s.node.status()).toMatchObject({ term: 0, vote: 0 });
  });

  it('a pre-candidate that gets a rejection with a higher term follows that term', () => {
    const s = new Solo(1, conf3);
    s.node.campaign();
    s.drain();
    s.node.step({ type: 'preVoteResp', from: 2, to: 1, term: 9, reject: true });
    expect(s.node.status()).toMatchObject({ role: 'follower', term: 9 });
  });

  it('a partitioned node rejoining does not disrupt the leader (its term does not grow)', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    const term = net.node(1).status().term;
    net.isolate(3);
    net.tick(100);
    expect(net.node(3).status().term).toBe(term);
    expect(net.node(3).status().role).not.toBe('leader');
    net.heal();
    net.tick(5);
    expect(net.leader()).toBe(1);
    expect(net.node(1).status().term).toBe(term);
  });

  it('without pre-vote, the same rejoining node forces a new election (contrast)', () => {
    const net = new TestNetwork([1, 2, 3], { electionTicks: 10, heartbeatTicks: 1, preVote: false });
    net.elect(1);
    const term = net.node(1).status().term;
    net.isolate(3);
    net.tick(100);
    expect(net.node(3).status().term).toBeGreaterThan(term);
    net.heal();
    net.tick(30);
    expect(net.node(net.leader() as number).status().term).toBeGreaterThan(term);
  });
});

describe('check-quorum and leader stickiness', () => {
  it('a leader that has not heard from a majority within an election timeout steps down', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.isolate(1);
    net.tick(10, [1]);
    expect(net.node(1).status().role).toBe('leader'); // recently heard from its followers
    net.tick(10, [1]);
    expect(net.node(1).status().role).toBe('follower');
  });

  it('a leader that hears from a majority stays leader', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.isolate(3);
    net.tick(50);
    expect(net.leader()).toBe(1);
  });

  it('a follower that heard from the leader within the election timeout ignores (pre)votes', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    const term = net.node(2).status().term;
    for (const type of ['vote', 'preVote'] as const) {
      net
        .node(2)
        .step({ type, from: 3, to: 2, term: term + 1, lastIndex: 100, lastTerm: 100, transfer: false });
      net.processReadies();
    }
    const answered = net.sent.filter(
      (m) => m.from === 2 && m.to === 3 && (m.type === 'voteResp' || m.type === 'preVoteResp'),
    );
    expect(answered).toEqual([]);
    expect(net.node(2).status()).toMatchObject({ term, lead: 1 });
  });

  it('the same request is honoured once the follower has not heard from a leader for an election timeout', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.stop(1);
    net.tick(10, [2]);
    const term = net.node(2).status().term;
    // (Node 2 may have become a pre-candidate itself by now: it grants a better pre-vote either way.)
    net.node(2).step({
      type: 'preVote',
      from: 3,
      to: 2,
      term: term + 1,
      lastIndex: 100,
      lastTerm: 100,
      transfer: false,
    });
    net.processReadies();
    expect(net.sent.some((m) => m.from === 2 && m.to === 3 && m.type === 'preVoteResp' && !m.reject)).toBe(
      true,
    );
  });

  it('a leadership-transfer vote bypasses stickiness', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    const term = net.node(2).status().term;
    net
      .node(2)
      .step({ type: 'vote', from: 3, to: 2, term: term + 1, lastIndex: 100, lastTerm: 100, transfer: true });
    net.processReadies();
    expect(net.sent.some((m) => m.from === 2 && m.to === 3 && m.type === 'voteResp' && !m.reject)).toBe(true);
  });

  it('a stale leader learns the newer term from an append response and steps down', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.isolate(1);
    for (let i = 0; i < 40 && (net.leader() === 1 || net.leader() === undefined); i++) net.tick(1, [2, 3]);
    const newLeader = net.leader();
    expect([2, 3]).toContain(newLeader);
    // Old leader still thinks it leads (it has not ticked); it sends a heartbeat at its old term.
    net.heal();
    net.node(1).tick();
    net.stabilize();
    expect(net.node(1).status().role).toBe('follower');
    expect(net.node(1).status().term).toBe(net.node(newLeader as number).status().term);
  });
});

describe('who may campaign', () => {
  it('a learner never campaigns', () => {
    const net = new TestNetwork([1, 2, 3], undefined, { learners: [3] });
    net.tick(100, [3]);
    expect(net.node(3).status().role).toBe('follower');
    net.node(3).campaign();
    expect(net.node(3).status().role).toBe('follower');
  });

  it('a node that is not in the configuration never campaigns', () => {
    const s = new Solo(9, conf3);
    for (let i = 0; i < 100; i++) s.node.tick();
    s.node.campaign();
    expect(s.node.status().role).toBe('follower');
    expect(s.drain()).toEqual([]);
  });

  it('a single-voter cluster elects itself at once', () => {
    const s = new Solo(1, { voters: [1], learners: [] });
    s.node.campaign();
    s.drain();
    expect(s.node.status()).toMatchObject({ role: 'leader', term: 1 });
  });
});
