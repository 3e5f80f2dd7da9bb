// Linearizable reads via ReadIndex (thesis §6.4) and leader-lease bookkeeping.

import { describe, expect, it } from 'vitest';
import { roundOf } from './read-only.js';
import { bytes, Solo, TestNetwork, text } from './test-network.js';
import type { HeartbeatMessage, Message } from './types.js';

describe('ReadIndex', () => {
  it('on the leader: answers with the commit index after a quorum acknowledges a heartbeat round', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.propose(1, 'a');
    net.stabilize();
    net.holdIf = (m) => m.type === 'heartbeatResp';
    net.node(1).readIndex(bytes('r1'));
    net.stabilize();
    expect(net.peer(1).readStates).toEqual([]); // not before a quorum confirms leadership
    // The heartbeat carries the leader's round context, not the request's (read-only.ts).
    const hb = net.sent.filter(
      (m): m is HeartbeatMessage => m.type === 'heartbeat' && roundOf(m.context) === 1,
    );
    expect(hb.map((m) => m.to).sort()).toEqual([2, 3]);
    net.holdIf = undefined;
    net.deliverHeld((m) => m.from === 2); // leader + 2 = majority of 3
    net.stabilize();
    expect(net.peer(1).readStates).toEqual([{ index: 2, context: bytes('r1') }]);
  });

  it('a partitioned leader cannot answer reads', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.isolate(1);
    net.node(1).readIndex(bytes('stale?'));
    net.tick(5, [1]);
    expect(net.peer(1).readStates).toEqual([]);
  });

  it('via a follower: it forwards to the leader and emits the read state the leader returns', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.propose(1, 'a');
    net.stabilize();
    net.node(2).readIndex(bytes('f1'));
    net.stabilize();
    expect(net.sent.some((m) => m.type === 'readIndex' && m.from === 2 && m.to === 1)).toBe(true);
    expect(net.sent.some((m) => m.type === 'readIndexResp' && m.to === 2)).toBe(true);
    expect(net.peer(2).readStates).toEqual([{ index: 2, context: bytes('f1') }]);
    expect(net.peer(1).readStates).toEqual([]);
  });

  it('a follower with no known leader refuses the read', () => {
    const net = new TestNetwork([1, 2, 3]);
    expect(() => net.node(2).readIndex(bytes('x'))).toThrow(expect.objectContaining({ reason: 'notLeader' }));
  });

  it('a new leader defers reads until it has committed an entry of its own term', () => {
    const net = new TestNetwork([1, 2, 3], { electionTicks: 10, heartbeatTicks: 1, preVote: false });
    net.holdIf = (m) => m.type === 'app';
    net.node(1).campaign();
    net.stabilize();
    expect(net.node(1).status()).toMatchObject({ role: 'leader', commit: 0 });
    net.node(1).readIndex(bytes('early'));
    net.stabilize();
    expect(net.sent.some((m) => m.type === 'heartbeat' && text(m.context) === 'early')).toBe(false);
    expect(net.peer(1).readStates).toEqual([]);
    net.holdIf = undefined;
    net.deliverHeld();
    net.stabilize();
    // The no-op committed (index 1); then the read round ran and answered with index 1.
    expect(net.peer(1).readStates).toEqual([{ index: 1, context: bytes('early') }]);
  });

  it('a single-node cluster answers at once, without a heartbeat round', () => {
    const s = new Solo(1, { voters: [1], learners: [] });
    s.node.campaign();
    s.drain();
    s.node.readIndex(bytes('solo'));
    const msgs = s.drain();
    expect(msgs).toEqual([]);
    expect(s.readStates).toEqual([{ index: 1, context: bytes('solo') }]);
  });

  it('several reads queued behind one heartbeat round are all answered', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.holdIf = (m) => m.type === 'heartbeatResp';
    for (const c of ['a', 'b', 'c']) net.node(1).readIndex(bytes(c));
    net.stabilize();
    net.holdIf = undefined;
    net.deliverHeld((m) => roundOf((m as HeartbeatMessage).context) === 3);
    net.stabilize();
    expect(net.peer(1).readStates.map((r) => text(r.context))).toEqual(['a', 'b', 'c']);
  });

  it('a duplicated forwarded read is not confirmed by a late ack of the heartbeat sent for its first copy (full simulator, seed 483645)', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.propose(1, 'a');
    net.stabilize();
    // Node 3 forwards a read; node 2 confirms the leader's round for it, node 3's own ack is late (held).
    net.holdIf = (m) => m.type === 'heartbeatResp' && m.from === 3;
    const before = net.sent.length;
    net.node(3).readIndex(bytes('dup'));
    net.stabilize();
    const firstCopy = net.sent.slice(before).find((m) => m.type === 'readIndex' && m.from === 3) as Message;
    const lateAck = net.sent.slice(before).find((m) => m.type === 'heartbeatResp' && m.from === 3) as Message;
    expect(firstCopy).toBeDefined();
    expect(lateAck).toBeDefined();
    // Both followers are gone now (in the seed: one crashed, one elected itself in a later term). A read of the
    // leader's own arrives, then a duplicate of node 3's forwarded request, then the late ack.
    net.isolate(2);
    net.isolate(3);
    net.node(1).readIndex(bytes('mine'));
    net.node(1).step(firstCopy);
    net.stabilize();
    net.node(1).step(lateAck);
    net.stabilize();
    // That ack answered a heartbeat sent before 'mine' arrived: it proves nothing about leadership since.
    expect(net.peer(1).readStates.map((r) => text(r.context))).toEqual([]);
  });

  it('a read queued when a conf change leaves the leader as the only voter is answered (review of FS-14)', () => {
    const net = new TestNetwork([1, 2]);
    net.elect(1);
    net.propose(1, 'a');
    net.stabilize();
    // 2 acknowledges appends but its heartbeat acks are lost.
    net.dropIf = (m) => m.type === 'heartbeatResp' && m.from === 2;
    net.node(1).readIndex(bytes('r'));
    net.stabilize();
    net.node(1).proposeConfChange({ type: 'remove', nodeId: 2 });
    net.stabilize();
    expect(net.peer(1).conf.voters).toEqual([1]);
    net.dropIf = undefined;
    net.tick(50);
    net.node(1).readIndex(bytes('later'));
    net.stabilize();
    // Before: 'later' was answered at once and 'r', which arrived first, waited for ever (no heartbeat goes anywhere).
    expect(net.peer(1).readStates.map((r) => text(r.context))).toContain('later');
    expect(net.peer(1).readStates.map((r) => text(r.context))).toContain('r');
  });

  it('an ack of round k+1 counts for round k too (5 voters, one ack per round; review of FS-14)', () => {
    const net = new TestNetwork([1, 2, 3, 4, 5]);
    net.elect(1);
    net.propose(1, 'a');
    net.stabilize();
    // Round k reaches only follower k+1 (acks to the others are lost).
    net.dropIf = (m) => {
      if (m.type !== 'heartbeatResp') return false;
      const r = roundOf(m.context);
      return r === undefined || m.from !== r + 1;
    };
    for (const c of ['a', 'b', 'c']) {
      net.node(1).readIndex(bytes(c));
      net.stabilize();
    }
    // Round 1 acked by {1,2}; round 2 by {1,3}; round 3 by {1,4}: every follower 2,3 acked a round >= 1 after 'a'
    // arrived, so {1,2,3} confirms 'a' (and {1,3,4} confirms 'a','b'), which is what is released (before: nothing).
    expect(net.peer(1).readStates.map((r) => text(r.context))).toEqual(['a', 'b']);
  });
});

describe('leader lease', () => {
  const leaseCfg = { electionTicks: 10, heartbeatTicks: 2, leaderLease: true, leaseMarginTicks: 2 };

  function leaseNet(): TestNetwork {
    const net = new TestNetwork([1, 2, 3], leaseCfg);
    // With leaderLease, freshly started nodes refuse votes for an election timeout.
    net.tick(10);
    for (let i = 0; i < 40 && net.leader() === undefined; i++) net.tick();
    return net;
  }

  it('is valid after a quorum acknowledges and lasts electionTicks - margin from the acknowledged send tick', () => {
    const net = leaseNet();
    const leader = net.leader() as number;
    expect(net.node(leader).status().leaseValid).toBe(true);
    const others = [1, 2, 3].filter((id) => id !== leader);
    for (const id of others) net.isolate(id);
    // The last acknowledged heartbeat was sent at most one heartbeat interval ago.
    let ticks = 0;
    while (net.node(leader).status().leaseValid) {
      net.tick(1, [leader]);
      ticks++;
      expect(ticks).toBeLessThan(20);
    }
    expect(ticks).toBeGreaterThanOrEqual(10 - 2 - 2);
    expect(ticks).toBeLessThanOrEqual(10 - 2);
    expect(net.node(leader).status().leaseRemainingTicks).toBe(0);
    net.heal();
    net.tick(2);
    expect(net.node(leader).status().leaseValid).toBe(true);
  });

  it('no other leader is elected while the old leader still believes its lease is valid', () => {
    const net = leaseNet();
    const leader = net.leader() as number;
    net.isolate(leader);
    // Tick everyone one tick at a time; a new leader may appear only after the old lease expired.
    for (let i = 0; i < 60; i++) {
      const stillValid = net.node(leader).status().leaseValid === true;
      net.tick(1);
      const other = [1, 2, 3].find((id) => id !== leader && net.node(id).status().role === 'leader');
      if (other !== undefined) {
        expect(stillValid).toBe(false);
        return;
      }
    }
    throw new Error('no new leader was elected');
  });

  it('is invalid on followers, and during and after a leadership transfer in the same term', () => {
    const net = leaseNet();
    const leader = net.leader() as number;
    const other = [1, 2, 3].find((id) => id !== leader) as number;
    expect(net.node(other).status().leaseValid).toBeUndefined();
    net.isolate(other);
    net.node(leader).transferLeadership(other);
    expect(net.node(leader).status().leaseValid).toBe(false);
  });

  it('is not reported when leaderLease is off, and leaderLease requires checkQuorum', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    expect(net.node(1).status().leaseValid).toBeUndefined();
    expect(
      () => new Solo(1, { voters: [1], learners: [] }, { leaderLease: true, checkQuorum: false }),
    ).toThrow(/leaderLease requires checkQuorum/);
  });

  it('with leaderLease, a restarted node refuses votes for an election timeout (it may have acked a lease)', () => {
    const net = leaseNet();
    const leader = net.leader() as number;
    const follower = [1, 2, 3].find((id) => id !== leader) as number;
    const p = net.restart(follower);
    const term = p.node.status().term;
    p.node.step({
      type: 'vote',
      from: 99,
      to: follower,
      term: term + 1,
      lastIndex: 1e6,
      lastTerm: 1e6,
      transfer: false,
    });
    expect(p.node.status().term).toBe(term);
    p.node.campaign(); // ignored as well
    expect(p.node.status().role).toBe('follower');
  });
});
