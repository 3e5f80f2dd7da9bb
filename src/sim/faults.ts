// The fault director: during the chaos phase it draws the profile's faults — partitions of every
// shape, crashes, torn writes, pauses, network noise — and schedules their end; at the end of
// chaos it lifts every fault at once (heal), which starts the liveness clock.

import type { NodeId } from '../raft/types.js';
import { CALM_NETWORK, type NetworkConditions } from './network.js';
import type { Prng } from './prng.js';
import type { Processes } from './processes.js';
import type { SimNode } from './sim-node.js';
import * as topo from './topology.js';
import type { SimWorld } from './world.js';

export class FaultDirector {
  /** Generation of the current network noise, so a stale calm-down timer does nothing. */
  private netGen = 0;
  private pauseSeq = 0;

  constructor(
    private readonly w: SimWorld,
    private readonly processes: Processes,
  ) {}

  /** Whether the profile injects anything at all. */
  hasFaults(): boolean {
    return Object.values(this.w.o.profile.weights).some((w) => w > 0);
  }

  /** Draws and injects one fault, and schedules the next decision. */
  step(): void {
    const w = this.w;
    if (w.phase !== 'chaos') return;
    const p = w.o.profile;
    const rng = w.faultRng;
    const action = rng.weighted(p.weights);
    const present = [...w.nodes.values()].filter((n) => n.state !== 'retired');
    const ids = present.map((n) => n.id);
    const impaired = present.filter((n) => n.state === 'down' || n.paused || n.tornPending).length;
    const leader = w.currentLeader();
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
        w.network.setBlocked(t.links);
        w.stats.partitions++;
        w.log(`net partition ${t.describe}`);
        w.queue.push(w.now + w.outage(50_000, 1_500_000), {
          k: 'healNet',
          epoch: w.network.epoch,
        });
        break;
      }
      case 'crash':
      case 'tornCrash': {
        if (impaired >= p.maxImpaired) break;
        const victim = victimOf(present.filter((n) => n.alive && !n.tornPending));
        if (!victim) break;
        if (action === 'crash') this.processes.crash(victim, 'kill -9');
        else {
          victim.tornPending = true;
          w.log(`n${victim.id} torn write armed`);
        }
        break;
      }
      case 'pause': {
        if (impaired >= p.maxImpaired) break;
        const victim = victimOf(present.filter((n) => n.active));
        if (!victim) break;
        victim.paused = true;
        victim.pauseToken = ++this.pauseSeq;
        w.stats.pauses++;
        const length = w.outage(5_000, 1_500_000);
        w.log(`n${victim.id} PAUSE for ${length}us`);
        w.queue.push(w.now + length, {
          k: 'resume',
          node: victim.id,
          life: victim.incarnation,
          pause: victim.pauseToken,
        });
        break;
      }
      case 'netNoise': {
        const c: NetworkConditions = {
          ...w.baseNet,
          dropRate: rng.float() * 0.3,
          duplicateRate: rng.float() * 0.2,
          spikeRate: rng.float() * 0.3,
          spikeMaxUs: rng.chance(0.3) ? rng.range(300_000, 2_000_000) : rng.range(1_000, 300_000),
        };
        w.network.conditions = c;
        const gen = ++this.netGen;
        w.log(
          `net noise drop=${c.dropRate.toFixed(3)} dup=${c.duplicateRate.toFixed(3)} spike=${c.spikeRate.toFixed(3)} up to ${c.spikeMaxUs}us`,
        );
        w.queue.push(w.now + w.outage(50_000, 1_000_000), { k: 'calmNet', gen });
        break;
      }
    }
    w.queue.push(w.now + rng.range(...p.gapUs), { k: 'fault' });
  }

  /** A partition's time is up (unless a later partition replaced it, or chaos is over). */
  healPartition(epoch: number): void {
    const w = this.w;
    if (w.network.epoch === epoch && w.phase === 'chaos') {
      w.network.heal();
      w.log(`net heal partition`);
    }
  }

  /** A noise spell's time is up (unless a later one replaced it, or chaos is over). */
  calmNetwork(gen: number): void {
    const w = this.w;
    if (this.netGen === gen && w.phase === 'chaos') {
      w.network.conditions = { ...w.baseNet };
      w.log(`net calm`);
    }
  }

  /**
   * End of chaos: lift every fault (all nodes up, full connectivity, no loss; latency stays) and
   * start the liveness clock. Removed nodes are shut down now. The caller drains Readies after.
   */
  heal(): void {
    const w = this.w;
    w.phase = 'heal';
    w.log(`HEAL all faults lifted`);
    w.network.heal();
    if (w.o.bug === 'unhealed-partition') {
      w.network.setBlocked(topo.isolate([...w.nodes.keys()], 1).links);
      w.log('net partition isolate 1 (left in place: unhealed-partition)');
    }
    w.network.conditions = { ...CALM_NETWORK };
    for (const node of w.nodes.values()) {
      node.tornPending = false;
      if (node.state === 'retired') continue;
      if (node.removed) {
        node.retire();
        continue;
      }
      if (node.state === 'down') this.processes.restart(node);
      else if (node.paused) this.processes.resume(node);
    }
  }
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
