import { describe, expect, it } from 'vitest';
import type { NodeId } from '../raft/types.js';
import { Network } from './network.js';
import { Prng } from './prng.js';
import * as topo from './topology.js';

const nodes = [1, 2, 3, 4, 5];

/** Who can reach whom (directed) once `links` are blocked. */
function reach(links: topo.Link[]): (a: NodeId, b: NodeId) => boolean {
  const blocked = new Set(links.map(([a, b]) => `${a}>${b}`));
  return (a, b) => !blocked.has(`${a}>${b}`);
}

describe('partition shapes', () => {
  it('leaderBridge: the leader reaches only the bridge, the bridge reaches everyone', () => {
    for (let seed = 0; seed < 20; seed++) {
      const t = topo.leaderBridge(nodes, 1, new Prng(seed));
      const r = reach(t.links);
      const reachable = nodes.filter((n) => n !== 1 && r(1, n));
      expect(reachable).toHaveLength(1);
      const bridge = reachable[0] as NodeId;
      for (const n of nodes) if (n !== bridge) expect(r(bridge, n) && r(n, bridge)).toBe(true);
      const others = nodes.filter((n) => n !== 1 && n !== bridge);
      for (const a of others) for (const b of others) if (a !== b) expect(r(a, b)).toBe(true);
    }
  });

  it('leaderQuorumOneWay: a bare majority answers the leader, the rest only hear it', () => {
    const t = topo.leaderQuorumOneWay(nodes, 2, new Prng(1));
    const r = reach(t.links);
    for (const n of nodes) if (n !== 2) expect(r(2, n)).toBe(true);
    const answering = nodes.filter((n) => n !== 2 && r(n, 2));
    expect(answering.length + 1).toBe(3);
  });

  it('mute and deaf cut exactly one direction', () => {
    const m = reach(topo.mute(nodes, 3).links);
    const d = reach(topo.deaf(nodes, 3).links);
    for (const n of nodes.filter((x) => x !== 3)) {
      expect([m(3, n), m(n, 3)]).toEqual([false, true]);
      expect([d(3, n), d(n, 3)]).toEqual([true, false]);
    }
  });

  it('bridge: the two sides cannot reach each other but both reach the bridge', () => {
    const t = topo.bridge(nodes, new Prng(5), 3);
    const r = reach(t.links);
    const cut = nodes.filter((n) => n !== 3 && !nodes.every((m) => m === n || r(n, m)));
    expect(cut.length).toBeGreaterThanOrEqual(2);
    for (const n of nodes) if (n !== 3) expect(r(n, 3) && r(3, n)).toBe(true);
  });

  it('split and isolate are symmetric', () => {
    for (const t of [topo.split(nodes, new Prng(9)), topo.isolate(nodes, 4)]) {
      const r = reach(t.links);
      for (const a of nodes) for (const b of nodes) expect(r(a, b)).toBe(r(b, a));
    }
  });
});

describe('Network', () => {
  it('loses messages on blocked links and at the configured rate, and duplicates at its rate', () => {
    const net = new Network(new Prng(1));
    const msg = { type: 'timeoutNow', from: 1, to: 2, term: 1 } as const;
    net.setBlocked([[1, 2]]);
    expect(net.fate(msg)).toEqual([]);
    net.heal();
    net.conditions = { ...net.conditions, dropRate: 0.25, duplicateRate: 0.1 };
    let lost = 0;
    let dup = 0;
    const n = 20_000;
    for (let i = 0; i < n; i++) {
      const f = net.fate(msg);
      if (f.length === 0) lost++;
      if (f.length === 2) dup++;
      for (const d of f)
        expect(d >= net.conditions.minLatencyUs && d <= net.conditions.maxLatencyUs).toBe(true);
    }
    expect(lost / n).toBeGreaterThan(0.22);
    expect(lost / n).toBeLessThan(0.28);
    expect(dup / (n - lost)).toBeGreaterThan(0.08);
    expect(dup / (n - lost)).toBeLessThan(0.12);
  });
});
