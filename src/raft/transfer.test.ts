// Leadership transfer (thesis §3.10).

import { describe, expect, it } from 'vitest';
import { TestNetwork } from './test-network.js';

describe('leadership transfer', () => {
  it('the leader brings the transferee up to date, sends timeoutNow, and the transferee wins', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.isolate(3);
    for (let i = 0; i < 5; i++) net.propose(1, `v${i}`);
    net.stabilize();
    net.heal();
    // 3 is behind: the leader must first replicate to it.
    net.node(1).transferLeadership(3);
    net.stabilize();
    expect(net.leader()).toBe(3);
    expect(net.node(3).status().term).toBe(2);
    expect(net.node(1).status()).toMatchObject({ role: 'follower', lead: 3 });
    const timeoutNow = net.sent.filter((m) => m.type === 'timeoutNow');
    expect(timeoutNow).toEqual([expect.objectContaining({ from: 1, to: 3 })]);
    net.propose(3, 'after');
    net.stabilize();
    net.tick(2);
    expect(net.appliedData(1)).toEqual(['v0', 'v1', 'v2', 'v3', 'v4', 'after']);
  });

  it('the transfer succeeds although every follower heard from the leader recently (it bypasses stickiness)', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.tick(1);
    net.node(1).transferLeadership(2);
    net.stabilize();
    expect(net.leader()).toBe(2);
  });

  it('proposals are refused while a transfer is in progress', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.isolate(3);
    net.node(1).transferLeadership(3);
    net.stabilize();
    expect(net.node(1).status().leadTransferee).toBe(3);
    expect(() => net.propose(1, 'x')).toThrow(expect.objectContaining({ reason: 'transferring' }));
  });

  it('a transfer that does not finish within an election timeout is aborted and the leader carries on', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.isolate(3);
    net.node(1).transferLeadership(3);
    net.stabilize();
    net.tick(9);
    expect(net.node(1).status().leadTransferee).toBe(3);
    net.tick(1);
    expect(net.node(1).status()).toMatchObject({ role: 'leader', leadTransferee: 0 });
    expect(() => net.propose(1, 'x')).not.toThrow();
    net.stabilize();
    net.tick(1);
    expect(net.appliedData(2)).toEqual(['x']);
  });

  it('transferring to a non-voter is refused; transferring to itself is a no-op', () => {
    const net = new TestNetwork([1, 2, 3], undefined, { learners: [3] });
    net.elect(1);
    expect(() => net.node(1).transferLeadership(3)).toThrow(/not a voter/);
    net.node(1).transferLeadership(1);
    expect(net.node(1).status()).toMatchObject({ role: 'leader', leadTransferee: 0 });
  });

  it('a follower cannot start a transfer', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    expect(() => net.node(2).transferLeadership(3)).toThrow(expect.objectContaining({ reason: 'notLeader' }));
  });
});
