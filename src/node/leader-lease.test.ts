// FloeNode.holdsLeaderLease (decision 0009): the lease the core counts in ticks, less the ticks the runtime has not
// delivered yet, on the monotonic and on the wall clock, and void for an election timeout after a suspend.
import { describe, expect, it } from 'vitest';
import { type KvResult, KvStateMachine } from '../state/kv-state-machine.js';
import { MemoryNetwork, MemoryNodeStorage } from './memory-seams.js';
import { FloeNode } from './node.js';
import { VirtualTimers } from './test-doubles.js';

const TICK = 10;
const E = 10;

function single(leaderLease: boolean) {
  const vt = new VirtualTimers();
  const clock = { wallStep: 0 };
  const transport = new MemoryNetwork().endpoint(1);
  const n = new FloeNode<KvResult>({
    id: 1,
    storage: new MemoryNodeStorage({ voters: [1], learners: [] }),
    transport,
    stateMachine: new KvStateMachine(),
    initialMembers: [{ id: 1, peerAddr: 'mem:1' }],
    tickMs: TICK,
    electionTicks: E,
    random: () => 0,
    clock: { monotonicMs: () => vt.now, wallMs: () => 1_800_000_000_000 + vt.now + clock.wallStep },
    timers: vt,
    incarnation: new Uint8Array(8),
    leaderLease,
  });
  transport.bind(n);
  return { n, vt, clock };
}

async function leading(leaderLease: boolean) {
  const s = single(leaderLease);
  s.n.start();
  // With leaderLease a restarted voter first waits out the lease it may have promised (E..2E ticks).
  await s.vt.advance(3 * E * TICK);
  expect(s.n.isLeader).toBe(true);
  return s;
}

describe('FloeNode.holdsLeaderLease', () => {
  it('is false without leaderLease, even on the leader', async () => {
    const { n } = await leading(false);
    expect(n.holdsLeaderLease(n.currentTerm)).toBe(false);
    await n.stop('test over');
  });

  it('holds on the leader in its own term, and not for another term', async () => {
    const { n } = await leading(true);
    expect(n.holdsLeaderLease(n.currentTerm)).toBe(true);
    expect(n.holdsLeaderLease(n.currentTerm + 1)).toBe(false);
    expect(n.holdsLeaderLease(n.currentTerm - 1)).toBe(false);
    await n.stop('test over');
  });

  it('is false while the tick timer is behind the monotonic clock (a blocked event loop or a stopped process)', async () => {
    const { n, vt } = await leading(true);
    // Time passes with no timer run: the request is read before the catch-up ticks.
    vt.now += 8 * TICK;
    expect(n.holdsLeaderLease(n.currentTerm)).toBe(false);
    await vt.advance(TICK); // the tick timer catches up
    expect(n.holdsLeaderLease(n.currentTerm)).toBe(true);
    await n.stop('test over');
  });

  it('after a machine suspend (the wall clock ran on, the monotonic clock did not) is void for an election timeout', async () => {
    const { n, vt, clock } = await leading(true);
    clock.wallStep += 5_000;
    // Before any tick: the wall clock shows the ticks that never came.
    expect(n.holdsLeaderLease(n.currentTerm)).toBe(false);
    await vt.advance(TICK);
    expect(n.isLeader).toBe(true);
    expect(n.holdsLeaderLease(n.currentTerm)).toBe(false);
    await vt.advance((E - 2) * TICK);
    expect(n.holdsLeaderLease(n.currentTerm)).toBe(false);
    await vt.advance(2 * TICK);
    expect(n.holdsLeaderLease(n.currentTerm)).toBe(true);
    await n.stop('test over');
  });

  it('a wall clock stepped back changes nothing (the monotonic clock still counts)', async () => {
    const { n, vt, clock } = await leading(true);
    clock.wallStep -= 60_000;
    expect(n.holdsLeaderLease(n.currentTerm)).toBe(true);
    vt.now += 8 * TICK;
    expect(n.holdsLeaderLease(n.currentTerm)).toBe(false);
    await n.stop('test over');
  });

  it('is false once the node stopped', async () => {
    const { n } = await leading(true);
    await n.stop('test over');
    expect(n.holdsLeaderLease(n.currentTerm)).toBe(false);
  });
});
