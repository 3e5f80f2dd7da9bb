// The deterministic simulator. One seed drives everything: the cluster's configuration, every
// node's clock rate and election timer, the network's latencies and losses, the fault schedule and
// the client workload. Time is virtual (integer microseconds) and the whole cluster runs on one
// thread, one event at a time, so a seed replays exactly.
//
// A run has two phases:
//  1. chaos: `steps` events with the profile's faults injected; safety is checked after every step;
//  2. heal: every fault is lifted (all nodes up, full connectivity, no loss) and the cluster must,
//     within a bounded virtual time, elect a leader, commit a barrier entry, decide every pending
//     proposal and bring every member's state machine up to the barrier (liveness).

import type {
  ConfChange,
  ConfState,
  Entry,
  Message,
  NodeId,
  RaftConfig,
  Ready,
  Snapshot,
} from '../raft/types.js';
import { InvalidConfChangeError, ProposalDroppedError } from '../raft/types.js';
import { type Invariant, InvariantViolation, type LogView, SafetyChecker } from './checker.js';
import { describeEntries, describeMessage } from './describe.js';
import { EventQueue } from './event-queue.js';
import { decodeOp, encodeOp, KvApp, type KvOp } from './kv-app.js';
import { CALM_NETWORK, cloneMessage, Network, type NetworkConditions } from './network.js';
import { Prng } from './prng.js';
import { type FaultProfile, profileByName } from './profiles.js';
import { SimNode } from './sim-node.js';
import * as topo from './topology.js';
import { Trace } from './trace.js';

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

export type ClockRates = 'spread' | 'extremes';

export const SIM_DEFAULTS = {
  nodes: 3 as 3 | 5,
  steps: 3000,
  faults: 'chaos',
  livenessElectionTimeouts: 50,
  traceTail: 40,
};

export interface SafetyFailure {
  invariant: Invariant;
  message: string;
  node?: NodeId;
  term?: number;
  index?: number;
  atUs: number;
  event: number;
}

export interface LivenessOutcome {
  /** True when the cluster recovered within the budget (or the run stopped on a safety violation first). */
  ok: boolean;
  /** Virtual time from healing to recovery. */
  recoveredAfterUs?: number;
  /** Why the cluster was not live by the deadline. */
  reason?: string;
}

export interface SimStats {
  leaderTerms: number;
  maxTerm: number;
  committed: number;
  proposals: number;
  proposalsDropped: number;
  reads: number;
  readsAnswered: number;
  confChanges: number;
  transfers: number;
  snapshotsTaken: number;
  snapshotsInstalled: number;
  crashes: number;
  tornWrites: number;
  pauses: number;
  partitions: number;
  messages: number;
  messagesLost: number;
  messagesDuplicated: number;
  nodesCreated: number;
}

export interface SimResult {
  seed: number;
  nodes: 3 | 5;
  steps: number;
  faults: string;
  bug?: BugName;
  safety?: SafetyFailure;
  liveness: LivenessOutcome;
  virtualUs: number;
  events: number;
  traceHash: string;
  traceTail: string[];
  stats: SimStats;
  /** One shell line that replays this run with a full trace. */
  replay: string;
}

type SimEvent =
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

interface Proposal {
  op: KvOp;
  /** Where the leader put it; known from the first Ready that carries it. */
  loc?: { index: number; term: number };
}

/** The cluster-wide Raft settings drawn for a run. */
interface ClusterSettings {
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

const MIN_VOTERS = 3;
const MAX_VOTERS = 5;
/** New node ids a run may create through membership changes. */
const MAX_NEW_NODES = 6;

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

export function runSimulation(options: SimOptions): SimResult {
  return new Simulation(options).run();
}

class Simulation {
  private readonly nodesCount: 3 | 5;
  private readonly steps: number;
  private readonly profile: FaultProfile;
  private readonly bug: BugName | undefined;
  private readonly workarounds: ReadonlySet<WorkaroundName>;
  private readonly confChanges: boolean;
  private readonly livenessTimeouts: number;
  private readonly clockDrift: number;
  private readonly clockRates: ClockRates;

  private readonly root: Prng;
  private readonly netRng: Prng;
  private readonly faultRng: Prng;
  private readonly clientRng: Prng;
  private readonly tornRng: Prng;
  private readonly settings: ClusterSettings;
  private readonly baseNet: NetworkConditions;

  private readonly queue = new EventQueue<SimEvent>();
  private readonly nodes = new Map<NodeId, SimNode>();
  private readonly network: Network;
  private readonly checker: SafetyChecker;
  private readonly trace: Trace;
  private readonly bootstrapConf: ConfState;

  private now = 0;
  private events = 0;
  private phase: 'chaos' | 'heal' = 'chaos';
  private healedAt = 0;
  private live = false;
  private lastLivenessReason = 'not evaluated yet';
  private netGen = 0;
  private pauseSeq = 0;
  private nextOpId = 1;
  private nextReadId = 1;
  private nextNodeId: NodeId;
  private readonly lastNodeId: NodeId;
  private spare: NodeId | undefined;
  private growing: boolean;
  private readonly proposals = new Map<number, Proposal>();
  private barrier: { id: number; leaderTerm: number } | undefined;
  private readonly leaderTerms = new Set<number>();
  private readonly stats: SimStats = {
    leaderTerms: 0,
    maxTerm: 0,
    committed: 0,
    proposals: 0,
    proposalsDropped: 0,
    reads: 0,
    readsAnswered: 0,
    confChanges: 0,
    transfers: 0,
    snapshotsTaken: 0,
    snapshotsInstalled: 0,
    crashes: 0,
    tornWrites: 0,
    pauses: 0,
    partitions: 0,
    messages: 0,
    messagesLost: 0,
    messagesDuplicated: 0,
    nodesCreated: 0,
  };

  constructor(private readonly options: SimOptions) {
    this.nodesCount = options.nodes ?? SIM_DEFAULTS.nodes;
    if (this.nodesCount !== 3 && this.nodesCount !== 5) {
      throw new RangeError(`sim: nodes must be 3 or 5, got ${String(this.nodesCount)}`);
    }
    this.steps = options.steps ?? SIM_DEFAULTS.steps;
    if (!Number.isInteger(this.steps) || this.steps < 0) {
      throw new RangeError(`sim: steps must be a non-negative integer, got ${this.steps}`);
    }
    this.profile = profileByName(options.faults ?? SIM_DEFAULTS.faults);
    this.bug = options.bug;
    this.workarounds = new Set(options.workarounds ?? []);
    this.confChanges = options.confChanges ?? true;
    this.livenessTimeouts = options.livenessElectionTimeouts ?? SIM_DEFAULTS.livenessElectionTimeouts;
    this.clockDrift = options.clockDrift ?? this.profile.clockDrift;
    if (!(this.clockDrift >= 0 && this.clockDrift <= 0.9)) {
      throw new RangeError(`sim: clockDrift must be in [0, 0.9], got ${this.clockDrift}`);
    }
    this.clockRates = options.clockRates ?? 'spread';
    if (this.clockRates !== 'spread' && this.clockRates !== 'extremes') {
      throw new RangeError(`sim: clockRates must be 'spread' or 'extremes', got ${String(this.clockRates)}`);
    }

    this.root = new Prng(options.seed);
    this.netRng = this.root.fork('network');
    this.faultRng = this.root.fork('faults');
    this.clientRng = this.root.fork('client');
    this.tornRng = this.root.fork('torn');
    this.settings = drawSettings(this.root.fork('settings'), this.profile);
    // Overrides are applied after the draws, so the rest of the run stays the same seed for seed.
    if (options.preVote !== undefined) this.settings.preVote = options.preVote;
    if (options.checkQuorum !== undefined)
      this.settings.checkQuorum = options.checkQuorum || this.settings.leaderLease;
    if (options.electionTicks !== undefined) {
      if (
        !Number.isInteger(options.electionTicks) ||
        options.electionTicks < 3 ||
        options.electionTicks > 100
      ) {
        throw new RangeError(
          `sim: electionTicks must be an integer in [3, 100], got ${options.electionTicks}`,
        );
      }
      this.settings.electionTicks = options.electionTicks;
      this.settings.heartbeatTicks = Math.min(this.settings.heartbeatTicks, options.electionTicks - 1);
    }
    if (options.leaseMarginTicks !== undefined) this.settings.leaseMarginTicks = options.leaseMarginTicks;
    this.baseNet = {
      ...CALM_NETWORK,
      dropRate: this.profile.baseDropRate,
      duplicateRate: this.profile.baseDuplicateRate,
    };
    this.network = new Network(this.netRng);
    this.network.conditions = { ...this.baseNet };
    this.checker = new SafetyChecker({ disabled: options.disabledInvariants ?? [] });
    this.trace = new Trace(options.traceTail ?? SIM_DEFAULTS.traceTail, options.sink);

    const voters: NodeId[] = [];
    for (let i = 1; i <= this.nodesCount; i++) voters.push(i);
    this.bootstrapConf = { voters, learners: [] };
    this.nextNodeId = this.nodesCount + 1;
    this.lastNodeId = this.nodesCount + MAX_NEW_NODES;
    this.growing = this.nodesCount < MAX_VOTERS;
  }

  run(): SimResult {
    let safety: SafetyFailure | undefined;
    const s = this.settings;
    this.log(
      `sim seed=${this.options.seed} nodes=${this.nodesCount} steps=${this.steps} faults=${this.profile.name}${
        this.bug ? ` bug=${this.bug}` : ''
      } election=${s.electionTicks} heartbeat=${s.heartbeatTicks} preVote=${s.preVote} checkQuorum=${s.checkQuorum} lease=${s.leaderLease} inflight=${s.maxInflightMessages} perMsg=${s.maxEntriesPerMessage} snapEvery=${s.snapshotEvery} window=${s.snapshotWindow}`,
    );
    try {
      for (const id of this.bootstrapConf.voters) this.createNode(id);
      this.queue.push(this.clientRng.range(1_000, 5_000), { k: 'client' });
      if (this.hasFaults()) this.queue.push(this.faultRng.range(...this.profile.gapUs), { k: 'fault' });
      this.drainReadies();

      while (this.events < this.steps && this.step()) {
        // chaos phase
      }
      this.heal();
      const budget = this.livenessTimeouts * this.settings.electionTicks * this.maxTickPeriod();
      const deadline = this.now + budget;
      while (!this.live && (this.queue.peekTime() ?? Number.POSITIVE_INFINITY) <= deadline) this.step();
      if (!this.live) this.now = Math.max(this.now, deadline);
    } catch (err) {
      if (!(err instanceof InvariantViolation)) throw err;
      safety = {
        invariant: err.invariant,
        message: err.message,
        ...err.context,
        atUs: this.now,
        event: this.events,
      };
      this.log(`SAFETY VIOLATION ${err.message}`);
    }

    this.stats.leaderTerms = this.leaderTerms.size;
    this.stats.committed = this.checker.knownCommit;
    let liveness: LivenessOutcome;
    if (safety) liveness = { ok: true, reason: 'not evaluated (safety violation)' };
    else if (this.live) liveness = { ok: true, recoveredAfterUs: this.now - this.healedAt };
    else liveness = { ok: false, reason: this.lastLivenessReason };
    if (!safety && !this.live) this.log(`LIVENESS FAILURE ${this.lastLivenessReason}`);

    const result: SimResult = {
      seed: this.options.seed,
      nodes: this.nodesCount,
      steps: this.steps,
      faults: this.profile.name,
      liveness,
      virtualUs: this.now,
      events: this.events,
      traceHash: this.trace.hash(),
      traceTail: this.trace.tail(),
      stats: this.stats,
      replay: replayCommand({
        seed: this.options.seed,
        nodes: this.nodesCount,
        steps: this.steps,
        faults: this.profile.name,
        bug: this.bug,
        workarounds: [...this.workarounds],
        clockDrift: this.options.clockDrift,
        clockRates: this.options.clockRates,
        electionTicks: this.options.electionTicks,
        leaseMarginTicks: this.options.leaseMarginTicks,
        confChanges: this.options.confChanges,
        preVote: this.options.preVote,
        checkQuorum: this.options.checkQuorum,
      }),
    };
    if (this.bug) result.bug = this.bug;
    if (safety) result.safety = safety;
    return result;
  }

  // ---- the event loop --------------------------------------------------------------------------

  /** Runs one event and everything it triggers. False when nothing is left to do. */
  private step(): boolean {
    const next = this.queue.pop();
    if (next === undefined) return false;
    this.now = next.at;
    this.events++;
    this.dispatch(next.event);
    this.drainReadies();
    if (this.settings.leaderLease) this.checkLeases();
    return true;
  }

  private dispatch(ev: SimEvent): void {
    switch (ev.k) {
      case 'tick': {
        const node = this.node(ev.node);
        if (node.state === 'retired') return;
        if (node.active) this.core(node, 'tick', (raw) => raw.tick());
        this.queue.push(this.now + node.tickPeriodUs, ev);
        return;
      }
      case 'deliver':
        this.deliver(ev.msg, ev.fromInbox, ev.senderLife);
        return;
      case 'client':
        this.clientStep();
        return;
      case 'fault':
        this.faultStep();
        return;
      case 'restart': {
        const node = this.node(ev.node);
        if (this.phase === 'chaos' && node.state === 'down' && node.incarnation === ev.life)
          this.restart(node);
        return;
      }
      case 'resume': {
        const node = this.node(ev.node);
        if (node.paused && node.incarnation === ev.life && node.pauseToken === ev.pause) this.resume(node);
        return;
      }
      case 'healNet':
        if (this.network.epoch === ev.epoch && this.phase === 'chaos') {
          this.network.heal();
          this.log(`net heal partition`);
        }
        return;
      case 'calmNet':
        if (this.netGen === ev.gen && this.phase === 'chaos') {
          this.network.conditions = { ...this.baseNet };
          this.log(`net calm`);
        }
        return;
      case 'retire': {
        const node = this.node(ev.node);
        if (node.state !== 'retired') {
          node.retire();
          this.log(`n${node.id} retired (removed from the cluster)`);
        }
        return;
      }
      case 'report': {
        const node = this.node(ev.node);
        if (!node.alive || node.incarnation !== ev.life) return;
        // A paused process's transport is paused too: it reports once the process runs again.
        if (node.paused) {
          this.queue.push(this.now + 1_000, ev);
          return;
        }
        this.log(`n${node.id} transport reports ${ev.what} for n${ev.to}`);
        if (ev.what === 'unreachable') {
          this.core(node, 'reportUnreachable', (raw) => raw.reportUnreachable(ev.to));
        } else {
          this.core(node, 'reportSnapshot', (raw) => raw.reportSnapshot(ev.to, ev.what === 'snapOk'));
        }
        return;
      }
    }
  }

  private deliver(msg: Message, fromInbox: boolean, senderLife: number): void {
    const to = this.nodes.get(msg.to);
    // A partition that came up while the message was in flight loses it too (unless it was
    // already sitting in a paused receiver's socket buffer).
    if (to === undefined || !to.alive || (!fromInbox && this.network.isBlocked(msg.from, msg.to))) {
      this.stats.messagesLost++;
      if (msg.type === 'snap') this.reportSnapshot(msg, senderLife, false);
      return;
    }
    if (to.paused) {
      to.inbox.push({ msg, senderLife });
      return;
    }
    this.log(`recv ${describeMessage(msg)}`);
    this.core(to, `step(${msg.type})`, (raw) => raw.step(msg));
    if (msg.type === 'snap') this.reportSnapshot(msg, senderLife, true);
  }

  /**
   * The transport tells the sender how every snapshot stream ended, as a real one would (etcd's
   * contract too): without it the leader would wait for that follower forever.
   */
  private reportSnapshot(msg: Message, senderLife: number, ok: boolean): void {
    const sender = this.nodes.get(msg.from);
    if (!sender?.alive || sender.incarnation !== senderLife) return;
    if (sender.active) {
      this.core(sender, 'reportSnapshot', (raw) => raw.reportSnapshot(msg.to, ok));
    } else {
      this.queue.push(this.now + 1_000, {
        k: 'report',
        node: sender.id,
        life: senderLife,
        to: msg.to,
        what: ok ? 'snapOk' : 'snapFailed',
      });
    }
  }

  private drainReadies(): void {
    for (const node of this.nodes.values()) {
      let rounds = 0;
      while (node.active && node.raw?.hasReady()) {
        if (++rounds > 1000) {
          this.checker.coreError(node.id, 'hasReady()', new Error('still true after 1000 Readies'));
          break;
        }
        const rd = this.core(node, 'ready', (raw) => raw.ready());
        if (rd === undefined) break;
        this.handleReady(node, rd);
      }
    }
  }

  // ---- the Ready contract ----------------------------------------------------------------------

  private handleReady(node: SimNode, rd: Ready): void {
    const id = node.id;
    let becameLeaderTerm: number | undefined;
    if (rd.softState) {
      const wasLeader = node.role === 'leader';
      node.role = rd.softState.role;
      node.lead = rd.softState.lead;
      const term = rd.hardState?.term ?? this.core(node, 'status', (raw) => raw.status().term) ?? 0;
      this.log(`n${id} role ${node.role} lead=${node.lead} term=${term}`);
      if (node.role === 'leader' && !wasLeader) {
        becameLeaderTerm = this.core(node, 'status', (raw) => raw.status().term) ?? term;
        this.leaderTerms.add(becameLeaderTerm);
        this.stats.maxTerm = Math.max(this.stats.maxTerm, becameLeaderTerm);
        this.checker.observeLeader(id, becameLeaderTerm, 'role');
        this.checker.observeLeaderIsVoter(id, becameLeaderTerm, node.conf.voters);
      }
    }

    // Proposals are located by their first appearance, which is in the proposing leader's Ready.
    for (const e of node.role === 'leader' ? rd.entries : []) {
      if (e.type !== 'normal' || e.data.length === 0) continue;
      const op = decodeOp(e.data);
      const p = op && this.proposals.get(op.id);
      if (p && p.loc === undefined) p.loc = { index: e.index, term: e.term };
    }

    // 1. Persist: snapshot, entries, hard state — or, with a torn write armed, only a prefix of them.
    const hasSnap = rd.snapshot !== undefined && rd.snapshot.metadata.index > 0;
    const total = (hasSnap ? 1 : 0) + rd.entries.length + (rd.hardState ? 1 : 0);
    let budget = total;
    if (node.tornPending && total > 0) {
      budget = this.tornRng.int(total);
      // With the workaround, a snapshot and its hard state land together or not at all.
      if (hasSnap && budget > 0 && this.workarounds.has('atomic-snapshot')) budget = total;
    }
    const kept = budget;
    // The term of the leader this Ready writes for: the core's current term.
    const writerTerm = rd.hardState?.term ?? node.durableHs.term;
    if (hasSnap && budget > 0) {
      this.persistSnapshot(node, writerTerm, rd.snapshot as Snapshot);
      budget--;
    }
    const n = Math.min(budget, rd.entries.length);
    if (n > 0)
      this.persistEntries(node, writerTerm, n === rd.entries.length ? rd.entries : rd.entries.slice(0, n));
    budget -= n;
    if (rd.hardState && budget > 0) this.persistHardState(node, rd.hardState);
    if (kept < total) {
      this.stats.tornWrites++;
      this.crash(node, `torn write: persisted ${kept} of ${total} units (snapshot, entries, hard state)`);
      return;
    }
    if (becameLeaderTerm !== undefined) this.checker.observeLeaderLog(id, becameLeaderTerm, node.view());

    // 2. Send.
    for (const msg of rd.messages) this.send(node, msg);

    // 3. Apply: snapshot, then committed entries; then answer reads.
    if (hasSnap) {
      const snap = rd.snapshot as Snapshot;
      node.app = KvApp.restore(snap.data);
      node.conf = copyConf(snap.metadata.conf);
      this.stats.snapshotsInstalled++;
      this.log(`n${id} install snapshot ${snap.metadata.index}/${snap.metadata.term}`);
      this.checker.observeRestore(
        id,
        node.durableHs.term,
        snap.metadata.index,
        snap.metadata.term,
        node.app.chain,
        'install',
      );
    }
    if (rd.committedEntries.length > 0) {
      this.log(`n${id} apply ${describeEntries(rd.committedEntries)}`);
      for (const e of rd.committedEntries) this.apply(node, e);
    }
    for (const rs of rd.readStates) {
      const ctx = decoder.decode(rs.context);
      this.stats.readsAnswered++;
      this.log(
        `n${id} read ${ctx} index=${rs.index} (issued with committed=${this.checker.readMinIndex(ctx) ?? '?'})`,
      );
      this.checker.observeReadState(id, ctx, rs.index);
    }

    // 4. Advance.
    this.core(node, 'advance', (raw) => raw.advance(rd));
    this.maybeSnapshot(node);
  }

  private persistSnapshot(node: SimNode, writerTerm: number, snap: Snapshot): void {
    const before = this.durableTerms(node, snap.metadata.index + 1);
    this.storageOp(node, 'storage.applySnapshot', () => node.durable.applySnapshot(snap));
    this.checker.observeLogRewrite(node.id, writerTerm, before, node.view(), 'snapshot install');
    this.checker.observeSnapshot(node.id, node.durableHs.term, snap.metadata, KvApp.restore(snap.data).chain);
    this.log(`n${node.id} persist snapshot ${snap.metadata.index}/${snap.metadata.term}`);
  }

  private persistEntries(node: SimNode, writerTerm: number, entries: Entry[]): void {
    const first = (entries[0] as Entry).index;
    const before = this.durableTerms(node, first);
    if (before.length > 0 && node.role === 'leader') {
      this.checker.observeLeaderRewrite(node.id, writerTerm, before, entries);
    }
    this.storageOp(node, 'storage.append', () => node.durable.append(entries));
    const view = node.view();
    if (before.length > 0) this.checker.observeLogRewrite(node.id, writerTerm, before, view, 'append');
    this.checker.observeAppended(node.id, entries, view);
    this.log(
      `n${node.id} persist ${describeEntries(entries)}${before.length > 0 ? ` (overwrote from ${first})` : ''}`,
    );
  }

  private persistHardState(node: SimNode, next: { term: number; vote: NodeId; commit: number }): void {
    const prev = node.durableHs;
    const hs = this.bug === 'amnesia' ? { term: prev.term, vote: prev.vote, commit: next.commit } : next;
    const view = node.view();
    this.checker.observeHardState(node.id, prev, hs, view);
    node.durable.setHardState({ ...hs });
    node.durableHs = { ...hs };
    if (hs.commit > prev.commit) {
      this.checker.observeCommit(node.id, hs.term, prev.commit, hs.commit, view);
      if (node.role === 'leader') {
        const logs = new Map<NodeId, LogView>();
        for (const v of node.conf.voters) {
          const other = this.nodes.get(v);
          if (other) logs.set(v, other.view());
        }
        this.checker.observeCommitQuorum(node.id, hs.commit, node.conf.voters, logs);
      }
    }
    if (hs.term !== prev.term || hs.vote !== prev.vote) {
      this.log(`n${node.id} persist term=${hs.term} vote=${hs.vote} commit=${hs.commit}`);
    }
  }

  /** (index, term) of every durable entry from `from` to the end of the log. */
  private durableTerms(node: SimNode, from: number): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    const view = node.view();
    for (let i = Math.max(from, view.snapshotIndex + 1); i <= view.lastIndex; i++) {
      const t = view.term(i);
      if (t !== undefined) out.push([i, t]);
    }
    return out;
  }

  private send(node: SimNode, msg: Message): void {
    this.checker.observeSend(msg, node.durableHs);
    this.stats.messages++;
    const fates = this.network.fate(msg);
    if (fates.length === 0) {
      this.stats.messagesLost++;
      this.log(`lost ${describeMessage(msg)}`);
      // The transport sometimes notices: a failed connection, or a snapshot stream that broke.
      if (msg.type === 'snap') {
        this.queue.push(this.now + this.settings.baseTickUs, {
          k: 'report',
          node: node.id,
          life: node.incarnation,
          to: msg.to,
          what: 'snapFailed',
        });
      } else if (this.network.isBlocked(msg.from, msg.to) && this.netRng.chance(0.25)) {
        this.queue.push(this.now + 1, {
          k: 'report',
          node: node.id,
          life: node.incarnation,
          to: msg.to,
          what: 'unreachable',
        });
      }
      return;
    }
    if (fates.length > 1) this.stats.messagesDuplicated++;
    for (const delay of fates) {
      this.queue.push(this.now + delay, {
        k: 'deliver',
        msg: cloneMessage(msg),
        fromInbox: false,
        senderLife: node.incarnation,
      });
    }
  }

  private apply(node: SimNode, e: Entry): void {
    node.app.apply(e);
    if (e.type === 'conf') {
      const conf = this.core(node, 'applyConfChange', (raw) => raw.applyConfChange(e.change));
      if (conf) node.conf = copyConf(conf);
      this.log(
        `n${node.id} conf ${e.change.type} ${e.change.nodeId} -> voters=[${node.conf.voters}] learners=[${node.conf.learners}]`,
      );
      if (e.change.type === 'remove') this.onRemoved(e.change.nodeId);
    }
    this.checker.observeApply(node.id, node.durableHs.term, e, node.app.chain);
  }

  private maybeSnapshot(node: SimNode): void {
    const s = this.settings;
    const snapIndex = node.durable.snapshot().metadata.index;
    if (node.app.applied - snapIndex < s.snapshotEvery) return;
    const snap = this.storageOp(node, 'storage.createSnapshot at the applied index', () =>
      node.durable.createSnapshot(node.app.applied, copyConf(node.conf), node.app.serialize()),
    );
    if (snap === undefined) return;
    this.stats.snapshotsTaken++;
    this.checker.observeSnapshot(node.id, node.durableHs.term, snap.metadata, node.app.chain);
    const compactTo = node.app.applied - s.snapshotWindow;
    if (compactTo >= node.durable.firstIndex()) {
      this.storageOp(node, 'storage.compact', () => node.durable.compact(compactTo));
    }
    this.log(`n${node.id} snapshot at ${node.app.applied}, compacted to ${node.durable.firstIndex() - 1}`);
  }

  // ---- process faults --------------------------------------------------------------------------

  private createNode(id: NodeId): SimNode {
    const drift = this.clockDrift;
    const rng = this.root.fork(`node-${id}`);
    // One draw either way, so 'extremes' changes nothing else in the run.
    const u = rng.float();
    const factor =
      this.clockRates === 'extremes' ? (u < 0.5 ? 1 - drift : 1 + drift) : 1 + drift * (2 * u - 1);
    const period = Math.max(1, Math.round(this.settings.baseTickUs * factor));
    const electionRng = rng.fork('election');
    const s = this.settings;
    const makeConfig = (applied: number): RaftConfig => ({
      ...(this.workarounds.has('restart-applied') ? { applied } : {}),
      id,
      electionTicks: s.electionTicks,
      heartbeatTicks: s.heartbeatTicks,
      random: electionRng.asRandomInt(),
      preVote: s.preVote,
      checkQuorum: s.checkQuorum,
      leaderLease: s.leaderLease,
      ...(s.leaseMarginTicks !== undefined ? { leaseMarginTicks: s.leaseMarginTicks } : {}),
      maxInflightMessages: s.maxInflightMessages,
      maxEntriesPerMessage: s.maxEntriesPerMessage,
      maxMessageBytes: s.maxMessageBytes,
      maxUncommittedBytes: s.maxUncommittedBytes,
      maxCommittedEntriesPerReady: s.maxCommittedEntriesPerReady,
    });
    // Every node, including ones added later, starts from the same bootstrap snapshot at index 0;
    // a node added later learns the real membership by replaying the log or installing a snapshot.
    const node = new SimNode(id, period, makeConfig, copyConf(this.bootstrapConf));
    this.nodes.set(id, node);
    this.stats.nodesCreated++;
    this.log(`n${id} created, tick period ${period}us`);
    this.restart(node);
    this.queue.push(this.now + rng.range(0, period - 1), { k: 'tick', node: id });
    return node;
  }

  private restart(node: SimNode): void {
    try {
      node.start();
    } catch (err) {
      if (err instanceof InvariantViolation) throw err;
      this.checker.coreError(node.id, 'restart from durable storage', err);
      return;
    }
    const snap = node.durable.snapshot().metadata;
    const hs = node.durableHs;
    this.log(
      `n${node.id} start from durable: snapshot ${snap.index}/${snap.term} log ..${node.durable.lastIndex()} term=${hs.term} vote=${hs.vote} commit=${hs.commit}`,
    );
    this.checker.observeRestore(
      node.id,
      node.durableHs.term,
      snap.index,
      snap.term,
      node.app.chain,
      'restart',
    );
  }

  private crash(node: SimNode, why: string): void {
    // A snapshot stream to a process that dies breaks, and the sender's transport says so (seed
    // 2000662 --faults storm: a snapshot queued for a paused node vanished with its crash, and the
    // leader waited for that follower forever).
    const lostSnaps = node.inbox.filter((q) => q.msg.type === 'snap');
    node.crash();
    for (const q of lostSnaps) this.reportSnapshot(q.msg, q.senderLife, false);
    this.stats.crashes++;
    this.log(`n${node.id} CRASH (${why})`);
    if (this.phase === 'chaos' && !node.removed) {
      this.queue.push(this.now + this.outage(1_000, 800_000), {
        k: 'restart',
        node: node.id,
        life: node.incarnation,
      });
    }
  }

  private resume(node: SimNode): void {
    node.paused = false;
    this.log(`n${node.id} resume (${node.inbox.length} queued messages)`);
    for (const { msg, senderLife } of node.inbox) {
      this.queue.push(this.now, { k: 'deliver', msg, fromInbox: true, senderLife });
    }
    node.inbox = [];
  }

  private onRemoved(id: NodeId): void {
    const node = this.nodes.get(id);
    if (node === undefined || node.removed) return;
    node.removed = true;
    if (this.spare === id) this.spare = undefined;
    // Operators shut removed servers down eventually; until then they may try to disrupt.
    const delay = this.faultRng.range(2, 6) * this.settings.electionTicks * this.settings.baseTickUs;
    this.queue.push(this.now + delay, { k: 'retire', node: id });
  }

  private faultStep(): void {
    if (this.phase !== 'chaos') return;
    const p = this.profile;
    const rng = this.faultRng;
    const action = rng.weighted(p.weights);
    const present = [...this.nodes.values()].filter((n) => n.state !== 'retired');
    const ids = present.map((n) => n.id);
    const impaired = present.filter((n) => n.state === 'down' || n.paused || n.tornPending).length;
    const leader = this.currentLeader();
    const victimOf = (candidates: SimNode[]): SimNode | undefined => {
      if (candidates.length === 0) return undefined;
      if (leader && candidates.includes(leader) && rng.chance(0.4)) return leader;
      return rng.pick(candidates);
    };
    switch (action) {
      case 'partition': {
        if (ids.length < 2 || p.topologies.length === 0) break;
        const kind = rng.pick(p.topologies);
        const lead = leader?.id ?? rng.pick(ids);
        const t = makeTopology(kind, ids, lead, rng);
        this.network.setBlocked(t.links);
        this.stats.partitions++;
        this.log(`net partition ${t.describe}`);
        this.queue.push(this.now + this.outage(50_000, 1_500_000), {
          k: 'healNet',
          epoch: this.network.epoch,
        });
        break;
      }
      case 'crash':
      case 'tornCrash': {
        if (impaired >= p.maxImpaired) break;
        const victim = victimOf(present.filter((n) => n.alive && !n.tornPending));
        if (!victim) break;
        if (action === 'crash') this.crash(victim, 'kill -9');
        else {
          victim.tornPending = true;
          this.log(`n${victim.id} torn write armed`);
        }
        break;
      }
      case 'pause': {
        if (impaired >= p.maxImpaired) break;
        const victim = victimOf(present.filter((n) => n.active));
        if (!victim) break;
        victim.paused = true;
        victim.pauseToken = ++this.pauseSeq;
        this.stats.pauses++;
        const length = this.outage(5_000, 1_500_000);
        this.log(`n${victim.id} PAUSE for ${length}us`);
        this.queue.push(this.now + length, {
          k: 'resume',
          node: victim.id,
          life: victim.incarnation,
          pause: victim.pauseToken,
        });
        break;
      }
      case 'netNoise': {
        const c: NetworkConditions = {
          ...this.baseNet,
          dropRate: rng.float() * 0.3,
          duplicateRate: rng.float() * 0.2,
          spikeRate: rng.float() * 0.3,
          spikeMaxUs: rng.chance(0.3) ? rng.range(300_000, 2_000_000) : rng.range(1_000, 300_000),
        };
        this.network.conditions = c;
        const gen = ++this.netGen;
        this.log(
          `net noise drop=${c.dropRate.toFixed(3)} dup=${c.duplicateRate.toFixed(3)} spike=${c.spikeRate.toFixed(3)} up to ${c.spikeMaxUs}us`,
        );
        this.queue.push(this.now + this.outage(50_000, 1_000_000), { k: 'calmNet', gen });
        break;
      }
    }
    this.queue.push(this.now + rng.range(...p.gapUs), { k: 'fault' });
  }

  /** End of chaos: lift every fault and start the liveness clock. */
  private heal(): void {
    this.phase = 'heal';
    this.healedAt = this.now;
    this.log(`HEAL all faults lifted`);
    this.network.heal();
    if (this.bug === 'unhealed-partition') {
      this.network.setBlocked(topo.isolate([...this.nodes.keys()], 1).links);
      this.log('net partition isolate 1 (left in place: unhealed-partition)');
    }
    this.network.conditions = { ...CALM_NETWORK };
    for (const node of this.nodes.values()) {
      node.tornPending = false;
      if (node.state === 'retired') continue;
      if (node.removed) {
        node.retire();
        continue;
      }
      if (node.state === 'down') this.restart(node);
      else if (node.paused) this.resume(node);
    }
    this.drainReadies();
  }

  // ---- the client workload ---------------------------------------------------------------------

  private clientStep(): void {
    const rng = this.clientRng;
    if (this.phase === 'heal') {
      this.live = this.evaluateLiveness();
      if (!this.live) this.queue.push(this.now + 2_000, { k: 'client' });
      return;
    }
    this.queue.push(this.now + rng.range(500, 8_000), { k: 'client' });
    const action = rng.weighted({
      propose: 60,
      read: 10,
      conf: this.confChanges ? 5 : 0,
      transfer: 2,
      campaign: 1,
      idle: 20,
    });
    const active = [...this.nodes.values()].filter((n) => n.active);
    if (active.length === 0) return;
    const leaders = active.filter((n) => n.role === 'leader');
    switch (action) {
      case 'propose': {
        const target = leaders.length > 0 ? rng.pick(leaders) : rng.pick(active);
        const batch = rng.range(1, 4);
        for (let i = 0; i < batch; i++) {
          const key = `k${rng.int(8)}`;
          const op: KvOp = rng.chance(0.7)
            ? { id: this.nextOpId++, op: 'incr', key, by: rng.range(1, 9) }
            : { id: this.nextOpId++, op: 'set', key, value: rng.int(1000) };
          if (!this.propose(target, op)) break;
        }
        return;
      }
      case 'read': {
        const target = rng.pick(active);
        const ctx = `r${this.nextReadId++}`;
        this.stats.reads++;
        this.checker.observeReadIssued(target.id, ctx);
        this.log(`client readIndex ${ctx} at n${target.id} (committed=${this.checker.knownCommit})`);
        try {
          this.core(target, 'readIndex', (raw) => raw.readIndex(encoder.encode(ctx)));
        } catch (err) {
          if (!(err instanceof ProposalDroppedError)) throw err;
          this.log(`client readIndex ${ctx} at n${target.id} refused: ${err.reason}`);
        }
        return;
      }
      case 'conf': {
        if (leaders.length > 0) this.confStep(rng.pick(leaders));
        return;
      }
      case 'transfer': {
        if (leaders.length === 0) return;
        const leader = rng.pick(leaders);
        const others = leader.conf.voters.filter((v) => v !== leader.id);
        if (others.length === 0) return;
        const to = rng.pick(others);
        this.stats.transfers++;
        this.log(`client transferLeadership n${leader.id} -> n${to}`);
        try {
          this.core(leader, 'transferLeadership', (raw) => raw.transferLeadership(to));
        } catch (err) {
          if (!isRejection(err)) throw err;
          this.log(`client transferLeadership refused: ${err.message}`);
        }
        return;
      }
      case 'campaign': {
        const voters = active.filter((n) => n.conf.voters.includes(n.id));
        if (voters.length === 0) return;
        const node = rng.pick(voters);
        this.log(`client campaign at n${node.id}`);
        this.core(node, 'campaign', (raw) => raw.campaign());
        return;
      }
      case 'idle':
        return;
    }
  }

  /** Proposes `op` at `node`; false when the core refused it. */
  private propose(node: SimNode, op: KvOp): boolean {
    try {
      this.core(node, 'propose', (raw) => raw.propose(encodeOp(op)));
    } catch (err) {
      if (err instanceof ProposalDroppedError) {
        this.stats.proposalsDropped++;
        this.log(`client propose #${op.id} at n${node.id} dropped: ${err.reason}`);
        return false;
      }
      throw err;
    }
    this.stats.proposals++;
    this.proposals.set(op.id, { op });
    this.log(`client propose #${op.id} ${op.op} at n${node.id}`);
    return true;
  }

  /** Membership walk: add a learner, promote it, ... up to 5 voters; then remove down to 3. */
  private confStep(leader: SimNode): void {
    const conf = leader.conf;
    let cc: ConfChange | undefined;
    if (conf.learners.length > 0) {
      cc = { type: 'addVoter', nodeId: conf.learners[0] as NodeId };
    } else if (this.growing && conf.voters.length < MAX_VOTERS) {
      const spare = this.spareNode(conf);
      if (spare !== undefined) cc = { type: 'addLearner', nodeId: spare };
    } else if (conf.voters.length > MIN_VOTERS) {
      cc = { type: 'remove', nodeId: this.clientRng.pick(conf.voters) };
    }
    if (conf.voters.length >= MAX_VOTERS) this.growing = false;
    if (conf.voters.length <= MIN_VOTERS) this.growing = true;
    if (cc === undefined) return;
    try {
      this.core(leader, 'proposeConfChange', (raw) => raw.proposeConfChange(cc));
      this.stats.confChanges++;
      this.log(`client conf ${cc.type} ${cc.nodeId} at n${leader.id}`);
    } catch (err) {
      if (!isRejection(err)) throw err;
      this.log(`client conf ${cc.type} ${cc.nodeId} at n${leader.id} refused: ${err.message}`);
    }
  }

  /** A node that is not yet a member, created on demand (ids are never reused). */
  private spareNode(conf: ConfState): NodeId | undefined {
    const s = this.spare !== undefined ? this.nodes.get(this.spare) : undefined;
    if (s && !s.removed && !conf.voters.includes(s.id) && !conf.learners.includes(s.id)) return s.id;
    if (this.nextNodeId > this.lastNodeId) return undefined;
    const id = this.nextNodeId++;
    this.createNode(id);
    this.spare = id;
    return id;
  }

  /** The active leader with the highest term, if any. */
  private currentLeader(): SimNode | undefined {
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

  // ---- liveness --------------------------------------------------------------------------------

  private evaluateLiveness(): boolean {
    const leader = this.currentLeader();
    if (leader === undefined) {
      this.lastLivenessReason = `no leader elected; ${this.clusterSummary()}`;
      return false;
    }
    const leaderTerm = this.core(leader, 'status', (raw) => raw.status().term) ?? 0;
    const b = this.barrier && this.proposals.get(this.barrier.id);
    const committed = (p: Proposal | undefined): boolean =>
      p?.loc !== undefined && this.checker.committedTermAt(p.loc.index) === p.loc.term;
    if (!b || (!committed(b) && (this.isDoomed(b) || this.barrier?.leaderTerm !== leaderTerm))) {
      const op: KvOp = { id: this.nextOpId++, op: 'barrier' };
      if (this.propose(leader, op)) this.barrier = { id: op.id, leaderTerm };
      this.lastLivenessReason = `barrier not yet committed; leader n${leader.id} term ${leaderTerm}; ${this.clusterSummary()}`;
      return false;
    }
    if (!committed(b)) {
      this.lastLivenessReason = `barrier #${b.op.id} at ${b.loc ? `${b.loc.index}/${b.loc.term}` : '?'} not committed (known commit ${this.checker.knownCommit}); ${this.clusterSummary()}`;
      return false;
    }
    const undecided = [...this.proposals.values()].filter((p) => !this.isDecided(p));
    if (undecided.length > 0) {
      const p = undecided[0] as Proposal;
      this.lastLivenessReason = `${undecided.length} proposal(s) undecided, e.g. #${p.op.id} at ${
        p.loc ? `${p.loc.index}/${p.loc.term}` : 'no index (never appended)'
      }; known commit ${this.checker.knownCommit}`;
      return false;
    }
    const barrierIndex = (b.loc as { index: number }).index;
    const members = [...leader.conf.voters, ...leader.conf.learners];
    const behind = members.filter((m) => {
      const n = this.nodes.get(m);
      return n === undefined || !n.active || n.app.applied < barrierIndex;
    });
    if (behind.length > 0) {
      const progress = this.core(leader, 'status', (raw) => raw.status().progress) ?? {};
      const views = behind.map((m) => {
        const pr = progress[m];
        return pr
          ? `n${m}:${pr.state}/match${pr.match}/next${pr.next}${pr.recentActive ? '' : '/inactive'}`
          : `n${m}:?`;
      });
      this.lastLivenessReason = `members [${behind}] have not applied the barrier at ${barrierIndex} (leader's progress ${views.join(
        ' ',
      )}); ${this.clusterSummary()}`;
      return false;
    }
    this.log(
      `LIVE: leader n${leader.id} term ${leaderTerm}, barrier applied at ${barrierIndex} on [${members}]`,
    );
    return true;
  }

  /** Decided: committed, or provably never committable (a later term committed at or before its index). */
  private isDecided(p: Proposal): boolean {
    if (p.loc === undefined) return false;
    return this.checker.knownCommit >= p.loc.index || this.isDoomed(p);
  }

  private isDoomed(p: Proposal): boolean {
    if (p.loc === undefined) return false;
    const c = this.checker.knownCommit;
    if (c >= p.loc.index) return this.checker.committedTermAt(p.loc.index) !== p.loc.term;
    const t = this.checker.committedTermAt(c);
    return t !== undefined && t > p.loc.term;
  }

  private clusterSummary(): string {
    const parts: string[] = [];
    for (const n of this.nodes.values()) {
      if (n.state === 'retired') continue;
      if (!n.alive) {
        parts.push(`n${n.id}:down`);
        continue;
      }
      const st = this.core(n, 'status', (raw) => raw.status());
      if (st)
        parts.push(`n${n.id}:${st.role}/t${st.term}/c${st.commit}/a${n.app.applied}/last${st.lastIndex}`);
    }
    return parts.join(' ');
  }

  // ---- leases ----------------------------------------------------------------------------------

  private checkLeases(): void {
    const holders: Array<{ node: NodeId; term: number }> = [];
    for (const n of this.nodes.values()) {
      if (!n.active || n.role !== 'leader') continue;
      const st = this.core(n, 'status', (raw) => raw.status());
      if (st?.leaseValid) holders.push({ node: n.id, term: st.term });
    }
    if (holders.length > 1) this.checker.observeLeases(holders);
  }

  // ---- helpers ---------------------------------------------------------------------------------

  private node(id: NodeId): SimNode {
    const n = this.nodes.get(id);
    if (n === undefined) throw new Error(`sim: no node ${id}`);
    return n;
  }

  /** How long a fault lasts: uniform in [lo, hi] µs, scaled by the profile. */
  private outage(lo: number, hi: number): number {
    const s = this.profile.outageScale;
    return this.faultRng.range(Math.max(1, Math.round(lo * s)), Math.max(1, Math.round(hi * s)));
  }

  private hasFaults(): boolean {
    return Object.values(this.profile.weights).some((w) => w > 0);
  }

  private maxTickPeriod(): number {
    return Math.ceil(this.settings.baseTickUs * (1 + this.clockDrift));
  }

  /**
   * Calls into a node's core. A documented rejection (ProposalDroppedError) is passed to the
   * caller; anything else the core throws is a panic, reported as a 'core-error' violation.
   */
  private core<T>(node: SimNode, what: string, fn: (raw: NonNullable<SimNode['raw']>) => T): T | undefined {
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
  private storageOp<T>(node: SimNode, what: string, fn: () => T): T | undefined {
    try {
      return fn();
    } catch (err) {
      this.checker.coreError(node.id, what, err);
      return undefined;
    }
  }

  private log(text: string): void {
    this.trace.add(this.now, text);
  }
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

function makeTopology(kind: topo.TopologyKind, ids: NodeId[], leader: NodeId, rng: Prng): topo.Topology {
  const victim = rng.chance(0.5) ? leader : rng.pick(ids);
  switch (kind) {
    case 'split':
      return topo.split(ids, rng);
    case 'isolate':
      return topo.isolate(ids, victim);
    case 'isolateLeader':
      return { ...topo.isolate(ids, leader), kind: 'isolateLeader' };
    case 'mute':
      return topo.mute(ids, victim);
    case 'deaf':
      return topo.deaf(ids, victim);
    case 'bridge':
      return topo.bridge(ids, rng);
    case 'leaderBridge':
      return topo.leaderBridge(ids, leader, rng);
    case 'leaderQuorumOneWay':
      return topo.leaderQuorumOneWay(ids, leader, rng);
    case 'randomOneWay':
      return topo.randomOneWay(ids, rng, rng.range(1, 5) / 10);
  }
}

/** The core's documented refusals: a request that cannot be served now, or never. Not bugs. */
function isRejection(err: unknown): err is ProposalDroppedError | InvalidConfChangeError {
  return err instanceof ProposalDroppedError || err instanceof InvalidConfChangeError;
}

function copyConf(c: ConfState): ConfState {
  return { voters: c.voters.slice(), learners: c.learners.slice() };
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
