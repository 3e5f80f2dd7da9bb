// The shared state of one run — virtual clock, event queue, nodes, network, safety checker, trace,
// counters and random streams — and the guarded ways every part of the simulator calls into a
// node's core or storage. The event loop, the Ready handling, the transport, process lifecycle,
// faults, workload and liveness all work on one SimWorld.

import type { ConfState, Message, NodeId } from '../raft/types.js';
import { InvalidConfChangeError, ProposalDroppedError } from '../raft/types.js';
import { InvariantViolation, SafetyChecker } from './checker.js';
import { EventQueue } from './event-queue.js';
import type { KvOp } from './kv-app.js';
import { CALM_NETWORK, Network, type NetworkConditions } from './network.js';
import {
  type ClusterSettings,
  clusterSettings,
  type ResolvedOptions,
  SIM_DEFAULTS,
  type SimOptions,
} from './options.js';
import { Prng } from './prng.js';
import { emptyStats, type SimStats } from './results.js';
import type { SimNode } from './sim-node.js';
import { Trace } from './trace.js';

export type SimEvent =
  | { k: 'tick'; node: NodeId }
  | { k: 'deliver'; msg: Message; fromInbox: boolean; senderLife: number }
  | { k: 'client' }
  | { k: 'fault' }
  | { k: 'restart'; node: NodeId; life: number }
  | { k: 'resume'; node: NodeId; life: number; pause: number }
  | { k: 'healNet'; epoch: number }
  | { k: 'calmNet'; gen: number }
  | { k: 'retire'; node: NodeId }
  | { k: 'report'; node: NodeId; life: number; to: NodeId; what: 'unreachable' | 'snapFailed' | 'snapOk' };

/** A client proposal, tracked until it is decided (committed, or provably never). */
export interface Proposal {
  op: KvOp;
  /** Where the leader put it; known from the first Ready that carries it. */
  loc?: { index: number; term: number };
}

export class SimWorld {
  readonly root: Prng;
  readonly netRng: Prng;
  readonly faultRng: Prng;
  readonly clientRng: Prng;
  readonly tornRng: Prng;
  readonly settings: ClusterSettings;
  /** The network's background conditions for this run (restored after a noise fault). */
  readonly baseNet: NetworkConditions;

  readonly queue = new EventQueue<SimEvent>();
  readonly nodes = new Map<NodeId, SimNode>();
  readonly network: Network;
  readonly checker: SafetyChecker;
  readonly trace: Trace;
  readonly bootstrapConf: ConfState;
  readonly stats: SimStats = emptyStats();
  /** Client proposals by op id: located by the Ready handling, decided by the liveness check. */
  readonly proposals = new Map<number, Proposal>();
  /** Terms in which some node became leader. */
  readonly leaderTerms = new Set<number>();

  now = 0;
  events = 0;
  phase: 'chaos' | 'heal' = 'chaos';

  constructor(
    readonly options: SimOptions,
    readonly o: ResolvedOptions,
  ) {
    this.root = new Prng(options.seed);
    this.netRng = this.root.fork('network');
    this.faultRng = this.root.fork('faults');
    this.clientRng = this.root.fork('client');
    this.tornRng = this.root.fork('torn');
    this.settings = clusterSettings(this.root.fork('settings'), o.profile, options);
    this.baseNet = {
      ...CALM_NETWORK,
      dropRate: o.profile.baseDropRate,
      duplicateRate: o.profile.baseDuplicateRate,
    };
    this.network = new Network(this.netRng);
    this.network.conditions = { ...this.baseNet };
    this.checker = new SafetyChecker({ disabled: options.disabledInvariants ?? [] });
    this.trace = new Trace(options.traceTail ?? SIM_DEFAULTS.traceTail, options.sink);

    const voters: NodeId[] = [];
    for (let i = 1; i <= o.nodes; i++) voters.push(i);
    this.bootstrapConf = { voters, learners: [] };
  }

  log(text: string): void {
    this.trace.add(this.now, text);
  }

  node(id: NodeId): SimNode {
    const n = this.nodes.get(id);
    if (n === undefined) throw new Error(`sim: no node ${id}`);
    return n;
  }

  /** The active leader with the highest term, if any. */
  currentLeader(): SimNode | undefined {
    let best: SimNode | undefined;
    let bestTerm = -1;
    for (const n of this.nodes.values()) {
      if (!n.active || n.role !== 'leader') continue;
      const t = this.core(n, 'status', (raw) => raw.status().term) ?? -1;
      if (t > bestTerm) {
        best = n;
        bestTerm = t;
      }
    }
    return best;
  }

  /** How long a fault lasts: uniform in [lo, hi] µs, scaled by the profile. */
  outage(lo: number, hi: number): number {
    const s = this.o.profile.outageScale;
    return this.faultRng.range(Math.max(1, Math.round(lo * s)), Math.max(1, Math.round(hi * s)));
  }

  /** The slowest clock's tick period: the liveness budget is counted in it. */
  maxTickPeriod(): number {
    return Math.ceil(this.settings.baseTickUs * (1 + this.o.clockDrift));
  }

  /**
   * Calls into a node's core. A documented rejection (ProposalDroppedError) is passed to the
   * caller; anything else the core throws is a panic, reported as a 'core-error' violation.
   */
  core<T>(node: SimNode, what: string, fn: (raw: NonNullable<SimNode['raw']>) => T): T | undefined {
    const raw = node.raw;
    if (raw === undefined) return undefined;
    try {
      return fn(raw);
    } catch (err) {
      if (isRejection(err) || err instanceof InvariantViolation) throw err;
      this.checker.coreError(node.id, what, err);
      return undefined;
    }
  }

  /**
   * A storage write the Ready (or the applied state) asked for. If storage refuses it, the core
   * handed out something inconsistent (a gap, an out-of-date snapshot, an unapplied index).
   */
  storageOp<T>(node: SimNode, what: string, fn: () => T): T | undefined {
    try {
      return fn();
    } catch (err) {
      this.checker.coreError(node.id, what, err);
      return undefined;
    }
  }
}

/** The core's documented refusals: a request that cannot be served now, or never. Not bugs. */
export function isRejection(err: unknown): err is ProposalDroppedError | InvalidConfChangeError {
  return err instanceof ProposalDroppedError || err instanceof InvalidConfChangeError;
}

export function copyConf(c: ConfState): ConfState {
  return { voters: c.voters.slice(), learners: c.learners.slice() };
}
