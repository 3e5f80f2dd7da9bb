// Membership changes one server at a time (thesis §4.1), applied when the conf entry is applied.

import { describe, expect, it } from 'vitest';
import { TestNetwork } from './test-network.js';
import type { NodeId } from './types.js';

/** Proposes a conf change on the leader and runs until it is applied everywhere reachable. */
function change(
  net: TestNetwork,
  leader: NodeId,
  type: 'addLearner' | 'addVoter' | 'remove',
  nodeId: NodeId,
) {
  net.node(leader).proposeConfChange({ type, nodeId });
  net.stabilize();
  net.tick(2);
}

describe('membership changes', () => {
  it('add a learner: it receives the log but is not counted for commit', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.propose(1, 'before');
    net.stabilize();
    net.addNode(4);
    change(net, 1, 'addLearner', 4);
    expect(net.node(1).status().conf).toEqual({ voters: [1, 2, 3], learners: [4] });
    expect(net.appliedData(4)).toEqual(['before']);
    expect(net.peer(4).conf).toEqual({ voters: [1, 2, 3], learners: [4] });
    // With two voters unreachable, the learner's copy does not make a majority.
    net.isolate(2);
    net.isolate(3);
    net.propose(1, 'needs-voters');
    net.stabilize();
    net.tick(2, [1, 4]);
    expect(net.peer(4).storage.lastIndex()).toBe(net.node(1).status().lastIndex);
    expect(net.appliedData(1)).toEqual(['before']);
  });

  it('a learner never campaigns and its votes do not count', () => {
    const net = new TestNetwork([1, 2, 3], undefined, { learners: [3] });
    net.elect(1);
    net.stop(2);
    net.stop(1);
    net.tick(100, [3]);
    expect(net.node(3).status().role).toBe('follower');
    // Node 1 restarts and campaigns: only 1 and 2 vote; 3's grant does not make a majority.
    net.restart(1);
    net.node(1).campaign();
    net.stabilize();
    expect(net.node(1).status().role).not.toBe('leader');
  });

  it('promote a learner to voter: it then counts for commit', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.addNode(4);
    change(net, 1, 'addLearner', 4);
    change(net, 1, 'addVoter', 4);
    expect(net.node(1).status().conf).toEqual({ voters: [1, 2, 3, 4], learners: [] });
    expect(net.peer(4).conf).toEqual({ voters: [1, 2, 3, 4], learners: [] });
    // 4 voters: majority 3. With 2 and 3 away, leader + 4 are not enough; with 3 away, they are.
    net.isolate(2);
    net.isolate(3);
    net.propose(1, 'a');
    net.stabilize();
    expect(net.appliedData(1)).toEqual([]);
    net.heal();
    net.isolate(3);
    net.tick(2, [1, 2, 4]);
    expect(net.appliedData(1)).toEqual(['a']);
  });

  it('a member that joined with empty storage learns the whole membership and cannot elect itself alone', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.addNode(4); // new MemoryStorage(): knows nothing, replays the log from index 1
    change(net, 1, 'addLearner', 4);
    change(net, 1, 'addVoter', 4);
    expect(net.peer(4).conf).toEqual({ voters: [1, 2, 3, 4], learners: [] });
    expect(net.node(4).status().conf).toEqual({ voters: [1, 2, 3, 4], learners: [] });
    net.isolate(4);
    net.tick(100, [4]);
    expect(net.node(4).status().role).not.toBe('leader');
  });

  it('remove a follower: the rest keep committing and it is no longer replicated to', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    change(net, 1, 'remove', 3);
    expect(net.node(1).status().conf).toEqual({ voters: [1, 2], learners: [] });
    const before = net.sent.length;
    net.propose(1, 'x');
    net.stabilize();
    net.tick(2);
    expect(net.appliedData(2)).toEqual(['x']);
    expect(net.sent.slice(before).some((m) => m.to === 3)).toBe(false);
  });

  it('a removed node does not campaign', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    change(net, 1, 'remove', 3);
    expect(net.peer(3).conf.voters).not.toContain(3);
    net.tick(100, [3]);
    expect(net.node(3).status().role).toBe('follower');
    expect(net.node(1).status().term).toBe(1);
  });

  it('removing the leader: once the removal commits it steps down and the rest elect a new leader', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.propose(1, 'a');
    net.stabilize();
    net.node(1).proposeConfChange({ type: 'remove', nodeId: 1 });
    net.stabilize();
    expect(net.node(1).status().role).toBe('follower');
    expect(net.node(1).status().conf.voters).toEqual([2, 3]);
    for (let i = 0; i < 40 && (net.leader() === undefined || net.leader() === 1); i++) net.tick();
    const leader = net.leader() as number;
    expect([2, 3]).toContain(leader);
    net.propose(leader, 'b');
    net.stabilize();
    net.tick(2);
    expect(net.appliedData(2)).toEqual(['a', 'b']);
    expect(net.appliedData(3)).toEqual(['a', 'b']);
    // The removed node refuses proposals and never campaigns.
    net.tick(50, [1]);
    expect(net.node(1).status().role).toBe('follower');
  });

  it('a conf change is refused while another is pending (not yet applied)', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    net.isolate(2);
    net.isolate(3);
    net.node(1).proposeConfChange({ type: 'addLearner', nodeId: 4 });
    net.stabilize();
    expect(() => net.node(1).proposeConfChange({ type: 'addLearner', nodeId: 5 })).toThrow(
      expect.objectContaining({ name: 'ProposalDroppedError', reason: 'confChangePending' }),
    );
    net.heal();
    net.tick(2);
    expect(net.node(1).status().conf.learners).toEqual([4]);
    expect(() => net.node(1).proposeConfChange({ type: 'addLearner', nodeId: 5 })).not.toThrow();
  });

  it('a new leader refuses conf changes until it has committed an entry of its own term', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.isolate(2);
    net.isolate(3);
    net.node(1).campaign();
    net.stabilize();
    net.heal();
    // Pre-vote over; let the real vote through but hold appends: leader elected, no-op not committed.
    net.holdIf = (m) => m.type === 'app';
    net.node(1).campaign();
    net.stabilize();
    expect(net.node(1).status().role).toBe('leader');
    expect(net.node(1).status().commit).toBe(0);
    expect(() => net.node(1).proposeConfChange({ type: 'remove', nodeId: 3 })).toThrow(
      expect.objectContaining({ reason: 'confChangePending' }),
    );
    net.holdIf = undefined;
    net.deliverHeld();
    net.stabilize();
    expect(net.node(1).status().commit).toBe(1);
    expect(() => net.node(1).proposeConfChange({ type: 'remove', nodeId: 3 })).not.toThrow();
  });

  it('conf changes that can never be valid are rejected with a reason', () => {
    const net = new TestNetwork([1, 2]);
    net.elect(1);
    const bad = [
      { type: 'addVoter', nodeId: 2 },
      { type: 'addLearner', nodeId: 1 },
      { type: 'remove', nodeId: 7 },
      { type: 'addLearner', nodeId: 0 },
    ] as const;
    for (const cc of bad) {
      expect(() => net.node(1).proposeConfChange(cc)).toThrow(
        expect.objectContaining({ name: 'InvalidConfChangeError' }),
      );
    }
    change(net, 1, 'remove', 2);
    expect(() => net.node(1).proposeConfChange({ type: 'remove', nodeId: 1 })).toThrow(/last voter/);
  });

  it('a follower refuses to propose conf changes', () => {
    const net = new TestNetwork([1, 2, 3]);
    net.elect(1);
    expect(() => net.node(2).proposeConfChange({ type: 'addLearner', nodeId: 4 })).toThrow(
      expect.objectContaining({ reason: 'notLeader', lead: 1 }),
    );
  });
});
