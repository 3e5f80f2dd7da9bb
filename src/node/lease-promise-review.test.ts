// Review of decision 0009's "the promise is every member's" (stop 34): paths on which a production FloeNode that
// acknowledged a leased leader's heartbeat still grants votes inside that lease.
import { describe, expect, it } from 'vitest';
import type { Message } from '../raft/types.js';
import { askNode2ForVotes, E, heartbeat, member, TICK } from './lease-test-kit.js';

describe.each([
  ['with --leader-lease', true],
  ['without --leader-lease', false],
])('lease promise review (%s)', (_name, leaderLease) => {
  it('a follower that acknowledged the leader and then steps a stale higher-term pre-vote rejection refuses votes for an election timeout', async () => {
    const { n, vt, sent } = member(2, (k) => k - 1, leaderLease);
    n.start();
    let leaderTick = 0;
    for (let i = 0; i < 3 * E; i++) {
      n.onMessage(heartbeat(1, 2, 2, ++leaderTick));
      await vt.advance(TICK);
    }
    // Node 2 acknowledges node 1's newest heartbeat: node 1 counts on it for E − M ticks.
    sent.length = 0;
    n.onMessage(heartbeat(1, 2, 2, ++leaderTick));
    await vt.settle();
    expect(sent.some((m) => m.type === 'heartbeatResp')).toBe(true);
    // A rejection of a pre-vote node 2 sent before node 1 led again, delayed on the way, from node 3 (a candidate
    // at term 3 that could not win: its vote requests reached node 2 inside the lease and were ignored).
    n.onMessage({ type: 'preVoteResp', from: 3, to: 2, term: 3, reject: true } as Message);
    await vt.advance(TICK);
    // One tick after the acknowledgement node 3 asks again, at term 4.
    expect(await askNode2ForVotes({ n, vt, sent }, 4)).toEqual([]);
    await n.stop('test over');
  });
});
