// Review of decision 0009 (stop 34): a follower's lease promise is kept in `lead` and `electionElapsed`, and any
// higher-term message that is not a vote request (here a stale rejection of the follower's own earlier pre-vote)
// makes it `becomeFollower(term, NONE)`: it forgets the leader it acknowledged a tick ago and grants the next
// candidate's (pre-)votes at once. The leader still counts that acknowledgement in its lease.
import { describe, expect, it } from 'vitest';
import { MemoryStorage } from './memory-storage.js';
import { RawNode } from './raw-node.js';
import { TestNetwork } from './test-network.js';
import type { Message } from './types.js';

const E = 10;
const cfg = { electionTicks: E, heartbeatTicks: 1, leaderLease: true, checkQuorum: true, preVote: true };

/** A 3-voter network whose nodes have fixed election timeouts (E + r): node 1 fires first, then 3, then 2. */
function network(): TestNetwork {
  const net = new TestNetwork([1, 2, 3], cfg);
  for (const [id, r] of [
    [1, 0],
    [2, 5],
    [3, 2],
  ] as const) {
    const storage = new MemoryStorage({ voters: [1, 2, 3], learners: [] });
    const p = net.start(id, storage);
    // Replace the seeded node by one with a fixed timeout (same storage, nothing happened yet).
    (p as { node: RawNode }).node = new RawNode({ ...cfg, id, random: () => r }, storage);
  }
  return net;
}

const is = (m: Message, from: number, to: number) => m.from === from && m.to === to;

describe('lease promise vs a higher-term message that is not a vote (review of decision 0009)', () => {
  it.each([
    ['the vote request first', false],
    ['the rejection first, then the vote request of that same term (stop 34: votes of its own term)', true],
  ])(
    'a follower that acknowledged the leased leader and then steps a stale higher-term pre-vote rejection does not help elect another leader inside that lease (%s)',
    (_order, reversed) => {
      const net = network();
      net.tick(E); // node 1 (timeout E) elects itself at tick 10
      expect(net.leader()).toBe(1);
      net.tick(E); // tick 20: node 1's check-quorum round boundary; node 2 and 3 acknowledge its heartbeat
      expect(net.node(1).status().leaseValid).toBe(true);
      const t = net.node(1).status().term;

      // Node 1 is cut off from both followers for 15 ticks (it stays leader: one check-quorum round still saw them).
      net.cut(1, 2);
      net.cut(1, 3);
      // The 3→2 link stalls once node 3's pre-vote got through: what node 3 sends node 2 next is delayed (FIFO).
      net.holdIf = (m) => is(m, 3, 2) && m.type !== 'preVote';
      net.tick(12); // tick 32: node 3 times out; node 2 (out of lease) grants its pre-vote; node 3 is candidate at t+1
      expect(net.node(3).status()).toMatchObject({ role: 'candidate', term: t + 1 });
      net.tick(3); // tick 35: node 2 times out and pre-votes; node 3 rejects it with term t+1 (held on the stalled link)
      expect(net.held.map((m) => m.type)).toEqual(['vote', 'preVoteResp']);

      // Node 1 reaches node 2 again (not node 3): node 2 follows it, acknowledges every heartbeat, node 1 leases again.
      const held = net.held.splice(0);
      net.heal();
      net.cut(1, 3);
      net.tick(7); // ticks 36..42
      expect(net.node(1).status()).toMatchObject({ role: 'leader', term: t, leaseValid: true });
      expect(net.node(2).status()).toMatchObject({ lead: 1, term: t });

      // The stalled link delivers: the vote request is ignored (node 2 is in lease), the stale rejection is stepped.
      for (const m of reversed ? [...held].reverse() : held) net.node(2).step(m);
      // Either way node 2 refuses node 3's vote of term t+1 (reversed, it answers with a rejection of its own term).
      expect(net.node(2).status()).toMatchObject({ term: t + 1, vote: 0 });
      // Node 2's answers to node 1 are lost from now on (node 1 keeps counting the acknowledgement of tick 42).
      net.dropIf = (m) => is(m, 2, 1);
      let other: number | undefined;
      for (let i = 0; i < 2 * E && other === undefined; i++) {
        net.tick(1);
        if (net.node(3).status().role === 'leader') {
          other = 3;
          // Node 3 was elected (term t+2) with node 2's vote while node 1 still leads term t and trusts its lease,
          // resting on node 2's acknowledgement of a heartbeat sent at most two ticks before node 2 voted.
          const old = net.node(1).status();
          expect({ role: old.role, leaseValid: old.leaseValid, newTerm: net.node(3).status().term }).toEqual({
            role: 'leader',
            leaseValid: false,
            newTerm: t + 2,
          });
        }
      }
      expect(other).toBe(3);
    },
  );
});
