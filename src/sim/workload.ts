// The client workload of the chaos phase: every 0.5–8 ms it proposes a batch of counter commands
// (to a node that believes it leads, possibly a stale one), issues a ReadIndex read, walks the
// membership (add a learner, promote it, ... up to 5 voters, then remove down to 3), transfers
// leadership or forces a campaign. Every proposal is registered so liveness can decide it later.

import type { ConfChange, ConfState, NodeId } from '../raft/types.js';
import { ProposalDroppedError } from '../raft/types.js';
import { encodeOp, type KvOp } from './kv-app.js';
import { MAX_NEW_NODES, MAX_VOTERS, MIN_VOTERS } from './options.js';
import type { Processes } from './processes.js';
import type { SimNode } from './sim-node.js';
import { isRejection, type SimWorld } from './world.js';

const encoder = new TextEncoder();

export class Workload {
  private nextOpIdValue = 1;
  private nextReadId = 1;
  private nextNodeId: NodeId;
  private readonly lastNodeId: NodeId;
  /** The node created to join next (ids are never reused). */
  private spare: NodeId | undefined;
  /** Walking up towards MAX_VOTERS, or down towards MIN_VOTERS. */
  private growing: boolean;

  constructor(
    private readonly w: SimWorld,
    private readonly processes: Processes,
  ) {
    this.nextNodeId = w.o.nodes + 1;
    this.lastNodeId = w.o.nodes + MAX_NEW_NODES;
    this.growing = w.o.nodes < MAX_VOTERS;
  }

  /** A fresh proposal id (client commands and liveness barriers share one sequence). */
  newOpId(): number {
    return this.nextOpIdValue++;
  }

  /** One client action during chaos; schedules the next. */
  step(): void {
    const w = this.w;
    const rng = w.clientRng;
    w.queue.push(w.now + rng.range(500, 8_000), { k: 'client' });
    const action = rng.weighted({
      propose: 60,
      read: 10,
      conf: w.o.confChanges ? 5 : 0,
      transfer: 2,
      campaign: 1,
      idle: 20,
    });
    const active = [...w.nodes.values()].filter((n) => n.active);
    if (active.length === 0) return;
    const leaders = active.filter((n) => n.role === 'leader');
    switch (action) {
      case 'propose': {
        const target = leaders.length > 0 ? rng.pick(leaders) : rng.pick(active);
        const batch = rng.range(1, 4);
        for (let i = 0; i < batch; i++) {
          const key = `k${rng.int(8)}`;
          const op: KvOp = rng.chance(0.7)
            ? { id: this.newOpId(), op: 'incr', key, by: rng.range(1, 9) }
            : { id: this.newOpId(), op: 'set', key, value: rng.int(1000) };
          if (!this.propose(target, op)) break;
        }
        return;
      }
      case 'read': {
        const target = rng.pick(active);
        const ctx = `r${this.nextReadId++}`;
        w.stats.reads++;
        w.checker.observeReadIssued(target.id, ctx);
        w.log(`client readIndex ${ctx} at n${target.id} (committed=${w.checker.knownCommit})`);
        try {
          w.core(target, 'readIndex', (raw) => raw.readIndex(encoder.encode(ctx)));
        } catch (err) {
          if (!(err instanceof ProposalDroppedError)) throw err;
          w.log(`client readIndex ${ctx} at n${target.id} refused: ${err.reason}`);
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
        w.stats.transfers++;
        w.log(`client transferLeadership n${leader.id} -> n${to}`);
        try {
          w.core(leader, 'transferLeadership', (raw) => raw.transferLeadership(to));
        } catch (err) {
          if (!isRejection(err)) throw err;
          w.log(`client transferLeadership refused: ${err.message}`);
        }
        return;
      }
      case 'campaign': {
        const voters = active.filter((n) => n.conf.voters.includes(n.id));
        if (voters.length === 0) return;
        const node = rng.pick(voters);
        w.log(`client campaign at n${node.id}`);
        w.core(node, 'campaign', (raw) => raw.campaign());
        return;
      }
      case 'idle':
        return;
    }
  }

  /** Proposes `op` at `node`; false when the core refused it. */
  propose(node: SimNode, op: KvOp): boolean {
    const w = this.w;
    try {
      w.core(node, 'propose', (raw) => raw.propose(encodeOp(op)));
    } catch (err) {
      if (err instanceof ProposalDroppedError) {
        w.stats.proposalsDropped++;
        w.log(`client propose #${op.id} at n${node.id} dropped: ${err.reason}`);
        return false;
      }
      throw err;
    }
    w.stats.proposals++;
    w.proposals.set(op.id, { op });
    w.log(`client propose #${op.id} ${op.op} at n${node.id}`);
    return true;
  }

  /** Membership walk: add a learner, promote it, ... up to 5 voters; then remove down to 3. */
  private confStep(leader: SimNode): void {
    const w = this.w;
    const conf = leader.conf;
    let cc: ConfChange | undefined;
    if (conf.learners.length > 0) {
      cc = { type: 'addVoter', nodeId: conf.learners[0] as NodeId };
    } else if (this.growing && conf.voters.length < MAX_VOTERS) {
      const spare = this.spareNode(conf);
      if (spare !== undefined) cc = { type: 'addLearner', nodeId: spare };
    } else if (conf.voters.length > MIN_VOTERS) {
      cc = { type: 'remove', nodeId: w.clientRng.pick(conf.voters) };
    }
    if (conf.voters.length >= MAX_VOTERS) this.growing = false;
    if (conf.voters.length <= MIN_VOTERS) this.growing = true;
    if (cc === undefined) return;
    try {
      w.core(leader, 'proposeConfChange', (raw) => raw.proposeConfChange(cc));
      w.stats.confChanges++;
      w.log(`client conf ${cc.type} ${cc.nodeId} at n${leader.id}`);
    } catch (err) {
      if (!isRejection(err)) throw err;
      w.log(`client conf ${cc.type} ${cc.nodeId} at n${leader.id} refused: ${err.message}`);
    }
  }

  /** A node that is not yet a member, created on demand (ids are never reused). */
  private spareNode(conf: ConfState): NodeId | undefined {
    const w = this.w;
    const s = this.spare !== undefined ? w.nodes.get(this.spare) : undefined;
    if (s && !s.removed && !conf.voters.includes(s.id) && !conf.learners.includes(s.id)) return s.id;
    if (this.nextNodeId > this.lastNodeId) return undefined;
    const id = this.nextNodeId++;
    this.processes.createNode(id);
    this.spare = id;
    return id;
  }
}
