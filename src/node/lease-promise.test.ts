// A rolling enable of `--leader-lease` (decision 0009, stop 34): while some members already run with the flag and
// lead, others still run without it. A leader's lease rests on its followers' promise to refuse votes for an election
// timeout after they acknowledged it, so every member keeps that promise, whatever its own flag: after a restart it
// refuses votes for an election timeout, and after a stall it counts its overdue ticks before it steps a message.
// Each test also runs with the switch `lease-promise-opt-in` (only members with the flag keep the promise, as before
// stop 34) to show it can fail.
import { afterEach, describe, expect, it } from 'vitest';
import { switchBugsOn } from '../testing/bug-switches.js';
import { askNode2ForVotes, E, heartbeat, leader, member, TICK } from './lease-test-kit.js';

let restore = () => {};
afterEach(() => restore());

describe.each([
  ['every member keeps the promise', false],
  ['switch lease-promise-opt-in (before the fix)', true],
])('rolling enable of --leader-lease: %s', (_name, bug) => {
  it('a member without --leader-lease, restarted just after it acknowledged the leased leader, refuses votes for an election timeout', async () => {
    if (bug) restore = switchBugsOn(['lease-promise-opt-in']);
    // Node 2 runs without the flag. Before its restart it acknowledged node 1's heartbeat (node 1 runs with the flag
    // and serves strict INCRs from that acknowledgement for E − M ticks); the restarted process knows nothing of it.
    const { n, vt, sent } = member(2, (k) => k - 1, false);
    n.start();
    await vt.advance(TICK);
    // Node 3, cut off from node 1 for an election timeout, asks the restarted node 2 for its vote one tick later.
    const granted = await askNode2ForVotes({ n, vt, sent }, 3);
    if (bug) expect(granted.length).toBeGreaterThan(0);
    else expect(granted).toEqual([]);
    // An election timeout after its start it votes again: the promise costs one election timeout of availability.
    await vt.advance(E * TICK);
    expect((await askNode2ForVotes({ n, vt, sent }, 4, ['preVote'])).length).toBe(1);
    await n.stop('test over');
  });

  it('a member without --leader-lease, stalled 12 ticks, counts its overdue ticks before it acknowledges a heartbeat, and then refuses votes', async () => {
    if (bug) restore = switchBugsOn(['lease-promise-opt-in']);
    const { n, vt, sent, clock } = member(2, (k) => k - 1, false);
    n.start();
    let leaderTick = 0;
    for (let i = 0; i < 3 * E; i++) {
      n.onMessage(heartbeat(1, 2, 2, ++leaderTick));
      await vt.advance(TICK);
    }
    expect(n.status().lead).toBe(1);
    // Blocked 12 ticks (GC, SIGSTOP): on waking, the newest heartbeat is handled before the timers phase.
    clock.monoSkew += 12 * TICK;
    leaderTick += 12;
    sent.length = 0;
    n.onMessage(heartbeat(1, 2, 2, leaderTick));
    await vt.settle();
    expect(sent.some((m) => m.type === 'heartbeatResp')).toBe(true);
    await vt.advance(TICK);
    const granted = await askNode2ForVotes({ n, vt, sent }, 3);
    if (bug) expect(granted.length).toBeGreaterThan(0);
    else expect(granted).toEqual([]);
    await n.stop('test over');
  });
});

describe('a single voter, and a leader leaving (review 2 of stop 34)', () => {
  it('a single voter elects itself at start, as before', async () => {
    const { MemoryNodeStorage } = await import('./memory-seams.js');
    const { FloeNode } = await import('./node.js');
    const { KvStateMachine } = await import('../state/kv-state-machine.js');
    const { VirtualTimers } = await import('./test-doubles.js');
    const vt = new VirtualTimers();
    const n = new FloeNode({
      id: 1,
      storage: new MemoryNodeStorage({ voters: [1], learners: [] }),
      transport: { send: () => {}, addPeer: () => {}, removePeer: () => {}, close: async () => {} },
      stateMachine: new KvStateMachine(),
      initialMembers: [{ id: 1, peerAddr: 'mem:1' }],
      tickMs: TICK,
      electionTicks: E,
      heartbeatTicks: 1,
      random: () => 0,
      clock: { monotonicMs: () => vt.now, wallMs: () => vt.now },
      timers: vt,
    });
    n.start();
    await vt.settle();
    expect(n.isLeader).toBe(true);
    await n.stop('test over');
  });

  // The sole voter may skip its promise only because a leader stops relying on its lease once it proposes its own
  // removal: the member that stays may learn the commit before the leader applies it, restart with {itself} and elect
  // itself at once. The switch skips the hand-over, so the proposal goes out while the lease holds.
  it('a leader that proposes its own removal serves from its lease no more', async () => {
    const { n } = await leader();
    const off = switchBugsOn(['leader-self-removal']);
    try {
      expect(n.holdsLeaderLease(n.currentTerm)).toBe(true);
      void n.removeMember(1, { force: true }).catch(() => {});
      for (let i = 0; i < 5; i++) await Promise.resolve();
      expect(n.isLeader).toBe(true);
      expect(n.holdsLeaderLease(n.currentTerm)).toBe(false);
    } finally {
      off();
    }
  });
});
