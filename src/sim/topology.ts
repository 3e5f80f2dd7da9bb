// Partition shapes. Each returns the directed links to block among `nodes`; every link not listed
// stays up. Besides clean splits, these include the partial-connectivity shapes that defeat naive
// Raft liveness (see docs/simulator.md), e.g. a leader that can reach only one node which in turn
// reaches everyone.

import type { NodeId } from '../raft/types.js';
import type { Prng } from './prng.js';

export type Link = [NodeId, NodeId];

export type TopologyKind =
  | 'split'
  | 'isolate'
  /** The current leader loses every link, both ways (the leader-lease edge case). */
  | 'isolateLeader'
  | 'mute'
  | 'deaf'
  | 'bridge'
  | 'leaderBridge'
  | 'leaderQuorumOneWay'
  | 'randomOneWay';

export interface Topology {
  kind: TopologyKind;
  /** Human-readable summary for the trace. */
  describe: string;
  links: Link[];
}

function both(a: NodeId, b: NodeId): Link[] {
  return [
    [a, b],
    [b, a],
  ];
}

function cut(groupA: readonly NodeId[], groupB: readonly NodeId[]): Link[] {
  const out: Link[] = [];
  for (const a of groupA) for (const b of groupB) out.push(...both(a, b));
  return out;
}

/** Symmetric split into two random groups (either side may hold the majority). */
export function split(nodes: readonly NodeId[], rng: Prng): Topology {
  const shuffled = rng.shuffled(nodes);
  const k = rng.range(1, Math.max(1, nodes.length - 1));
  const a = shuffled.slice(0, k);
  const b = shuffled.slice(k);
  return { kind: 'split', describe: `split [${a}] | [${b}]`, links: cut(a, b) };
}

/** One node loses every link, both ways. */
export function isolate(nodes: readonly NodeId[], victim: NodeId): Topology {
  return {
    kind: 'isolate',
    describe: `isolate ${victim}`,
    links: cut(
      [victim],
      nodes.filter((n) => n !== victim),
    ),
  };
}

/** The victim hears everyone but nobody hears it (outbound links down). */
export function mute(nodes: readonly NodeId[], victim: NodeId): Topology {
  const links: Link[] = nodes.filter((n) => n !== victim).map((n) => [victim, n]);
  return { kind: 'mute', describe: `mute ${victim} (can receive, cannot send)`, links };
}

/** Everyone hears the victim but it hears nobody (inbound links down). */
export function deaf(nodes: readonly NodeId[], victim: NodeId): Topology {
  const links: Link[] = nodes.filter((n) => n !== victim).map((n) => [n, victim]);
  return { kind: 'deaf', describe: `deaf ${victim} (can send, cannot receive)`, links };
}

/**
 * A bridge node reaches everyone; the rest are split into two sides that cannot reach each
 * other. Each side plus the bridge may or may not be a majority.
 */
export function bridge(nodes: readonly NodeId[], rng: Prng, bridgeNode?: NodeId): Topology {
  const b = bridgeNode ?? rng.pick(nodes);
  const others = rng.shuffled(nodes.filter((n) => n !== b));
  const k = Math.max(1, Math.floor(others.length / 2));
  const left = others.slice(0, k);
  const right = others.slice(k);
  return {
    kind: 'bridge',
    describe: `bridge ${b} between [${left}] and [${right}]`,
    links: cut(left, right),
  };
}

/**
 * The leader reaches only one node (the bridge), which reaches everyone; the others reach each
 * other and the bridge but not the leader. With 5 nodes the leader cannot keep a quorum, the
 * others form one, and the bridge keeps hearing the old leader.
 */
export function leaderBridge(nodes: readonly NodeId[], leader: NodeId, rng: Prng): Topology {
  const others = nodes.filter((n) => n !== leader);
  // A one-member configuration (the full simulator's membership changes can leave one): nothing to cut. Nothing drawn
  // either, so every other run keeps its draws (swarm seed 1452483 threw here).
  if (others.length === 0) return { kind: 'leaderBridge', describe: `leader ${leader} alone`, links: [] };
  const b = rng.pick(others);
  return {
    kind: 'leaderBridge',
    describe: `leader ${leader} reaches only bridge ${b}`,
    links: cut(
      [leader],
      others.filter((n) => n !== b),
    ),
  };
}

/**
 * The leader can send to everyone, but only a bare quorum (itself included) can answer it; the
 * remaining nodes hear its heartbeats one-way and can still talk among themselves.
 */
export function leaderQuorumOneWay(nodes: readonly NodeId[], leader: NodeId, rng: Prng): Topology {
  const others = rng.shuffled(nodes.filter((n) => n !== leader));
  const answering = Math.floor(nodes.length / 2); // + the leader = a bare majority
  const silent = others.slice(answering);
  const links: Link[] = silent.map((n) => [n, leader]);
  return {
    kind: 'leaderQuorumOneWay',
    describe: `leader ${leader} hears only [${others.slice(0, answering)}]; [${silent}] hear it one-way`,
    links,
  };
}

/** Every directed link is down independently with probability `p`. */
export function randomOneWay(nodes: readonly NodeId[], rng: Prng, p: number): Topology {
  const links: Link[] = [];
  for (const a of nodes) for (const b of nodes) if (a !== b && rng.chance(p)) links.push([a, b]);
  return {
    kind: 'randomOneWay',
    describe: `random one-way cuts: ${links.map(([a, b]) => `${a}>${b}`).join(' ')}`,
    links,
  };
}
