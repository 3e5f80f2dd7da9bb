// The fault director: at random gaps it picks one of the faults the seed's configuration allows
// (weighted), applies it, and schedules its end. Everything it draws comes from its own PRNG
// stream, so adding a fault kind does not reshuffle the workload.

import { NotLeaderError, UnsafeRemovalError } from '../../node/errors.js';
import type { FloeNode } from '../../node/node.js';
import type { NodeId } from '../../raft/types.js';
import type { Prng } from '../prng.js';
import {
  bridge,
  deaf,
  isolate,
  leaderBridge,
  leaderQuorumOneWay,
  mute,
  randomOneWay,
  split,
} from '../topology.js';
import type { FaultKind, SimConfig } from './config.js';
import type { HttpRouter } from './http-router.js';
import type { KvClient } from './kv-workload.js';
import type { LeaseClientHost } from './lease-workload.js';
import type { NetConditions, VirtualNetwork } from './network.js';
import type { NodeHost } from './node-host.js';
import { PEER_MIN_RTO_MS } from './peer-net.js';
import type { Machine, SimProcess } from './process.js';
import type { RespLeaseClient } from './resp-lease-workload.js';
import type { SeqClient } from './seq-workload.js';
import type { World } from './world.js';

/** The share of membership steps that retire the leader's machine (`decommissionLeader`, finding FS-22's recipe). */
export const DECOMMISSION_SHARE = 1 / 3;

/**
 * FS-23: what becomes of a machine once its removal call returns (both the removal of a voter and the retirement of the
 * leader's machine), drawn from a stream of its own (`faults-removed`): left on, or switched off and started again
 * later from its data directory (an operator's mistake), in these shares; otherwise switched off for good, as before.
 * Either way a running removed member must stop by itself (the `removed-lingers` oracle, run.ts).
 */
export const REMOVED_LEFT_ON_SHARE = 1 / 4;
export const REMOVED_RESTARTED_SHARE = 1 / 4;

export interface ClusterView {
  world: World;
  cfg: SimConfig;
  hosts: NodeHost[];
  leaseClients: LeaseClientHost[];
  kvClients: KvClient[];
  seqClients: SeqClient[];
  /** RESP lease clients (resp-lease-workload.ts), in seeds that have them. */
  respLeaseClients?: RespLeaseClient[];
  net: VirtualNetwork;
  router: HttpRouter;
  /** Starts a new machine that joins the cluster (its member must then be added). */
  addNode(): NodeHost;
}

export interface FaultStats {
  injected: Partial<Record<FaultKind, number>>;
  skipped: number;
  /** New members promoted to voter before they acknowledged any entry (finding FS-3). */
  promotedEmpty: number;
  /** Bits flipped in writes to a node's WAL or snapshot files (`writeBitFlip`). */
  writeFlips: number;
  /** Starts refused because of such a flip (each explained by a flip in the very file and frame it names). */
  writeFlipRefusals: number;
  /**
   * Removals the leader refused (UnsafeRemovalError, the strict reconfiguration check): too few of the voters that
   * would remain were answering. A normal outcome, as for an operator: the step is tried again later.
   */
  unsafeRemovalsRefused: number;
}

export class FaultDirector {
  readonly stats: FaultStats = {
    injected: {},
    skipped: 0,
    promotedEmpty: 0,
    writeFlips: 0,
    writeFlipRefusals: 0,
    unsafeRemovalsRefused: 0,
  };
  /** Ends the write-flip window in force (at most one disk at a time). */
  private writeFlipEpoch = 0;
  private readonly rng: Prng;
  /** Faults on sequence clients (their own stream: seeds without them draw nothing from it). */
  private readonly seqRng: Prng;
  /** Draws of the leader-lease seeds' own fault (`suspendCutOff`). */
  private readonly leaseRng: Prng;
  /** Faults on RESP lease clients (their own stream: seeds without them draw nothing from it). */
  private readonly respLeaseRng: Prng;
  /** The `coarse` profile's own faults (their own stream: no other profile draws from it). */
  private readonly lateRng: Prng;
  private healed = false;
  private partitionEpoch = 0;
  private noiseEpoch = 0;
  private mixupEpoch = 0;
  private foreignEpoch = 0;
  private readonly weights: Partial<Record<FaultKind, number>>;
  /** One membership change at a time, and one leadership transfer. */
  private changing = false;
  private transferring = false;
  /** A crash loop (`nodeRestartLoop`) is running: one at a time. */
  private looping = false;
  /** The crash loops' own stream: seeds of other profiles never draw from it. */
  private readonly restartRng: Prng;
  /** Draws of the rolling-enable seeds' own fault (`rollingRestart`). */
  private readonly rollingRng: Prng;
  /** Link stalls' own stream (`linkStall`): seeds without them never draw from it. */
  private readonly stallRng: Prng;
  /** Power loss mid-write's own stream (`nodePowerLossMidWrite`). */
  private readonly midWriteRng: Prng;
  /** Retiring the leader's machine (`decommissionLeader`, a share of the membership steps): its own stream. */
  private readonly decommissionRng: Prng;
  /** What becomes of a removed machine (`afterRemoval`): its own stream, so a machine switched off draws nothing else. */
  private readonly removedRng: Prng;
  /** Removed machines switched off and due to be started again by mistake (`afterRemoval`; the heal starts them). */
  private readonly removedRestarts = new Set<NodeHost>();
  private transferProc: SimProcess | undefined;
  private changeProc: SimProcess | undefined;
  /**
   * Client machines in a restart cut off from the cluster (`clientRestartCutOff`), and until when (global µs) their
   * wall clock must not step back: a step across the restart, between the old process's last cache write and the
   * replacement's resume, is outside the failure model (docs/client.md, "Clocks": the cached wall-clock deadline
   * assumes none), and the oracle does not exempt it.
   */
  private readonly noBackStepUntil = new Map<Machine, number>();

  constructor(private readonly c: ClusterView) {
    this.rng = c.world.rng('faults');
    this.seqRng = c.world.rng('faults-seq');
    this.leaseRng = c.world.rng('faults-lease');
    this.respLeaseRng = c.world.rng('faults-resp-lease');
    this.restartRng = c.world.rng('faults-restarts');
    this.rollingRng = c.world.rng('faults-rolling');
    this.stallRng = c.world.rng('faults-stall');
    this.midWriteRng = c.world.rng('faults-midwrite');
    this.decommissionRng = c.world.rng('faults-decommission');
    this.removedRng = c.world.rng('faults-removed');
    this.lateRng = c.world.rng('faults-late5');
    this.weights = { ...c.cfg.weights };
    // The seed's deployments wait this long for the cluster before they resume from the cache (set before any
    // client process starts).
    for (const h of c.leaseClients) h.acquireTimeoutMs ??= c.cfg.lease.acquireTimeoutMs;
  }

  start(): void {
    if (Object.keys(this.weights).length === 0) return;
    this.next();
  }

  private trace(line: string): void {
    this.c.world.trace(`fault: ${line}`);
  }

  private next(): void {
    if (this.healed) return;
    const [lo, hi] = this.c.cfg.faultGapMs;
    this.c.world.sched.after(this.rng.range(lo, hi) * 1000, undefined, 'fault', () => {
      if (this.healed) return;
      const kind = this.rng.weighted(this.weights as Record<FaultKind, number>);
      if (this.inject(kind)) this.stats.injected[kind] = (this.stats.injected[kind] ?? 0) + 1;
      else this.stats.skipped++;
      this.next();
    });
  }

  private outage(): number {
    const [lo, hi] = this.c.cfg.outageMs;
    return this.rng.range(lo, hi) * 1000;
  }

  /** After `us`, run `fn` unless the run has healed meanwhile (healing undoes everything at once). */
  private later(us: number, label: string, fn: () => void): void {
    this.c.world.sched.after(us, undefined, label, () => {
      if (!this.healed) fn();
    });
  }

  /** Nodes that are members (not removed). */
  private members(): NodeHost[] {
    return this.c.hosts.filter((h) => !h.removed);
  }

  private impairedNodes(): number {
    return this.members().filter((h) => !h.up || h.proc?.paused || h.machine.clock.suspended).length;
  }

  private healthyNodes(): NodeHost[] {
    return this.members().filter((h) => h.up && !h.proc?.paused && !h.machine.clock.suspended);
  }

  private whole(): boolean {
    const st = this.leader()?.node?.status();
    if (!st || st.lastIndex !== st.commit || st.conf.learners.length > 0) return false;
    const ids = this.members()
      .map((h) => h.id)
      .sort((a, b) => a - b);
    const voters = [...st.conf.voters].sort((a, b) => a - b);
    if (voters.length !== this.c.cfg.nodes || voters.join(',') !== ids.join(',')) return false;
    // Every voter holds the whole log (a voter promoted before it caught up holds nothing: FS-3).
    return voters.every((v) => v === st.id || st.progress?.[v]?.match === st.lastIndex);
  }

  private canImpair(): boolean {
    return this.impairedNodes() < this.c.cfg.maxImpairedNodes;
  }

  private leader(): NodeHost | undefined {
    return this.members().find((h) => h.up && h.node?.isLeader);
  }

  private inject(kind: FaultKind): boolean {
    const c = this.c;
    const rng = this.rng;
    switch (kind) {
      case 'partition': {
        const ids = this.members().map((h) => h.id);
        const lead = this.leader()?.id ?? rng.pick(ids);
        const victim = rng.pick(ids);
        const shape = rng.int(8);
        const t =
          shape === 0
            ? split(ids, rng)
            : shape === 1
              ? isolate(ids, victim)
              : shape === 2
                ? mute(ids, victim)
                : shape === 3
                  ? deaf(ids, victim)
                  : shape === 4
                    ? bridge(ids, rng)
                    : shape === 5
                      ? leaderBridge(ids, lead, rng)
                      : shape === 6
                        ? leaderQuorumOneWay(ids, lead, rng)
                        : randomOneWay(ids, rng, 0.3);
        c.net.setBlocked(t.links);
        const epoch = ++this.partitionEpoch;
        this.trace(`partition ${t.describe}`);
        this.later(this.outage(), 'heal-partition', () => {
          if (epoch !== this.partitionEpoch) return;
          c.net.setBlocked([]);
          this.trace('partition healed');
        });
        return true;
      }
      case 'clientPartition': {
        const names = [...c.leaseClients.map((h) => h.name), ...c.kvClients.map((k) => k.name)];
        // Sequence clients' links too (HTTP and RESP), a third of the cuts in seeds with them, from their own stream.
        let client: string;
        const rl = c.respLeaseClients ?? [];
        if (c.seqClients.length > 0 && this.seqRng.chance(1 / 3))
          client = this.seqRng.pick(c.seqClients).name;
        // RESP lease clients' links too (their RESP connections reset), a third of the other cuts in seeds with them.
        else if (rl.length > 0 && this.respLeaseRng.chance(1 / 3)) client = this.respLeaseRng.pick(rl).name;
        else if (names.length === 0) return false;
        else client = rng.pick(names);
        const node = rng.pick(this.members()).id;
        const dirs = rng.pick(['both', 'to', 'from'] as const);
        const links = [
          ...(dirs !== 'from' ? [`${client}->${node}`] : []),
          ...(dirs !== 'to' ? [`${node}->${client}`] : []),
        ];
        for (const l of links) c.router.blocked.add(l);
        this.trace(`client link cut: ${links.join(' ')}`);
        this.later(this.outage(), 'heal-client-link', () => {
          for (const l of links) c.router.blocked.delete(l);
          this.trace(`client link healed: ${links.join(' ')}`);
        });
        return true;
      }
      case 'netNoise': {
        const base = c.cfg.net;
        const hard = rng.float();
        const noisy: NetConditions = {
          delayUs: [base.delayUs[0], base.delayUs[1] + Math.floor(hard * 20_000)],
          drop: Math.min(0.5, base.drop + hard * 0.3),
          duplicate: Math.min(0.5, base.duplicate + hard * 0.2),
          reorder: Math.min(1, base.reorder + hard * 0.5),
          corrupt: Math.min(0.2, base.corrupt + hard * 0.05),
          spike: Math.min(0.5, base.spike + hard * 0.1),
          spikeUs: [5_000, 5_000 + Math.floor(hard * 500_000)],
          corruptPastTcp: 1 / 8,
        };
        c.net.conditions = noisy;
        const epoch = ++this.noiseEpoch;
        this.trace(
          `network noise drop=${noisy.drop.toFixed(3)} dup=${noisy.duplicate.toFixed(3)} corrupt=${noisy.corrupt.toFixed(3)}`,
        );
        this.later(this.outage(), 'quiet-network', () => {
          if (epoch !== this.noiseEpoch) return;
          c.net.conditions = { ...base };
          this.trace('network back to normal');
        });
        return true;
      }
      case 'replyMixup': {
        if (c.leaseClients.length < 2) return false;
        c.router.mixup = 0.02 + 0.3 * rng.float();
        const epoch = ++this.mixupEpoch;
        this.trace(`replies mixed up between SDK clients (p=${c.router.mixup.toFixed(3)})`);
        this.later(this.outage(), 'replies-sorted', () => {
          if (epoch !== this.mixupEpoch) return;
          c.router.mixup = 0;
          this.trace('replies reach their own requests again');
        });
        return true;
      }
      case 'foreignCluster': {
        if (c.leaseClients.length < 2) return false;
        c.router.foreign = 0.05 + 0.3 * rng.float();
        const epoch = ++this.foreignEpoch;
        this.trace(`acquire answers from another cluster (p=${c.router.foreign.toFixed(3)})`);
        this.later(this.outage(), 'foreign-cluster-gone', () => {
          if (epoch !== this.foreignEpoch) return;
          c.router.foreign = 0;
          this.trace('no more answers from another cluster');
        });
        return true;
      }
      case 'nodeCrash':
      case 'nodePowerLoss': {
        if (!this.canImpair()) return false;
        // In a rolling enable of --leader-lease, half the crashes (a stream of their own) restart a follower without
        // the flag where it matters (decision 0009, stop 34). Other seeds draw nothing from that stream.
        if (
          kind === 'nodeCrash' &&
          c.cfg.leaseRolling &&
          this.rollingRng.chance(1 / 2) &&
          this.rollingRestart()
        )
          return true;
        const h = pickMaybe(rng, this.healthyNodes());
        if (!h) return false;
        if (kind === 'nodeCrash') h.crash('process');
        else h.crash('power', (n) => this.rng.int(n));
        this.later(this.outage(), 'restart-node', () => h.boot());
        return true;
      }
      case 'nodePause':
      case 'nodeSuspend': {
        if (!this.canImpair()) return false;
        const h = pickMaybe(rng, this.healthyNodes());
        if (!h?.proc) return false;
        const proc = h.proc;
        if (kind === 'nodePause') {
          this.trace(`${proc.name} paused`);
          proc.pause();
          this.later(this.outage(), 'resume-node', () => {
            this.trace(`${proc.name} resumed`);
            proc.resume();
          });
        } else {
          // With --leader-lease, half the node suspends (a stream of their own) take the leader's machine and cut
          // its peer links through the suspend and a little past it, while clients still reach it: a leader that wakes
          // believing its lease would answer strict INCRs beside its successor (decision 0009). Not drawn in other
          // seeds, which keep their runs.
          const lead = this.leader();
          if (
            c.cfg.leaderLease &&
            lead?.proc &&
            this.healthyNodes().includes(lead) &&
            this.leaseRng.chance(1 / 2)
          )
            this.suspendCutOff(lead);
          else this.suspend(h.machine);
        }
        return true;
      }
      case 'diskEio': {
        if (!this.canImpair()) return false;
        const h = pickMaybe(rng, this.healthyNodes());
        if (!h) return false;
        h.diskFaults.syncEio = 0.2 + 0.8 * rng.float();
        this.trace(`n${h.id} disk: fsync fails with EIO (p=${h.diskFaults.syncEio.toFixed(2)})`);
        this.later(this.outage(), 'disk-eio-end', () => {
          h.diskFaults.syncEio = 0;
        });
        return true;
      }
      case 'diskSlow': {
        const h = rng.pick(this.members());
        h.diskFaults.slow = rng.range(5, 50);
        this.trace(`n${h.id} disk slow ×${h.diskFaults.slow}`);
        this.later(this.outage(), 'disk-fast', () => {
          h.diskFaults.slow = 1;
        });
        return true;
      }
      case 'bitFlip': {
        // One replica at most: the failure model promises to survive corruption on a minority.
        // ...and only while the cluster is whole: a leader whose committed membership is exactly the
        // running members, at full size, with nothing uncommitted (a conf change whose outcome is
        // unknown may still land and shrink the majority the corruption must stay a minority of).
        if (this.changing && this.changeProc?.alive === false) this.changing = false;
        if (this.changing || !this.whole() || this.members().some((h) => h.diskFaulted)) return false;
        if (!this.canImpair()) return false;
        const h = pickMaybe(rng, this.healthyNodes());
        if (!h) return false;
        h.crash('process');
        c.world.sched.after(0, undefined, 'bit-flip', () => {
          void h
            .flipRandomBit((n) => this.rng.int(n))
            .then((where) => {
              this.trace(`n${h.id} bit flip at rest: ${where ?? 'no file'}`);
            });
        });
        this.later(this.outage(), 'restart-node', () => h.boot());
        return true;
      }
      case 'writeBitFlip': {
        // Corruption in written data, on one replica, starting only while the cluster is whole (as for a flip at
        // rest): no other member's disk was ever faulted, no window is open, no membership change in flight.
        if (this.changing && this.changeProc?.alive === false) this.changing = false;
        if (this.changing || !this.whole()) return false;
        if (this.members().some((h) => h.writeFlip !== undefined)) return false;
        if (!this.canImpair()) return false;
        // The node whose disk already took a fault, if there is one (it may take more); else any healthy one.
        const h = pickMaybe(
          rng,
          this.healthyNodes().filter((x) => this.members().every((o) => o === x || !o.diskFaulted)),
        );
        if (!h) return false;
        const chance = 0.02 + 0.3 * rng.float();
        // In half the windows the node's process is restarted when it ends (a reboot, an upgrade: when an operator
        // meets such corruption), so that what was flipped is read back; otherwise only a later crash reads it.
        const restart = rng.chance(0.5);
        // A few flips per window (each write flipped with `chance` until then), so that each one can matter.
        const flips = rng.range(1, 3);
        const epoch = ++this.writeFlipEpoch;
        const flipsBefore = this.stats.writeFlips;
        h.diskFaulted = true;
        h.writeFlip = {
          chance,
          // Not while a membership change is in flight: its outcome may shrink the majority the corrupted replica
          // must stay a minority of (the same rule as for a flip at rest).
          allowed: () =>
            !this.healed &&
            !h.removed &&
            !(this.changing && this.changeProc?.alive !== false) &&
            this.stats.writeFlips < flipsBefore + flips,
          stats: this.stats,
        };
        this.trace(
          `n${h.id} disk: bits flip in written data (p=${chance.toFixed(3)} per write, at most ${flips})`,
        );
        this.later(this.outage(), 'write-flips-end', () => {
          if (epoch !== this.writeFlipEpoch) return;
          h.writeFlip = undefined;
          this.trace(`n${h.id} disk: writes land intact again`);
          if (
            !restart ||
            !h.up ||
            h.removed ||
            h.proc?.paused ||
            h.machine.clock.suspended ||
            !this.canImpair()
          )
            return;
          h.crash('process');
          this.later(this.outage(), 'restart-node', () => h.boot());
        });
        return true;
      }
      case 'clockJump': {
        const machines: Machine[] = [
          ...c.hosts.map((h) => h.machine),
          ...c.leaseClients.map((h) => h.machine),
        ];
        const m = rng.pick(machines);
        const delta = (rng.chance(0.5) ? -1 : 1) * rng.range(1, 5_000);
        if (delta < 0 && (this.noBackStepUntil.get(m) ?? 0) > c.world.sched.nowUs) return false;
        m.jumpWall(delta);
        this.trace(`${m.name} wall clock steps ${delta} ms`);
        return true;
      }
      case 'clockRate': {
        const machines: Machine[] = [
          ...c.hosts.map((h) => h.machine),
          ...c.leaseClients.map((h) => h.machine),
        ];
        const m = rng.pick(machines);
        const rate = 1 + (2 * rng.float() - 1) * c.cfg.clockDrift;
        m.clock.setRate(rate);
        this.trace(`${m.name} clock rate ${rate.toFixed(4)}`);
        return true;
      }
      case 'clientCrash': {
        // Sequence clients crash too (a third of the crashes, in seeds that have them). Drawn from a stream of its
        // own, so seeds without sequence clients keep their runs.
        const seq = c.seqClients.filter((x) => x.crashable);
        if (seq.length > 0 && this.seqRng.chance(1 / 3)) {
          const s = this.seqRng.pick(seq);
          s.crash();
          this.later(
            this.seqRng.range(c.cfg.outageMs[0], c.cfg.outageMs[1]) * 1000,
            'restart-seq-client',
            () => s.restart(),
          );
          return true;
        }
        // RESP lease clients too (a third of the other crashes, in seeds with them; their own stream).
        const rl = (c.respLeaseClients ?? []).filter((x) => x.crashable);
        if (rl.length > 0 && this.respLeaseRng.chance(1 / 3)) {
          const r = this.respLeaseRng.pick(rl);
          r.crash();
          this.later(
            this.respLeaseRng.range(c.cfg.outageMs[0], c.cfg.outageMs[1]) * 1000,
            'restart-resp-lease-client',
            () => r.restart(),
          );
          return true;
        }
        const h = pickMaybe(
          rng,
          c.leaseClients.filter((x) => x.live.length > 0 && this.mayRestart(x)),
        );
        if (!h) return false;
        const p = rng.pick(h.live);
        h.crash(p);
        this.later(this.outage(), 'restart-client', () => {
          if (h.live.length === 0) h.spawn();
        });
        return true;
      }
      case 'clientReplace': {
        const h = pickMaybe(
          rng,
          c.leaseClients.filter((x) => x.live.length === 1 && this.mayRestart(x)),
        );
        if (!h) return false;
        const old = h.live[0] as SimProcess;
        h.spawn();
        this.trace(`replacement started on ${h.name} while ${old.name} runs`);
        this.later(this.outage(), 'old-client-exits', () => h.crash(old));
        return true;
      }
      case 'clientPause': {
        // RESP lease clients pause too (a GC pause across their deadline), half the pauses in seeds with them.
        const rl = (c.respLeaseClients ?? []).filter((x) => x.proc.alive && !x.proc.paused);
        if (rl.length > 0 && this.respLeaseRng.chance(1 / 2)) {
          const p = this.respLeaseRng.pick(rl).proc;
          this.trace(`${p.name} paused`);
          p.pause();
          this.later(
            this.respLeaseRng.range(c.cfg.outageMs[0], c.cfg.outageMs[1]) * 1000,
            'resume-client',
            () => {
              this.trace(`${p.name} resumed`);
              p.resume();
            },
          );
          return true;
        }
        const h = pickMaybe(
          rng,
          c.leaseClients.filter((x) => x.live.length > 0),
        );
        if (!h) return false;
        const p = rng.pick(h.live);
        this.trace(`${p.name} paused`);
        p.pause();
        this.later(this.outage(), 'resume-client', () => {
          this.trace(`${p.name} resumed`);
          p.resume();
        });
        return true;
      }
      case 'clientPowerLoss': {
        const h = pickMaybe(
          rng,
          c.leaseClients.filter((x) => x.live.length > 0 && this.mayRestart(x)),
        );
        if (!h) return false;
        h.powerLoss();
        this.later(this.outage(), 'client-boots', () => {
          if (h.live.length === 0) h.spawn();
        });
        return true;
      }
      case 'clientRestartCutOff':
        return this.restartCutOff();
      case 'clientCutOff':
        return this.cutOff(false);
      case 'clientPowerLossCutOff':
        return this.cutOff(true);
      case 'clientSuspend': {
        // RESP lease clients' machines too (the monotonic clock stops, the wall clock runs on), half the suspends.
        const rl = c.respLeaseClients ?? [];
        if (rl.length > 0 && this.respLeaseRng.chance(1 / 2)) {
          this.suspend(this.respLeaseRng.pick(rl).machine);
          return true;
        }
        const h = pickMaybe(rng, c.leaseClients);
        if (!h) return false;
        this.suspend(h.machine);
        return true;
      }
      case 'leaderTransfer': {
        const lead = this.leader();
        const node = lead?.node;
        // A transfer run by a process that died since never settles: it no longer counts.
        if (this.transferring && this.transferProc?.alive === false) this.transferring = false;
        if (!lead?.proc || !node || this.transferring) return false;
        const voters = node.status().conf.voters.filter((v: NodeId) => v !== lead.id);
        if (voters.length === 0) return false;
        const to = rng.pick(voters);
        this.trace(`n${lead.id} transfers leadership to n${to}`);
        this.transferring = true;
        this.transferProc = lead.proc;
        c.world.sched.after(0, lead.proc, 'transfer-leadership', () => {
          node
            .transferLeadership(to, 2_000)
            .catch((err: unknown) => {
              this.trace(`transfer to n${to}: ${String(err).slice(0, 120)}`);
            })
            .finally(() => {
              this.transferring = false;
            });
        });
        return true;
      }
      case 'membership':
        return this.membershipStep();
      case 'nodeRestartLoop':
        return this.restartLoop();
      case 'linkStall':
        return this.linkStall();
      case 'nodePowerLossMidWrite':
        return this.powerLossMidWrite();
    }
  }

  /**
   * A node machine loses power while an fdatasync of its WAL is in flight: at the start of the next one within an
   * outage, the power goes at a drawn moment of it (the write it covers torn at any byte, as `nodePowerLoss` tears
   * the first unsynced write); restarted after an outage. Draws come from `faults-midwrite`.
   */
  private powerLossMidWrite(): boolean {
    if (!this.canImpair() || this.c.hosts.some((h) => h.onWalSync)) return false;
    const r = this.midWriteRng;
    const h = pickMaybe(r, this.healthyNodes());
    if (!h) return false;
    const proc = h.proc;
    const sched = this.c.world.sched;
    this.trace(`n${h.id} power loss at its next WAL fdatasync`);
    const hook = (us: number) => {
      h.onWalSync = undefined;
      sched.after(r.int(Math.max(1, us)), undefined, 'power-loss-mid-write', () => {
        if (this.healed || h.proc !== proc || !h.up || !this.canImpair()) return;
        this.trace(`n${h.id} loses power mid-write`);
        h.crash('power', (n) => r.int(n));
        this.later(this.outage(), 'restart-node', () => h.boot());
      });
    };
    h.onWalSync = hook;
    this.later(
      r.range(this.c.cfg.outageMs[0], this.c.cfg.outageMs[1]) * 1000,
      'power-loss-mid-write-off',
      () => {
        if (h.onWalSync === hook) h.onWalSync = undefined;
      },
    );
    return true;
  }

  /**
   * Some directed links between nodes stall for 0.2-3 s, then deliver everything they held, in order: one link out of
   * or into a node, or every link out of or into it; the node is the leader in half the stalls. A congested switch
   * port, a receiver that stops reading its socket, a middlebox that buffers. Draws come from `faults-stall`.
   */
  private linkStall(): boolean {
    const c = this.c;
    const r = this.stallRng;
    const ids = this.members().map((h) => h.id);
    if (ids.length < 2) return false;
    const lead = this.leader()?.id;
    const node = lead !== undefined && r.chance(1 / 2) ? lead : r.pick(ids);
    const others = ids.filter((i) => i !== node);
    const shape = r.int(4);
    const peers = shape < 2 ? [r.pick(others)] : others;
    const links: [NodeId, NodeId][] = peers.map((p) => (shape % 2 === 0 ? [node, p] : [p, node]));
    const ms = r.range(200, 3_000);
    c.net.stall(links, c.world.sched.nowUs + ms * 1000);
    const names = links.map(([a, b]) => `${a}->${b}`).join(' ');
    this.trace(`links stall for ${ms} ms: ${names}`);
    this.later(ms * 1000, 'stall-over', () => this.trace(`links deliver what they held: ${names}`));
    return true;
  }

  /**
   * A crash loop (`nodeRestartLoop`, the `restarts` profile): a node process (usually the leader's) dies, its supervisor
   * starts it again after a short delay, and it dies again shortly after it starts serving — drawn from the moment it
   * leads again (the leader's load, or a request path only the leader runs, is what kills it), or from its start if it
   * does not lead within a few election timeouts — for 1–4 rounds; then it stays up. Each kill is a process crash (the
   * page cache survives: an OOM kill, a panic), or a power loss in one round in four (a watchdog reboot). Draws come
   * from a stream of its own (`faults-restarts`).
   */
  private restartLoop(): boolean {
    const c = this.c;
    if (this.looping || !this.canImpair()) return false;
    const r = this.restartRng;
    const lead = this.leader();
    const h = lead && r.chance(3 / 4) ? lead : pickMaybe(r, this.healthyNodes());
    if (!h?.proc) return false;
    this.looping = true;
    const sched = c.world.sched;
    const rounds = r.range(1, 4);
    const electionMs = c.cfg.node.tickMs * c.cfg.node.electionTicks;
    // In half the loops the other members' disks are slow meanwhile (fsync × 5..50): commits stall, so the leader's
    // in-flight entries pile up — what OOM-kills a leader, and what leaves its last entries uncommitted when it dies.
    const peers = this.members().filter((x) => x !== h);
    const slow = r.chance(1 / 2) ? r.range(5, 50) : 1;
    for (const p of peers) if (slow > 1) p.diskFaults.slow = slow;
    this.trace(`n${h.id} crash loop: ${rounds} round(s)${slow > 1 ? `, peers' disks slow ×${slow}` : ''}`);
    // The slow disks outlast the loop a while (the last restart's new term commits through them too).
    const over = () => {
      this.looping = false;
      this.later(r.range(c.cfg.outageMs[0], c.cfg.outageMs[1]) * 1000, 'crash-loop-disks-fast', () => {
        for (const p of peers) if (p.diskFaults.slow === slow) p.diskFaults.slow = 1;
      });
    };
    const kill = (round: number) => {
      if (this.healed || h.removed || !h.up) {
        over();
        return;
      }
      h.onLeads = undefined;
      if (r.chance(1 / 4)) h.crash('power', (n) => r.int(n));
      else h.crash('process');
      const restartUs = r.range(5, 300) * 1000;
      this.later(restartUs, 'crash-loop-restart', () => {
        if (h.state === 'down') h.boot();
        const proc = h.proc;
        if (round >= rounds || !proc) {
          over();
          this.trace(`n${h.id} crash loop over`);
          return;
        }
        // Dies again soon after it leads: within a few ms (its first proposals still in flight) or later.
        const soon = () => (r.chance(1 / 2) ? r.range(0, 20_000) : r.range(0, 500_000));
        let armed = false;
        const arm = (why: string, us: number) => {
          if (armed) return;
          armed = true;
          h.onLeads = undefined;
          this.later(us, 'crash-loop-kill', () => {
            if (h.proc !== proc) {
              over();
              return;
            }
            this.trace(`n${h.id} crash loop: dies again (${why})`);
            kill(round + 1);
          });
        };
        h.onLeads = () => arm('after it leads', soon());
        this.later(r.range(2 * electionMs, 4 * electionMs) * 1000, 'crash-loop-no-lead', () => {
          if (h.proc === proc) arm('without leading', soon());
        });
      });
    };
    sched.after(0, undefined, 'crash-loop', () => kill(1));
    return true;
  }

  /**
   * One step towards, or away from, the configured cluster size, through the production API of
   * the leader: promote a learner left behind, add a new machine, or remove a voter.
   */
  private membershipStep(): boolean {
    const c = this.c;
    const lead = this.leader();
    const node = lead?.node;
    // A change run by a process that died since never settles: it no longer counts.
    if (this.changing && this.changeProc?.alive === false) this.changing = false;
    if (this.changing || !lead?.proc || !node) return false;
    const conf = node.status().conf;
    const sched = c.world.sched;
    this.changing = true;
    this.changeProc = lead.proc;
    const done = (what: string) => (err?: unknown) => {
      this.changing = false;
      this.trace(`${what}: ${err === undefined ? 'done' : String(err).slice(0, 120)}`);
    };
    if (conf.learners.length > 0) {
      const id = this.rng.pick(conf.learners);
      this.trace(`n${lead.id} promotes learner n${id}`);
      sched.after(0, lead.proc, 'promote', () => {
        node.promote(id).then(done(`promote n${id}`), done(`promote n${id}`));
      });
      return true;
    }
    // FS-22's recipe, what an operator does to retire the leader's machine: `floe cluster remove <leader>` (asked of
    // the leader: it hands leadership over and answers 307, which is followed), and the machine switched off (a kill or
    // a power loss) as soon as the call returns. At full size and below (at 2 voters: a removal at 3 leaves 2), with
    // every member healthy (a faulted disk must be replaced first: below). A share of the steps, drawn from a stream
    // of its own: a step that does not draw it runs as before.
    if (
      conf.voters.length >= 2 &&
      conf.voters.includes(lead.id) &&
      this.members().every((h) => !h.diskFaulted && !h.corrupted && h.state !== 'failed') &&
      this.decommissionRng.chance(DECOMMISSION_SHARE)
    ) {
      this.decommissionLeader(lead, node, conf.voters.length);
      return true;
    }
    if (conf.voters.length < c.cfg.nodes) {
      const h = c.addNode();
      this.trace(`n${lead.id} adds new machine n${h.id}`);
      sched.after(0, lead.proc, 'add-member', () => {
        node.addMember(h.member, 10_000).then(
          () => {
            // FS-3: addMember promotes a learner whose log is within 100 entries of the leader's,
            // which a learner that has acknowledged nothing is while the log is short.
            const st = node.status();
            const match = st.progress?.[h.id]?.match ?? 0;
            if (match === 0) {
              this.stats.promotedEmpty++;
              this.trace(
                `n${h.id} promoted to voter holding nothing (match 0, leader's last index ${st.lastIndex}): FS-3`,
              );
            }
            done(`add n${h.id}`)();
          },
          done(`add n${h.id}`),
        );
      });
      return true;
    }
    // A member whose disk took a fault is the one to replace (what an operator does); while there
    // is one, removing a healthy voter would leave the faulty one in a majority of two.
    const victims = this.members().filter((h) => conf.voters.includes(h.id));
    if (victims.length === 0) {
      this.changing = false;
      return false;
    }
    // Corrupt data first: a member that failed for another reason (an fsync EIO) starts again on a reboot, while the
    // corrupt one never will, and removing the other would leave it in a majority of two (swarm seed 1410929; the
    // leader now refuses that removal itself: the strict reconfiguration check). `removal.failedFirst` (tests only)
    // is the order before that fix.
    const corrupt = victims.filter((h) => h.corrupted || /corrupt/i.test(h.lastError ?? ''));
    const failed = victims.filter((h) => h.state === 'failed');
    const first = [
      ...(c.cfg.removal?.failedFirst ? [failed, corrupt] : [corrupt, failed]),
      victims.filter((h) => h.diskFaulted),
      victims,
    ].find((l) => l.length > 0) as NodeHost[];
    const v = this.rng.pick(first);
    const force = c.cfg.removal?.force === true;
    this.trace(`n${lead.id} removes n${v.id}${force ? ' (force)' : ''}`);
    sched.after(0, lead.proc, 'remove-member', () => {
      this.removeVia(lead, node, v, force).then(
        () => {
          // Retired: the machine is switched off (it stops itself if it applied its removal), or not (FS-23).
          this.afterRemoval(v, () => {
            if (v.proc?.alive) v.crash('process');
          });
          done(`remove n${v.id}`)();
        },
        (err: unknown) => {
          // Refused by the strict reconfiguration check: nothing was proposed, the member stays (an operator starts
          // or repairs the inactive voters first); the next membership step tries again.
          if (err instanceof UnsafeRemovalError) this.stats.unsafeRemovalsRefused++;
          done(`remove n${v.id}`)(err);
        },
      );
    });
    return true;
  }

  /**
   * FS-23: a member whose removal call returned is marked removed (no fault touches it again, no liveness check counts
   * it), and then, drawn from `faults-removed`: left on (when its process runs), or switched off by `switchOff` and
   * started again from its data directory 0.2-5 s later (an operator's mistake; not a machine whose data took a disk
   * fault), or switched off for good (what the fault did before: such a draw changes nothing else in the run). A
   * member that missed the commit of its removal (the message carrying it lost, or it was down) must learn it from a
   * member's verdict in the peer handshake and stop by itself (`removed-lingers`, run.ts). Returns false when left on.
   */
  private afterRemoval(v: NodeHost, switchOff: () => void): boolean {
    v.removed = true;
    const r = this.removedRng;
    const draw = r.float();
    if (draw < REMOVED_LEFT_ON_SHARE && v.proc?.alive) {
      this.trace(`n${v.id} removed: left on`);
      return false;
    }
    switchOff();
    if (draw < REMOVED_LEFT_ON_SHARE + REMOVED_RESTARTED_SHARE && !v.corrupted && !v.diskFaulted) {
      const ms = r.range(200, 5_000);
      this.trace(`n${v.id} removed: switched off, started again in ${ms} ms (by mistake)`);
      this.removedRestarts.add(v);
      this.c.world.sched.after(ms * 1000, undefined, 'removed-restart', () => {
        if (this.removedRestarts.delete(v)) v.boot({ removed: true });
      });
    }
    return true;
  }

  /**
   * Removes voter `v` through `lead`'s API as `floe cluster remove` does: on a 307 (NotLeaderError naming the leader)
   * it asks the leader named, once. The leader removing itself hands leadership over first and answers so (FS-22).
   */
  private removeVia(lead: NodeHost, node: FloeNode<unknown>, v: NodeHost, force: boolean): Promise<void> {
    return node.removeMember(v.id, force ? { force } : undefined).catch((err: unknown) => {
      const to = err instanceof NotLeaderError ? err.leader?.id : undefined;
      const next = to === undefined ? undefined : this.c.hosts.find((h) => h.id === to);
      if (!next?.node || !next.proc?.alive) throw err;
      this.trace(`n${lead.id} answers: n${to} leads; n${to} removes n${v.id}`);
      this.changeProc = next.proc;
      return next.node.removeMember(v.id, force ? { force } : undefined);
    });
  }

  /**
   * The leader's machine is retired (FS-22): removed through its own API, then switched off at once — a kill or a
   * power loss, drawn from `faults-decommission` — as soon as the call returns, before any later message of its
   * process — unless `afterRemoval` leaves it on or has it started again by mistake (FS-23); the liveness oracle
   * expects the members left to elect and serve. If the call fails nothing is switched off: the operator sees the error
   * and tries again later.
   */
  private decommissionLeader(lead: NodeHost, node: FloeNode<unknown>, voters: number): void {
    const r = this.decommissionRng;
    const power = r.chance(1 / 2);
    this.trace(
      `n${lead.id} is retired (leader of ${voters} voters): remove n${lead.id} (asked of it), then ${power ? 'power off' : 'kill'}`,
    );
    this.c.world.sched.after(0, lead.proc, 'decommission-leader', () => {
      this.removeVia(lead, node, lead, false).then(
        () => {
          const off = this.afterRemoval(lead, () => {
            if (lead.proc?.alive) {
              if (power) lead.crash('power', (n) => r.int(n));
              else lead.crash('process');
            }
          });
          this.changing = false;
          this.trace(`retire n${lead.id}: done, ${off ? 'switched off' : 'left on'}`);
        },
        (err: unknown) => {
          if (err instanceof UnsafeRemovalError) this.stats.unsafeRemovalsRefused++;
          this.changing = false;
          this.trace(`retire n${lead.id}: ${String(err).slice(0, 120)}`);
        },
      );
    });
  }

  /**
   * A client host loses every link to the cluster (both ways); its service process dies soon after and its supervisor
   * starts a replacement while the cut lasts, which finds the cluster unreachable (and, with a cache, may resume its
   * lease from it). The host's wall clock steps once (NTP; back in two thirds of the cases): a backward step only
   * after a process of the host resumed from its cache — a step back across the restart, between the old process's
   * last cache write and the resume, is outside the failure model (docs/client.md, "Clocks": the cached wall-clock
   * deadline assumes none; the oracle does not exempt it) — and a forward one once the replacement is past its
   * acquire wait. The cut lasts a TTL and the step beyond that, so the cluster expires the lease and may grant the
   * worker ID to another host meanwhile.
   */
  /**
   * Other faults may kill and restart a host's processes except while it is cut off by `clientRestartCutOff`: there a
   * restart that resumes from the cache across the fault's backward wall step is outside the failure model
   * (docs/client.md, "Clocks"), and the fault itself does the one restart it needs.
   */
  private mayRestart(h: LeaseClientHost): boolean {
    return !this.noBackStepUntil.has(h.machine);
  }

  private restartCutOff(): boolean {
    const c = this.c;
    const rng = this.rng;
    const sched = c.world.sched;
    const now = sched.nowUs;
    const ttlMs = c.cfg.lease.ttlMs;
    // A host whose wall clock stepped back within the last TTL (its cache may hold a deadline written before the
    // step) is not picked, nor one already cut off.
    const h = pickMaybe(
      rng,
      c.leaseClients.filter(
        (x) =>
          x.live.length > 0 &&
          !this.noBackStepUntil.has(x.machine) &&
          !x.machine.clockEvents.some((e) => e.kind === 'wallBack' && e.atUs > now - (ttlMs + 1_000) * 1000),
      ),
    );
    if (!h) return false;
    const m = h.machine;
    const crashAfterUs = rng.range(0, Math.floor(ttlMs / 4)) * 1000;
    const restartUs = rng.range(10, 300) * 1000;
    const jitterUs = rng.range(10, 300) * 1000;
    const stepMs = (rng.chance(2 / 3) ? -1 : 1) * rng.range(1, 5_000);
    const cutUs = ttlMs * 1000 + Math.abs(stepMs) * 1000 + this.outage();
    // Every link of this client: the router's client-side cuts are named client->node and node->client.
    const cut = this.members().flatMap((n) => [`${h.name}->${n.id}`, `${n.id}->${h.name}`]);
    for (const l of cut) c.router.blocked.add(l);
    // No other fault steps this wall clock back until the cut heals.
    this.noBackStepUntil.set(m, Number.POSITIVE_INFINITY);
    this.trace(`${h.name} cut off from every node (${cut.length / 2}): its service restarts while cut off`);
    let stepped = false;
    const step = (why: string) => {
      if (stepped || this.healed) return;
      stepped = true;
      m.jumpWall(stepMs);
      this.trace(`${m.name} wall clock steps ${stepMs} ms (cut off, ${why})`);
    };
    this.later(crashAfterUs, 'cut-off-crash', () => {
      const old = h.live;
      for (const p of old) h.crash(p);
      // A kill in a busy wait lands when the wait ends (LeaseClientHost.crash); the supervisor restarts after it.
      const deadUs = Math.max(sched.nowUs, ...old.map((p) => p.busyUntilUs));
      sched.at(deadUs + restartUs, undefined, 'cut-off-restart', () => {
        if (this.healed) return;
        if (h.live.length === 0) h.spawn();
        this.trace(`${h.name} restarted while cut off`);
        h.onResumed = (p) => {
          // Only while the process that resumed runs: a step back and then a restart that resumes from a record
          // written before it is outside the failure model (swarm seeds 334353 and 339791 on d69b478, a harness
          // composition: another fault killed the resumed process around the step).
          if (stepMs < 0 && !old.includes(p))
            this.later(jitterUs, 'cut-off-wall-step', () => {
              if (p.alive) step(`after ${p.name} resumed`);
            });
        };
        // Past the replacement's acquire wait (its budget, one request timeout and 10% for clock rates).
        const waitMs = (h.acquireTimeoutMs ?? ttlMs + 2_000) + c.cfg.lease.requestTimeoutMs;
        const waitUs = Math.ceil(waitMs * 1.1) * 1000 + jitterUs;
        if (stepMs > 0) this.later(waitUs, 'cut-off-wall-step', () => step('past the acquire wait'));
        this.later(waitUs + cutUs, 'cut-off-heal', () => {
          for (const l of cut) c.router.blocked.delete(l);
          this.noBackStepUntil.delete(m);
          h.onResumed = undefined;
          this.trace(`${h.name} reaches the cluster again`);
        });
      });
    });
    return true;
  }

  /**
   * The `coarse` profile's faults (draws from `faults-late5` only). A client host loses every link to the cluster, both
   * ways, for longer than a TTL (its renewals fail; the cluster expires its lease and may grant the worker ID to a host
   * waiting for one). With `reset`, as in `clientRestartCutOff` its service process dies soon after and a supervisor
   * starts a replacement (which finds the cluster unreachable and may resume from the cache), and then, past the
   * replacement's acquire wait, the machine is reset (a power loss: a hypervisor's isolation response, a watchdog) and
   * boots again within 0.2-2 s, still cut off, and its service starts and may resume from whatever cache survived.
   * No wall-clock step: while cut off, no other fault steps the host's wall clock back or restarts its processes
   * (`noBackStepUntil`), so the SDK's assumption about resuming from a cache holds (docs/client.md, "Clocks").
   */
  private cutOff(reset: boolean): boolean {
    const c = this.c;
    const rng = this.lateRng;
    const sched = c.world.sched;
    const now = sched.nowUs;
    const ttlMs = c.cfg.lease.ttlMs;
    // A host whose service issued IDs within the last second (it holds a lease).
    const h = pickMaybe(
      rng,
      c.leaseClients.filter(
        (x) =>
          x.live.length > 0 &&
          x.lastIssuedUs > now - 1_000_000 &&
          !this.noBackStepUntil.has(x.machine) &&
          !x.machine.clockEvents.some((e) => e.kind === 'wallBack' && e.atUs > now - (ttlMs + 1_000) * 1000),
      ),
    );
    if (!h) return false;
    const m = h.machine;
    const [lo, hi] = c.cfg.outageMs;
    const cutUs = ttlMs * 1000 + rng.range(lo, hi) * 1000;
    const cut = this.members().flatMap((n) => [`${h.name}->${n.id}`, `${n.id}->${h.name}`]);
    for (const l of cut) c.router.blocked.add(l);
    this.noBackStepUntil.set(m, Number.POSITIVE_INFINITY);
    const healCut = () => {
      for (const l of cut) c.router.blocked.delete(l);
      this.noBackStepUntil.delete(m);
      this.trace(`${h.name} reaches the cluster again`);
    };
    if (!reset) {
      this.trace(`${h.name} cut off from every node (${cut.length / 2}) while its service runs`);
      this.later(cutUs, 'cut-off-heal', healCut);
      // Its lease can no longer be renewed: the service process stalls (a stop-the-world GC, a container's CPU quota
      // throttled, a vCPU descheduled) from up to 300 ms before the lease's wall-clock deadline to 0.1-1 s past it, so
      // its calls due meanwhile run when it resumes, possibly before the SDK's deadline timer (the fast path must not
      // outlive the deadline: issue 9 item 3).
      const cur = h.current;
      if (cur?.proc.alive && cur.lease.endedBecause === undefined) {
        const before = rng.range(0, 300);
        const stallMs = before + rng.range(100, 1_000);
        const inMs = cur.lease.deadlineWallMs - cur.proc.wallMs() - before;
        if (inMs > 0 && Number.isFinite(inMs)) {
          const p = cur.proc;
          this.later(Math.ceil(inMs * 1000), 'cut-off-stall', () => {
            if (!p.alive || p.paused) return;
            this.trace(
              `${p.name} stalls for ${stallMs} ms (cut off, ${before} ms before its lease's deadline)`,
            );
            p.pause();
            this.c.world.sched.after(stallMs * 1000, undefined, 'cut-off-stall-end', () => {
              if (!p.paused) return;
              this.trace(`${p.name} runs again`);
              p.resume();
            });
          });
        }
      }
      return true;
    }
    this.trace(`${h.name} cut off from every node (${cut.length / 2}): restart, then a reset, while cut off`);
    const crashAfterUs = rng.range(0, Math.floor(ttlMs / 4)) * 1000;
    const restartUs = rng.range(10, 300) * 1000;
    const resetAfterUs = rng.range(10, 500) * 1000;
    const bootUs = rng.range(200, 2_000) * 1000;
    this.later(crashAfterUs, 'cut-off-crash', () => {
      const old = h.live;
      for (const p of old) h.crash(p);
      const deadUs = Math.max(sched.nowUs, ...old.map((p) => p.busyUntilUs));
      sched.at(deadUs + restartUs, undefined, 'cut-off-restart', () => {
        if (this.healed) return;
        if (h.live.length === 0) h.spawn();
        this.trace(`${h.name} restarted while cut off`);
        // Past the replacement's acquire wait (its budget, one request timeout and 10% for clock rates).
        const waitMs = (h.acquireTimeoutMs ?? ttlMs + 2_000) + c.cfg.lease.requestTimeoutMs;
        const resetUs = Math.ceil(waitMs * 1.1) * 1000 + resetAfterUs;
        this.later(resetUs, 'cut-off-reset', () => {
          this.trace(`${h.name} reset while cut off (boots in ${bootUs / 1000} ms)`);
          h.powerLoss();
          this.later(bootUs, 'cut-off-boot', () => {
            if (h.live.length === 0) h.spawn();
          });
        });
        this.later(resetUs + bootUs + cutUs, 'cut-off-heal', healCut);
      });
    });
    return true;
  }

  /**
   * A rolling enable's hazard (decision 0009): the leader L runs with --leader-lease, a follower F without it, and
   * another voter C has been cut off from L for an election timeout or more, so C campaigns while F's
   * acknowledgements keep L's lease alive. Then F's process crashes and restarts within L's lease, cut off from L
   * too (L's heartbeats would otherwise tell the new process of a leader at once): a restarted F that does not keep
   * the promise its previous process made votes for C at once, and C serves strict values while L still serves from
   * its lease. Clients reach everyone throughout. Healed 0.2-1.5 s after F restarts.
   */
  private rollingRestart(): boolean {
    const lead = this.leader();
    if (!lead?.node || !lead.leaderLease || !this.healthyNodes().includes(lead)) return false;
    const voters = new Set(lead.node.status().conf.voters);
    const followers = this.healthyNodes().filter((h) => h !== lead && voters.has(h.id));
    const flagless = followers.filter((h) => !h.leaderLease);
    if (flagless.length === 0 || followers.length < 2) return false;
    const f = this.rollingRng.pick(flagless);
    const cand = this.rollingRng.pick(followers.filter((h) => h !== f));
    const l = lead.id;
    this.c.net.setBlocked([
      [l, cand.id],
      [cand.id, l],
    ]);
    const epoch = ++this.partitionEpoch;
    this.trace(
      `rolling enable: n${l} (leader, --leader-lease) cut off from n${cand.id}; n${f.id} runs without the flag`,
    );
    const electionUs = this.c.cfg.node.tickMs * this.c.cfg.node.electionTicks * 1000;
    const tickUs = this.c.cfg.node.tickMs * 1000;
    this.later(electionUs + this.rollingRng.range(0, electionUs), 'rolling-crash', () => {
      if (
        epoch !== this.partitionEpoch ||
        !f.up ||
        f.proc?.paused ||
        f.machine.clock.suspended ||
        !this.canImpair()
      )
        return;
      this.c.net.setBlocked([
        [l, cand.id],
        [cand.id, l],
        [l, f.id],
        [f.id, l],
      ]);
      this.trace(`n${f.id} crashes and restarts at once, cut off from n${l} too`);
      f.crash('process');
      this.later(this.rollingRng.range(1, 3 * tickUs), 'restart-node', () => {
        f.boot();
        this.later(this.rollingRng.range(200, 1500) * 1000, 'heal-partition', () => {
          if (epoch !== this.partitionEpoch) return;
          this.c.net.setBlocked([]);
          this.trace('partition healed');
        });
      });
    });
    return true;
  }

  /** Suspends the leader's machine with its peer links cut, healed 0.2-1.5 s after it resumes (`nodeSuspend`). */
  private suspendCutOff(h: NodeHost): void {
    const m = h.machine;
    const t = isolate(
      this.members().map((x) => x.id),
      h.id,
    );
    this.c.net.setBlocked(t.links);
    const epoch = ++this.partitionEpoch;
    this.trace(`${m.name} (the leader) suspends, cut off from its peers: ${t.describe}`);
    m.suspend();
    this.later(this.outage(), 'machine-resume', () => {
      this.trace(`${m.name} resumes, still cut off from its peers`);
      m.resume();
      this.later(this.leaseRng.range(200, 1500) * 1000, 'heal-partition', () => {
        if (epoch !== this.partitionEpoch) return;
        this.c.net.setBlocked([]);
        this.trace('partition healed');
      });
    });
  }

  private suspend(m: Machine): void {
    if (m.clock.suspended) return;
    this.trace(`${m.name} suspends`);
    m.suspend();
    this.later(this.outage(), 'machine-resume', () => {
      this.trace(`${m.name} resumes`);
      m.resume();
    });
  }

  /** Ends every fault now: the network heals, processes resume, nodes restart, clients run. */
  heal(): void {
    this.healed = true;
    const c = this.c;
    c.net.setBlocked([]);
    c.net.clearStalls();
    c.net.conditions = { ...c.cfg.net };
    // Over the production transport a lost or corrupted segment is a TCP retransmission, 200 ms at the least: with an
    // election timeout under two of those, background loss alone keeps a small cluster electing (swarm seed 451036:
    // tick 20 ms, a 2-voter cluster, a new leader every few seconds, each giving every lease a full TTL, so the pool
    // never freed). Production's default election timeout is 500 ms; after the heal such seeds get a clean network.
    const cfg = c.cfg;
    if (cfg.transport.production && cfg.node.tickMs * cfg.node.electionTicks < 2 * PEER_MIN_RTO_MS) {
      c.net.conditions = { ...c.net.conditions, drop: 0, corrupt: 0, duplicate: 0 };
    }
    c.router.blocked.clear();
    c.router.mixup = 0;
    c.router.foreign = 0;
    this.noBackStepUntil.clear();
    for (const l of c.leaseClients) l.onResumed = undefined;
    for (const h of c.hosts) h.onLeads = undefined;
    for (const h of c.hosts) h.writeFlip = undefined;
    for (const h of c.hosts) h.onWalSync = undefined;
    // Removed machines left on run again too (they must stop by themselves: `removed-lingers`), and those due to be
    // started again by mistake start now.
    for (const h of c.hosts) {
      if (!h.removed) continue;
      // Its machine too when its process is dead: one started again below (or by its timer, before the heal) must not
      // boot on a suspended machine whose resume the heal cancelled (nodes seeds 200405, 200663: booting for ever).
      if (h.machine.clock.suspended) h.machine.resume();
      if (!h.proc?.alive) continue;
      h.diskFaults.syncEio = 0;
      h.diskFaults.slow = 1;
      if (h.proc.paused) h.proc.resume();
    }
    for (const h of this.removedRestarts) h.boot({ removed: true });
    this.removedRestarts.clear();
    for (const h of this.members()) {
      h.diskFaults.syncEio = 0;
      h.diskFaults.slow = 1;
      if (h.machine.clock.suspended) h.machine.resume();
      if (h.proc?.paused) h.proc.resume();
      if (h.state === 'halted' || h.state === 'failed') h.crash('power');
      if (h.state === 'down') h.boot();
    }
    for (const l of c.leaseClients) {
      if (l.machine.clock.suspended) l.machine.resume();
      for (const p of l.live) if (p.paused) p.resume();
      if (l.live.length === 0) l.spawn();
    }
    for (const s of c.seqClients) s.restart();
    for (const r of c.respLeaseClients ?? []) {
      if (r.machine.clock.suspended) r.machine.resume();
      if (r.proc.paused) r.proc.resume();
      r.restart();
      // As the SDK clients are spawned here if the pool was never configured (its PUT kept failing).
      r.start();
    }
    c.world.trace('heal: every fault ended');
  }
}

function pickMaybe<T>(rng: Prng, items: readonly T[]): T | undefined {
  return items.length === 0 ? undefined : rng.pick(items);
}
