// Second review of decision 0009: a seeded fuzz of the core's lease promise. Random 3- and 5-voter clusters, tick
// rates within ±10 % (FUZZ_EXT: only the extremes), message delays (FUZZ_DELAY: the long tail), drops, duplicates,
// one-way partitions, restarts (a sole voter campaigns at start, as FloeNode does), transfers, forced campaigns,
// snapshots and (FUZZ_CONF) membership changes (FUZZ_SELF: a leader may remove itself). Checks: (a) no node is elected in a newer term while an older-term
// leader has leaseRemainingTicks() >= FUZZ_MIN (default 1; a leader elected late in an OLDER term is not counted: a
// quorum has moved past its term, it can commit nothing, so it never has a lease or a read); (b) no node grants a
// non-transfer (pre-)vote, other than again to the candidate it voted for in that term, nor campaigns on its own
// timer, before E of its own ticks after it stepped a leader's message or started; (c) one leader per term.
// Passed about 2,400 runs (FUZZ_SEEDS, FUZZ_BASE) at d0a20f4; closest new election to an old lease's end: 8 ms (0.08 tick).
import { describe, expect, it } from 'vitest';
import { MemoryStorage } from './memory-storage.js';
import { RawNode } from './raw-node.js';
import { seededRandom } from './test-network.js';
import type { Message, NodeId } from './types.js';

const E = 10;
const stats = { elections: 0, restarts: 0, leaseChecks: 0, minSlack: Number.POSITIVE_INFINITY };
const MIN = Number(process.env.FUZZ_MIN ?? 1);

interface N {
  id: NodeId;
  storage: MemoryStorage;
  raw: RawNode;
  up: boolean;
  period: number;
  nextTick: number;
  ticks: number;
  heard: number; // tick of last leader message stepped (or 0 at start)
  applied: number;
  incarnation: number;
}

function run(seed: number, nNodes: number, steps: number): string | undefined {
  const rnd = seededRandom(seed);
  const chance = (p: number) => rnd(1_000_000) < p * 1_000_000;
  const ids = Array.from({ length: nNodes }, (_, i) => i + 1);
  const conf = { voters: ids, learners: [] };
  const nodes = new Map<NodeId, N>();
  const mk = (id: NodeId, storage: MemoryStorage, now: number, inc: number): N => {
    const raw = new RawNode(
      {
        id,
        electionTicks: E,
        heartbeatTicks: 1,
        random: seededRandom(seed * 31 + id * 7 + inc * 1013),
        preVote: true,
        checkQuorum: true,
        leaderLease: true,
        leasePromise: true,
        applied: storage.snapshot().metadata.index,
      },
      storage,
    );
    return {
      id,
      storage,
      raw,
      up: true,
      period: process.env.FUZZ_EXT ? (rnd(2) ? 90 : 110) : 90 + rnd(21),
      nextTick: now + 1 + rnd(100),
      ticks: 0,
      heard: 0,
      applied: storage.snapshot().metadata.index,
      incarnation: inc,
    };
  };
  for (const id of ids) nodes.set(id, mk(id, new MemoryStorage(conf), 0, 0));
  let pending: { at: number; m: Message }[] = [];
  const cut = new Set<string>();
  let now = 0;
  let violation: string | undefined;
  const raft = (n: N) => (n.raw as unknown as { raft: { tickCount: number; msgs: Message[] } }).raft;

  const drain = (n: N) => {
    while (n.up && n.raw.hasReady()) {
      const rd = n.raw.ready();
      if (rd.hardState) n.storage.setHardState(rd.hardState);
      if (rd.snapshot) n.storage.applySnapshot(rd.snapshot);
      n.storage.append(rd.entries);
      for (const m of rd.messages) {
        if (chance(0.05)) continue;
        const d = 1 + rnd(chance(0.1) ? Number(process.env.FUZZ_DELAY ?? 600) : 60);
        pending.push({ at: now + d, m });
        if (chance(0.03)) pending.push({ at: now + d + rnd(400), m });
      }
      if (rd.snapshot) n.applied = rd.snapshot.metadata.index;
      for (const e of rd.committedEntries) {
        n.applied = e.index;
        if (e.type === 'conf') n.raw.applyConfChange(e.change);
      }
      n.raw.advance(rd);
    }
  };
  const leaders = () => [...nodes.values()].filter((n) => n.up && n.raw.role === 'leader');
  const lastServe = new Map<number, number>(); // term -> last real time a leader of it had lease >= MIN
  const noteServe = () => {
    for (const o of leaders()) if (o.raw.leaseRemainingTicks() >= MIN) lastServe.set(o.raw.term, now);
  };
  const check = (n: N, before: string, cause: string) => {
    if (violation) return;
    const st = n.raw.status();
    if (before !== 'leader' && st.role === 'leader') {
      for (const [t, at] of lastServe) if (t < st.term) stats.minSlack = Math.min(stats.minSlack, now - at);
    }
    if (before !== 'leader' && st.role === 'leader') {
      stats.elections++;
      for (const o of leaders()) {
        if (o === n) continue;
        if (o.raw.term === st.term) violation = `t=${now}: two leaders in term ${st.term}: ${o.id}, ${n.id}`;
        const rem = o.raw.leaseRemainingTicks();
        if (rem > 0) stats.leaseChecks++;
        if (rem >= MIN && o.raw.term < st.term)
          violation = `t=${now}: node ${n.id} elected term ${st.term} (${cause}) while node ${o.id} leads term ${o.raw.term} with lease ${rem}`;
      }
    }
    if (
      before === 'follower' &&
      (st.role === 'preCandidate' || st.role === 'candidate') &&
      cause !== 'timeoutNow'
    ) {
      if (n.ticks < n.heard + E)
        violation = `t=${now}: node ${n.id} campaigned at tick ${n.ticks}, heard leader at ${n.heard} (${cause})`;
    }
  };
  const deliver = (m: Message) => {
    const n = nodes.get(m.to);
    if (!n?.up) return;
    if (cut.has(`${m.from}-${m.to}`)) return;
    const before = n.raw.role;
    const termBefore = n.raw.term;
    const voteBefore = n.raw.status().vote;
    n.raw.step(m);
    if (
      (m.type === 'app' || m.type === 'heartbeat' || m.type === 'snap') &&
      m.term >= termBefore &&
      n.raw.role === 'follower'
    )
      n.heard = n.ticks;
    if (
      (m.type === 'vote' || m.type === 'preVote') &&
      !m.transfer &&
      !(voteBefore === m.from && m.term === termBefore)
    ) {
      for (const r of raft(n).msgs) {
        if (
          (r.type === 'voteResp' || r.type === 'preVoteResp') &&
          r.to === m.from &&
          !r.reject &&
          n.ticks < n.heard + E &&
          !violation
        )
          violation = `t=${now}: node ${n.id} granted ${m.type} t${m.term} to ${m.from} at tick ${n.ticks}, heard leader at ${n.heard}`;
      }
    }
    check(n, before, m.type);
    drain(n);
  };

  for (let step = 0; step < steps && !violation; step++) {
    // next event: earliest of ticks and deliveries
    let nextT = Number.POSITIVE_INFINITY;
    for (const n of nodes.values()) if (n.up) nextT = Math.min(nextT, n.nextTick);
    for (const p of pending) nextT = Math.min(nextT, p.at);
    now = nextT;
    for (const n of nodes.values()) {
      if (n.up && n.nextTick === now) {
        n.nextTick += n.period;
        n.ticks++;
        const before = n.raw.role;
        n.raw.tick();
        check(n, before, 'tick');
        drain(n);
      }
    }
    noteServe();
    const due = pending.filter((p) => p.at === now);
    pending = pending.filter((p) => p.at !== now);
    for (const p of due) deliver(p.m);
    noteServe();
    // random faults, about once per tick of time
    if (chance(0.004)) {
      const a = 1 + rnd(nNodes);
      const b = 1 + rnd(nNodes);
      if (a !== b) {
        cut.add(`${a}-${b}`);
        if (chance(0.5)) cut.add(`${b}-${a}`);
      }
    }
    if (chance(0.004)) cut.clear();
    if (chance(0.0015)) {
      const n = nodes.get(1 + rnd(nodes.size)) as N;
      if (n.up) {
        n.up = false;
        n.nextTick = now + rnd(3000);
      }
    }
    for (const n of nodes.values()) {
      if (!n.up && n.nextTick <= now) {
        stats.restarts++;
        const fresh = mk(n.id, n.storage.clone(), now, n.incarnation + 1);
        nodes.set(n.id, fresh);
        const c = fresh.raw.status().conf.voters;
        if (c.length === 1 && c[0] === n.id) {
          fresh.raw.campaign();
          check(fresh, 'follower', 'start-campaign');
          drain(fresh);
        }
      }
    }
    if (chance(0.002)) {
      const l = leaders()[0];
      if (l) {
        try {
          l.raw.transferLeadership(1 + rnd(nNodes));
          drain(l);
        } catch {
          // refused (not leader, change pending, transfer running): the fuzz moves on
        }
      }
    }
    if (chance(0.002)) {
      const n = nodes.get(1 + rnd(nodes.size)) as N;
      if (n.up) {
        const before = n.raw.role;
        n.raw.campaign();
        check(n, before, 'campaign()');
        drain(n);
      }
    }
    if (process.env.FUZZ_CONF && chance(0.003)) {
      const l = leaders()[0];
      if (l) {
        const st = l.raw.status();
        const op = rnd(4);
        try {
          if (op === 0 && nodes.size < 7) {
            const id = nodes.size + 1;
            l.raw.proposeConfChange({ type: 'addLearner', nodeId: id });
            nodes.set(id, mk(id, new MemoryStorage(), now, 0));
          } else if (op === 1 && st.conf.learners.length > 0) {
            l.raw.proposeConfChange({ type: 'addVoter', nodeId: st.conf.learners[0] as number });
          } else if (op === 2 && st.conf.voters.length > 1) {
            const v = st.conf.voters[rnd(st.conf.voters.length)] as number;
            if (v !== l.id || process.env.FUZZ_SELF) l.raw.proposeConfChange({ type: 'remove', nodeId: v });
          } else if (op === 3 && st.conf.voters.length > 1) {
            const v = st.conf.voters[rnd(st.conf.voters.length)] as number;
            if (v !== l.id) l.raw.proposeConfChange({ type: 'addLearner', nodeId: v });
          }
          drain(l);
        } catch {
          // refused (not leader, change pending, transfer running): the fuzz moves on
        }
      }
    }
    if (chance(0.02)) {
      const l = leaders()[0];
      if (l) {
        try {
          l.raw.propose(new Uint8Array([1]));
          drain(l);
        } catch {
          // refused (not leader, change pending, transfer running): the fuzz moves on
        }
      }
    }
    if (chance(0.002)) {
      const n = nodes.get(1 + rnd(nodes.size)) as N;
      if (n.up && n.applied > n.storage.snapshot().metadata.index + 2) {
        n.storage.createSnapshot(n.applied, n.raw.status().conf, new Uint8Array(0));
        n.storage.compact(n.applied);
      }
    }
  }
  return violation;
}

describe('lease promise fuzz (second review of decision 0009)', () => {
  const seeds = Number(process.env.FUZZ_SEEDS ?? 8);
  const base = Number(process.env.FUZZ_BASE ?? 1);
  it('no election inside an older-term lease, no vote or campaign inside a promise, one leader per term', () => {
    const found: string[] = [];
    for (let s = base; s < base + seeds; s++) {
      for (const n of [3, 5]) {
        const v = run(s, n, 20_000);
        if (v) found.push(`seed ${s} n=${n}: ${v}`);
      }
    }
    if (process.env.FUZZ_STATS) console.log(JSON.stringify(stats));
    expect(found).toEqual([]);
  }, 600_000);
});
