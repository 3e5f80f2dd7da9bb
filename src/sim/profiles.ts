// Fault profiles: which faults the director may inject, how often, and how hard.
// Each profile is a plain table so docs/simulator.md and `--faults` can list them.

import type { TopologyKind } from './topology.js';

export type FaultAction =
  /** Install a partition shape (symmetric, one-way or partial connectivity) for a while. */
  | 'partition'
  /** Kill a node: everything not yet durable is lost; it restarts later from its durable storage. */
  | 'crash'
  /** Arm a torn write: the node's next non-empty Ready is persisted only in part, then it dies. */
  | 'tornCrash'
  /** Stop a node's process: no ticks, no delivery (messages queue up), then resume. */
  | 'pause'
  /** Make the network lossy/duplicating/spiky for a while. */
  | 'netNoise';

export interface FaultProfile {
  name: string;
  summary: string;
  /** Relative frequency of each fault; 0 disables it. */
  weights: Record<FaultAction, number>;
  /** Virtual time between two fault decisions, microseconds [min, max]. */
  gapUs: [number, number];
  /** Partition shapes to draw from. */
  topologies: TopologyKind[];
  /** Per-node clock rate spread: each node's tick period is base × (1 ± drift). Range [0, 0.5). */
  clockDrift: number;
  /** Noise used for the background network condition of the whole run (before any netNoise fault). */
  baseDropRate: number;
  baseDuplicateRate: number;
  /** Turn on the core's leader lease and check that no two nodes hold a valid lease at once. */
  leaderLease: boolean;
  /** At most this many nodes are down or paused at the same time (the rest keep a quorum busy). */
  maxImpaired: number;
  /**
   * Scales how long each fault lasts (crash → restart 1–800 ms, pause 5 ms–1.5 s, partition
   * 50 ms–1.5 s, noise 50 ms–1 s at scale 1). Range (0, 10].
   */
  outageScale: number;
}

const ALL_TOPOLOGIES: TopologyKind[] = [
  'split',
  'isolate',
  'mute',
  'deaf',
  'bridge',
  'leaderBridge',
  'leaderQuorumOneWay',
  'randomOneWay',
];

const NO_FAULTS: Record<FaultAction, number> = {
  partition: 0,
  crash: 0,
  tornCrash: 0,
  pause: 0,
  netNoise: 0,
};

export const PROFILES: Record<string, FaultProfile> = {
  none: {
    name: 'none',
    summary: 'no faults at all, equal clocks: a baseline that must always be safe and live',
    weights: NO_FAULTS,
    gapUs: [1_000_000, 1_000_000],
    topologies: [],
    clockDrift: 0,
    baseDropRate: 0,
    baseDuplicateRate: 0,
    leaderLease: false,
    maxImpaired: 0,
    outageScale: 1,
  },
  net: {
    name: 'net',
    summary: 'message loss, duplication, delay spikes and reordering; no partitions or crashes',
    weights: { ...NO_FAULTS, netNoise: 1 },
    gapUs: [20_000, 200_000],
    topologies: [],
    clockDrift: 0.1,
    baseDropRate: 0.02,
    baseDuplicateRate: 0.02,
    leaderLease: false,
    maxImpaired: 0,
    outageScale: 1,
  },
  partition: {
    name: 'partition',
    summary: 'symmetric, one-way and partial-connectivity partitions over a noisy network',
    weights: { ...NO_FAULTS, partition: 4, netNoise: 1 },
    gapUs: [30_000, 400_000],
    topologies: ALL_TOPOLOGIES,
    clockDrift: 0.1,
    baseDropRate: 0.01,
    baseDuplicateRate: 0.01,
    leaderLease: false,
    maxImpaired: 0,
    outageScale: 1,
  },
  crash: {
    name: 'crash',
    summary: 'crashes and restarts, including torn last writes, over a noisy network',
    weights: { ...NO_FAULTS, crash: 3, tornCrash: 3, netNoise: 1 },
    gapUs: [20_000, 300_000],
    topologies: [],
    clockDrift: 0.1,
    baseDropRate: 0.01,
    baseDuplicateRate: 0.01,
    leaderLease: false,
    maxImpaired: 2,
    outageScale: 1,
  },
  pause: {
    name: 'pause',
    summary: 'process pauses (longer than election timeouts) and skewed clock rates',
    weights: { ...NO_FAULTS, pause: 4, netNoise: 1 },
    gapUs: [20_000, 300_000],
    topologies: [],
    clockDrift: 0.1,
    baseDropRate: 0.01,
    baseDuplicateRate: 0.01,
    leaderLease: false,
    maxImpaired: 2,
    outageScale: 1,
  },
  chaos: {
    name: 'chaos',
    summary: 'everything at once: partitions of every shape, crashes, torn writes, pauses, noise',
    weights: { partition: 3, crash: 2, tornCrash: 2, pause: 2, netNoise: 1 },
    gapUs: [15_000, 250_000],
    topologies: ALL_TOPOLOGIES,
    clockDrift: 0.1,
    baseDropRate: 0.01,
    baseDuplicateRate: 0.01,
    leaderLease: false,
    maxImpaired: 3,
    outageScale: 1,
  },
  storm: {
    name: 'storm',
    summary: 'chaos at about four times the rate, with short outages (flapping), over a lossier network',
    weights: { partition: 3, crash: 2, tornCrash: 3, pause: 2, netNoise: 1 },
    gapUs: [5_000, 60_000],
    topologies: ALL_TOPOLOGIES,
    clockDrift: 0.1,
    baseDropRate: 0.05,
    baseDuplicateRate: 0.05,
    leaderLease: false,
    maxImpaired: 3,
    outageScale: 0.15,
  },
  lease: {
    name: 'lease',
    summary:
      'chaos without pauses, leader lease on: checks that no two nodes hold a valid lease at once under ±10% clock rates',
    weights: { partition: 3, crash: 2, tornCrash: 2, pause: 0, netNoise: 1 },
    gapUs: [15_000, 250_000],
    topologies: ALL_TOPOLOGIES,
    clockDrift: 0.1,
    baseDropRate: 0.01,
    baseDuplicateRate: 0.01,
    leaderLease: true,
    maxImpaired: 2,
    outageScale: 1,
  },
  'lease-edge': {
    name: 'lease-edge',
    summary:
      'leader lease at its edge: the leader is cut off again and again on a clean network, so the rest elect a new leader as early as the lease allows',
    weights: { ...NO_FAULTS, partition: 1 },
    gapUs: [150_000, 400_000],
    topologies: ['isolateLeader'],
    clockDrift: 0.1,
    baseDropRate: 0,
    baseDuplicateRate: 0,
    leaderLease: true,
    maxImpaired: 1,
    outageScale: 1,
  },
};

export const PROFILE_NAMES = Object.keys(PROFILES);

export function profileByName(name: string): FaultProfile {
  const p = PROFILES[name];
  if (p === undefined) {
    throw new RangeError(`unknown fault profile "${name}"; expected one of: ${PROFILE_NAMES.join(', ')}`);
  }
  return p;
}
