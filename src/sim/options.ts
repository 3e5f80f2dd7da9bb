// What a run is asked to do: the caller's options, their defaults and checks, the Raft settings a
// seed draws for its cluster, and the one shell line that replays a run.

import type { Invariant } from './checker.js';
import type { Prng } from './prng.js';
import { type FaultProfile, profileByName } from './profiles.js';

/** Deliberately broken node behaviour, used to prove the checkers catch real bugs. */
export type BugName =
  /** Term and vote are never written to durable storage (commit is): a restart forgets its votes. */
  | 'amnesia'
  /** Healing leaves node 1 cut off from everyone: the run must be reported safe but not live. */
  | 'unhealed-partition';

export const BUG_NAMES: readonly BugName[] = ['amnesia', 'unhealed-partition'];

/**
 * Ways to step around a known core bug so a sweep can look for the next one. Off by default: a
 * plain run exercises the core exactly as documented.
 */
export type WorkaroundName =
  /** Pass RaftConfig.applied = snapshot index on restart instead of relying on the default. */
  | 'restart-applied'
  /** A torn write never separates an installed snapshot from the hard state that accompanies it. */
  | 'atomic-snapshot';

export const WORKAROUND_NAMES: readonly WorkaroundName[] = ['restart-applied', 'atomic-snapshot'];

export type ClockRates = 'spread' | 'extremes';

export interface SimOptions {
  /** Drives everything. Integer in [0, 2^53). */
  seed: number;
  /** Initial voters: 3 or 5. Default 3. Membership changes move the cluster between 3 and 5 voters. */
  nodes?: 3 | 5;
  /** Events in the chaos phase. Default 3000. */
  steps?: number;
  /** Fault profile name (see profiles.ts). Default 'chaos'. */
  faults?: string;
  /** Receives every trace line as it happens (verbose mode). */
  sink?: (line: string) => void;
  bug?: BugName;
  /** Invariants not to check (self-tests only). */
  disabledInvariants?: Invariant[];
  /** Liveness budget after healing, in (maximum) election timeouts. Default 50. */
  livenessElectionTimeouts?: number;
  /** Trace lines kept for failure reports. Default 40. */
  traceTail?: number;
  /** Membership changes in the workload. Default true. */
  confChanges?: boolean;
  workarounds?: WorkaroundName[];
  /** Overrides the profile's clock-rate spread: each node ticks at base × (1 ± drift). Range [0, 0.9]. */
  clockDrift?: number;
  /**
   * How node clock rates are drawn within ± drift: 'spread' (default) uniformly, 'extremes' only at
   * the two bounds (each node at base × (1 − drift) or base × (1 + drift)), the worst case for leases.
   */
  clockRates?: ClockRates;
  /** Overrides the drawn election timeout (ticks). Range [3, 100]. */
  electionTicks?: number;
  /** Overrides the core's lease margin (default: derived from its clock drift bound). */
  leaseMarginTicks?: number;
  /** Forces pre-vote on or off (default: drawn per seed, on in ~85% of seeds). */
  preVote?: boolean;
  /** Forces check-quorum on or off (default: drawn per seed, ~85% on; always on with leases). */
  checkQuorum?: boolean;
}

export const SIM_DEFAULTS = {
  nodes: 3 as 3 | 5,
  steps: 3000,
  faults: 'chaos',
  livenessElectionTimeouts: 50,
  traceTail: 40,
};

/** Membership bounds of the workload's walk, and how many new node ids a run may create. */
export const MIN_VOTERS = 3;
export const MAX_VOTERS = 5;
export const MAX_NEW_NODES = 6;

/** The options of one run with every default filled in and every range checked. */
export interface ResolvedOptions {
  seed: number;
  nodes: 3 | 5;
  steps: number;
  profile: FaultProfile;
  bug: BugName | undefined;
  workarounds: ReadonlySet<WorkaroundName>;
  confChanges: boolean;
  livenessTimeouts: number;
  clockDrift: number;
  clockRates: ClockRates;
}

export function resolveOptions(options: SimOptions): ResolvedOptions {
  const nodes = options.nodes ?? SIM_DEFAULTS.nodes;
  if (nodes !== 3 && nodes !== 5) {
    throw new RangeError(`sim: nodes must be 3 or 5, got ${String(nodes)}`);
  }
  const steps = options.steps ?? SIM_DEFAULTS.steps;
  if (!Number.isInteger(steps) || steps < 0) {
    throw new RangeError(`sim: steps must be a non-negative integer, got ${steps}`);
  }
  const profile = profileByName(options.faults ?? SIM_DEFAULTS.faults);
  const clockDrift = options.clockDrift ?? profile.clockDrift;
  if (!(clockDrift >= 0 && clockDrift <= 0.9)) {
    throw new RangeError(`sim: clockDrift must be in [0, 0.9], got ${clockDrift}`);
  }
  const clockRates = options.clockRates ?? 'spread';
  if (clockRates !== 'spread' && clockRates !== 'extremes') {
    throw new RangeError(`sim: clockRates must be 'spread' or 'extremes', got ${String(clockRates)}`);
  }
  return {
    seed: options.seed,
    nodes,
    steps,
    profile,
    bug: options.bug,
    workarounds: new Set(options.workarounds ?? []),
    confChanges: options.confChanges ?? true,
    livenessTimeouts: options.livenessElectionTimeouts ?? SIM_DEFAULTS.livenessElectionTimeouts,
    clockDrift,
    clockRates,
  };
}

/** The cluster-wide Raft settings drawn for a run. */
export interface ClusterSettings {
  electionTicks: number;
  heartbeatTicks: number;
  preVote: boolean;
  checkQuorum: boolean;
  leaderLease: boolean;
  /** Only when overridden; otherwise the core derives it. */
  leaseMarginTicks: number | undefined;
  maxInflightMessages: number;
  maxEntriesPerMessage: number;
  maxMessageBytes: number;
  maxUncommittedBytes: number;
  maxCommittedEntriesPerReady: number;
  /** Take a snapshot after this many applied entries. */
  snapshotEvery: number;
  /** Entries kept behind a snapshot when compacting (small, so laggards need install-snapshot). */
  snapshotWindow: number;
  baseTickUs: number;
}

/**
 * Draws the cluster settings from the 'settings' stream, then applies the caller's overrides —
 * after the draws, so an override changes nothing else in the run.
 */
export function clusterSettings(rng: Prng, profile: FaultProfile, options: SimOptions): ClusterSettings {
  const settings = drawSettings(rng, profile);
  if (options.preVote !== undefined) settings.preVote = options.preVote;
  if (options.checkQuorum !== undefined) settings.checkQuorum = options.checkQuorum || settings.leaderLease;
  if (options.electionTicks !== undefined) {
    if (
      !Number.isInteger(options.electionTicks) ||
      options.electionTicks < 3 ||
      options.electionTicks > 100
    ) {
      throw new RangeError(`sim: electionTicks must be an integer in [3, 100], got ${options.electionTicks}`);
    }
    settings.electionTicks = options.electionTicks;
    settings.heartbeatTicks = Math.min(settings.heartbeatTicks, options.electionTicks - 1);
  }
  if (options.leaseMarginTicks !== undefined) settings.leaseMarginTicks = options.leaseMarginTicks;
  return settings;
}

function drawSettings(rng: Prng, profile: FaultProfile): ClusterSettings {
  const leaderLease = profile.leaderLease;
  return {
    electionTicks: rng.range(8, 14),
    heartbeatTicks: rng.range(1, 3),
    preVote: rng.chance(0.85),
    checkQuorum: leaderLease || rng.chance(0.85),
    leaderLease,
    leaseMarginTicks: undefined,
    maxInflightMessages: rng.pick([1, 4, 16, 256]),
    maxEntriesPerMessage: rng.pick([1, 3, 16, 4096]),
    maxMessageBytes: rng.pick([100, 1_000, 1024 * 1024]),
    maxUncommittedBytes: rng.pick([2_000, 64 * 1024 * 1024]),
    maxCommittedEntriesPerReady: rng.pick([1, 5, 4096]),
    snapshotEvery: rng.range(5, 40),
    snapshotWindow: rng.range(0, 8),
    baseTickUs: 10_000,
  };
}

/** The one-line header of a run's trace: what was asked and what the seed drew. */
export function describeRun(o: ResolvedOptions, s: ClusterSettings): string {
  return `sim seed=${o.seed} nodes=${o.nodes} steps=${o.steps} faults=${o.profile.name}${
    o.bug ? ` bug=${o.bug}` : ''
  } election=${s.electionTicks} heartbeat=${s.heartbeatTicks} preVote=${s.preVote} checkQuorum=${s.checkQuorum} lease=${s.leaderLease} inflight=${s.maxInflightMessages} perMsg=${s.maxEntriesPerMessage} snapEvery=${s.snapshotEvery} window=${s.snapshotWindow}`;
}

export function replayCommand(o: {
  seed: number;
  nodes: number;
  steps: number;
  faults: string;
  bug?: BugName | undefined;
  workarounds?: readonly WorkaroundName[] | undefined;
  clockDrift?: number | undefined;
  clockRates?: ClockRates | undefined;
  electionTicks?: number | undefined;
  leaseMarginTicks?: number | undefined;
  confChanges?: boolean | undefined;
  preVote?: boolean | undefined;
  checkQuorum?: boolean | undefined;
}): string {
  let cmd = `npm run sim -- --seed ${o.seed}`;
  if (o.nodes !== SIM_DEFAULTS.nodes) cmd += ` --nodes ${o.nodes}`;
  if (o.steps !== SIM_DEFAULTS.steps) cmd += ` --steps ${o.steps}`;
  if (o.faults !== SIM_DEFAULTS.faults) cmd += ` --faults ${o.faults}`;
  if (o.clockDrift !== undefined) cmd += ` --clock-drift ${o.clockDrift}`;
  if (o.clockRates !== undefined && o.clockRates !== 'spread') cmd += ` --clock-rates ${o.clockRates}`;
  if (o.electionTicks !== undefined) cmd += ` --election-ticks ${o.electionTicks}`;
  if (o.leaseMarginTicks !== undefined) cmd += ` --lease-margin ${o.leaseMarginTicks}`;
  if (o.confChanges === false) cmd += ' --no-conf-changes';
  if (o.preVote !== undefined) cmd += ` --prevote ${o.preVote ? 'on' : 'off'}`;
  if (o.checkQuorum !== undefined) cmd += ` --check-quorum ${o.checkQuorum ? 'on' : 'off'}`;
  if (o.bug) cmd += ` --bug ${o.bug}`;
  for (const w of o.workarounds ?? []) cmd += ` --workaround ${w}`;
  return `${cmd} --verbose`;
}
