// The wire codec against the real Raft core: every message the core produces in a busy run survives
// encode → decode exactly, and the cluster works when fed only decoded messages.
import { describe, expect, it } from 'vitest';
import { bytes, TestNetwork } from '../raft/test-network.js';
import type { Message } from '../raft/types.js';
import { decodeMessage, encodeMessage } from './codec.js';
import { plain } from './test-support.js';

describe('codec with the Raft core', () => {
  it('round-trips every message of elections, replication, reads, lease, membership, snapshots and transfer', () => {
    const net = new TestNetwork([1, 2, 3], { electionTicks: 10, heartbeatTicks: 2, leaderLease: true });
    // The core runs on what the wire would deliver. (Snap messages keep their identity so the
    // network's snapshot bookkeeping still matches; they are checked below like the rest.)
    net.mangle = (queue: Message[]) =>
      queue.map((m) => (m.type === 'snap' ? m : decodeMessage(encodeMessage(m))));

    // With leaderLease, freshly started nodes refuse votes for an election timeout.
    net.tick(10);
    for (let i = 0; i < 40 && net.leader() === undefined; i++) net.tick();
    const lead = net.leader()!;
    const [other, third] = [1, 2, 3].filter((id) => id !== lead) as [number, number];
    for (let i = 0; i < 20; i++) net.propose(lead, `v${i}`);
    net.stabilize();
    net.node(other).readIndex(bytes('read-1'));
    net.stabilize();
    net.tick(4);
    net.stabilize();
    // A new member that can only be caught up by snapshot, then a leadership transfer.
    net.snapshotAndCompact(lead);
    net.addNode(4);
    net.node(lead).proposeConfChange({ type: 'addLearner', nodeId: 4, context: bytes('127.0.0.1:7004') });
    net.stabilize();
    net.tick(4);
    net.stabilize();
    net.node(lead).transferLeadership(third);
    net.stabilize();
    net.tick(12);
    net.stabilize();

    const types = new Set(net.sent.map((m) => m.type));
    for (const t of ['app', 'appResp', 'heartbeat', 'heartbeatResp', 'snap', 'timeoutNow', 'readIndex']) {
      expect(types, `no ${t} message was produced`).toContain(t);
    }
    expect(net.sent.some((m) => 'sentTick' in m && m.sentTick !== undefined)).toBe(true);
    for (const m of net.sent) expect(plain(decodeMessage(encodeMessage(m)))).toEqual(plain(m));
    expect(net.appliedData(4)).toEqual(net.appliedData(lead));
    expect(net.appliedData(4)).toHaveLength(20);
    expect(net.leader()).toBe(third);
  });
});
