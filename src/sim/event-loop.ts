// The event loop of one run. One seed drives everything: the cluster's configuration, every node's
// clock rate and election timer, the network's latencies and losses, the fault schedule and the
// client workload. Time is virtual (integer microseconds) and the whole cluster runs on one thread,
// one event at a time, so a seed replays exactly.
//
// A run has two phases:
//  1. chaos: `steps` events with the profile's faults injected; safety is checked after every step;
//  2. heal: every fault is lifted (all nodes up, full connectivity, no loss) and the cluster must,
//     within a bounded virtual time, elect a leader, commit a barrier entry, decide every pending
//     proposal and bring every member's state machine up to the barrier (liveness).
//
// Each event is dispatched to the part that owns it (transport, processes, faults, workload,
// liveness); then every node's Readies are handled (ready-handling.ts) and leases are checked.

import type { NodeId } from '../raft/types.js';
import { InvariantViolation } from './checker.js';
import { FaultDirector } from './faults.js';
import { LivenessCheck } from './liveness.js';
import { describeRun, replayCommand, resolveOptions, type SimOptions } from './options.js';
import { Processes } from './processes.js';
import { ReadyHandling } from './ready-handling.js';
import type { LivenessOutcome, SafetyFailure, SimResult } from './results.js';
import { Transport } from './transport.js';
import { Workload } from './workload.js';
import { type SimEvent, SimWorld } from './world.js';

export function runSimulation(options: SimOptions): SimResult {
  return new Simulation(options).run();
}

class Simulation {
  private readonly w: SimWorld;
  private readonly transport: Transport;
  private readonly processes: Processes;
  private readonly ready: ReadyHandling;
  private readonly faults: FaultDirector;
  private readonly workload: Workload;
  private readonly liveness: LivenessCheck;

  constructor(private readonly options: SimOptions) {
    this.w = new SimWorld(options, resolveOptions(options));
    this.transport = new Transport(this.w);
    this.processes = new Processes(this.w, this.transport);
    this.ready = new ReadyHandling(this.w, this.transport, this.processes);
    this.faults = new FaultDirector(this.w, this.processes);
    this.workload = new Workload(this.w, this.processes);
    this.liveness = new LivenessCheck(this.w, this.workload);
  }

  run(): SimResult {
    const w = this.w;
    const o = w.o;
    let safety: SafetyFailure | undefined;
    w.log(describeRun(o, w.settings));
    try {
      for (const id of w.bootstrapConf.voters) this.processes.createNode(id);
      w.queue.push(w.clientRng.range(1_000, 5_000), { k: 'client' });
      if (this.faults.hasFaults()) w.queue.push(w.faultRng.range(...o.profile.gapUs), { k: 'fault' });
      this.ready.drainReadies();

      while (w.events < o.steps && this.step()) {
        // chaos phase
      }
      this.liveness.healedAt = w.now;
      this.faults.heal();
      this.ready.drainReadies();
      const budget = o.livenessTimeouts * w.settings.electionTicks * w.maxTickPeriod();
      const deadline = w.now + budget;
      while (!this.liveness.live && (w.queue.peekTime() ?? Number.POSITIVE_INFINITY) <= deadline) this.step();
      if (!this.liveness.live) w.now = Math.max(w.now, deadline);
    } catch (err) {
      if (!(err instanceof InvariantViolation)) throw err;
      safety = {
        invariant: err.invariant,
        message: err.message,
        ...err.context,
        atUs: w.now,
        event: w.events,
      };
      w.log(`SAFETY VIOLATION ${err.message}`);
    }

    w.stats.leaderTerms = w.leaderTerms.size;
    w.stats.committed = w.checker.knownCommit;
    const live = this.liveness.live;
    let liveness: LivenessOutcome;
    if (safety) liveness = { ok: true, reason: 'not evaluated (safety violation)' };
    else if (live) liveness = { ok: true, recoveredAfterUs: w.now - this.liveness.healedAt };
    else liveness = { ok: false, reason: this.liveness.lastReason };
    if (!safety && !live) w.log(`LIVENESS FAILURE ${this.liveness.lastReason}`);

    const options = this.options;
    const result: SimResult = {
      seed: options.seed,
      nodes: o.nodes,
      steps: o.steps,
      faults: o.profile.name,
      liveness,
      virtualUs: w.now,
      events: w.events,
      traceHash: w.trace.hash(),
      traceTail: w.trace.tail(),
      stats: w.stats,
      replay: replayCommand({
        seed: options.seed,
        nodes: o.nodes,
        steps: o.steps,
        faults: o.profile.name,
        bug: o.bug,
        workarounds: [...o.workarounds],
        clockDrift: options.clockDrift,
        clockRates: options.clockRates,
        electionTicks: options.electionTicks,
        leaseMarginTicks: options.leaseMarginTicks,
        confChanges: options.confChanges,
        preVote: options.preVote,
        checkQuorum: options.checkQuorum,
      }),
    };
    if (o.bug) result.bug = o.bug;
    if (safety) result.safety = safety;
    return result;
  }

  /** Runs one event and everything it triggers. False when nothing is left to do. */
  private step(): boolean {
    const w = this.w;
    const next = w.queue.pop();
    if (next === undefined) return false;
    w.now = next.at;
    w.events++;
    this.dispatch(next.event);
    this.ready.drainReadies();
    if (w.settings.leaderLease) this.checkLeases();
    return true;
  }

  private dispatch(ev: SimEvent): void {
    const w = this.w;
    switch (ev.k) {
      case 'tick': {
        const node = w.node(ev.node);
        if (node.state === 'retired') return;
        if (node.active) w.core(node, 'tick', (raw) => raw.tick());
        w.queue.push(w.now + node.tickPeriodUs, ev);
        return;
      }
      case 'deliver':
        this.transport.deliver(ev.msg, ev.fromInbox, ev.senderLife);
        return;
      case 'client':
        if (w.phase === 'heal') this.liveness.step();
        else this.workload.step();
        return;
      case 'fault':
        this.faults.step();
        return;
      case 'restart': {
        const node = w.node(ev.node);
        if (w.phase === 'chaos' && node.state === 'down' && node.incarnation === ev.life)
          this.processes.restart(node);
        return;
      }
      case 'resume': {
        const node = w.node(ev.node);
        if (node.paused && node.incarnation === ev.life && node.pauseToken === ev.pause)
          this.processes.resume(node);
        return;
      }
      case 'healNet':
        this.faults.healPartition(ev.epoch);
        return;
      case 'calmNet':
        this.faults.calmNetwork(ev.gen);
        return;
      case 'retire':
        this.processes.retire(w.node(ev.node));
        return;
      case 'report': {
        const node = w.node(ev.node);
        if (!node.alive || node.incarnation !== ev.life) return;
        // A paused process's transport is paused too: it reports once the process runs again.
        if (node.paused) {
          w.queue.push(w.now + 1_000, ev);
          return;
        }
        w.log(`n${node.id} transport reports ${ev.what} for n${ev.to}`);
        if (ev.what === 'unreachable') {
          w.core(node, 'reportUnreachable', (raw) => raw.reportUnreachable(ev.to));
        } else {
          w.core(node, 'reportSnapshot', (raw) => raw.reportSnapshot(ev.to, ev.what === 'snapOk'));
        }
        return;
      }
    }
  }

  /** Lease safety, checked after every event when leases are on: no two valid lease holders. */
  private checkLeases(): void {
    const w = this.w;
    const holders: Array<{ node: NodeId; term: number }> = [];
    for (const n of w.nodes.values()) {
      if (!n.active || n.role !== 'leader') continue;
      const st = w.core(n, 'status', (raw) => raw.status());
      if (st?.leaseValid) holders.push({ node: n.id, term: st.term });
    }
    if (holders.length > 1) w.checker.observeLeases(holders);
  }
}
