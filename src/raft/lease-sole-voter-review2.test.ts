// Second review of decision 0009 (stop 34): `campaignRequested` lets a node that is the only voter of its configuration
// campaign inside its promise, on the grounds that "any other leader's configuration would be in its own log". Not
// when that other leader is the one being removed: a leader of {1, 2} that proposes its own removal keeps leading,
// and counting node 1's acknowledgements in its lease, until it applies the change; node 1 may apply it first. Node 1,
// restarted on a snapshot taken after the removal (configuration {1}), then elects itself at once, inside the promise
// it gave the old leader a tick before. Core only: FloeNode never has a leader propose its own removal while another
// voter answers (FS-22 hands leadership over first) and applies a commit in the same turn as it sends it.
import { describe, expect, it } from 'vitest';
import { MemoryStorage } from './memory-storage.js';
import { RawNode } from './raw-node.js';
import type { Message, Ready } from './types.js';

const E = 10;
const cfg = { electionTicks: E, heartbeatTicks: 1, checkQuorum: true, preVote: true, leaderLease: true };
const conf = { voters: [1, 2], learners: [] };

function nodeOf(id: number, storage: MemoryStorage, r: number): RawNode {
  return new RawNode({ ...cfg, id, random: () => r, applied: storage.snapshot().metadata.index }, storage);
}

/** Persists a Ready, queues its messages; applies and advances unless told to hold the apply back. */
function handle(n: RawNode, st: MemoryStorage, out: Message[], apply = true): Ready | undefined {
  while (n.hasReady()) {
    const rd = n.ready();
    if (rd.hardState) st.setHardState(rd.hardState);
    if (rd.snapshot) st.applySnapshot(rd.snapshot);
    st.append(rd.entries);
    out.push(...rd.messages);
    if (!apply && rd.committedEntries.length > 0) return rd;
    for (const e of rd.committedEntries) if (e.type === 'conf') n.applyConfChange(e.change);
    n.advance(rd);
  }
  return undefined;
}

describe('sole-voter campaign vs a lease of the configuration it just left (second review of decision 0009)', () => {
  it('a node restarted as the only voter after its leader proposed its own removal does not elect itself while that leader still trusts its lease', () => {
    const s1 = new MemoryStorage(conf);
    const s2 = new MemoryStorage(conf);
    let n1 = nodeOf(1, s1, 5);
    const n2 = nodeOf(2, s2, 0);
    const q: Message[] = [];
    const pump = (hold2 = false): Ready | undefined => {
      let held: Ready | undefined;
      for (let i = 0; i < 100; i++) {
        handle(n1, s1, q);
        if (held === undefined) held = handle(n2, s2, q, !hold2);
        const batch = q.splice(0);
        if (batch.length === 0) break;
        for (const m of batch) (m.to === 1 ? n1 : n2).step(m);
      }
      return held;
    };
    for (let i = 0; i < E && n2.role !== 'leader'; i++) {
      n1.tick();
      n2.tick();
      pump();
    }
    expect(n2.role).toBe('leader');
    for (let i = 0; i < 3; i++) {
      n1.tick();
      n2.tick();
      pump();
    }
    expect(n2.leaseRemainingTicks()).toBeGreaterThan(0);
    const oldTerm = n2.term;

    // Node 2 proposes its own removal; it commits it, tells node 1, and has not applied it yet.
    n2.proposeConfChange({ type: 'remove', nodeId: 2 });
    const held = pump(true);
    expect(held?.committedEntries.some((e) => e.type === 'conf')).toBe(true);
    expect(n1.status().conf.voters).toEqual([1]); // node 1 applied it: the only voter of its configuration
    expect(n2.role).toBe('leader');
    expect(n2.leaseRemainingTicks()).toBeGreaterThan(0); // node 1's acknowledgement of the commit renewed it

    // Node 1 snapshots what it applied, crashes and restarts; as FloeNode.start does for a sole voter, it campaigns.
    s1.createSnapshot(n1.status().applied, n1.status().conf, new Uint8Array(0));
    n1 = nodeOf(1, s1.clone(), 5);
    n1.campaign();
    handle(n1, s1, q);

    const old = { role: n2.role, term: n2.term, lease: n2.leaseRemainingTicks() };
    // Two leaders at once: node 1 of a newer term, node 2 of the old one still trusting its lease.
    expect(old.role === 'leader' && old.lease > 0 && n1.role === 'leader' && n1.term > oldTerm).toBe(false);
  });
});
