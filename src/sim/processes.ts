// Node processes: creating a node (its clock rate, election timer and core config), starting it
// from durable storage, crashing it, resuming it from a pause, and shutting it down some time after
// its removal committed. The fault director and the workload decide when; this is how.

import type { NodeId, RaftConfig } from '../raft/types.js';
import { InvariantViolation } from './checker.js';
import { SimNode } from './sim-node.js';
import type { Transport } from './transport.js';
import { copyConf, type SimWorld } from './world.js';

export class Processes {
  constructor(
    private readonly w: SimWorld,
    private readonly transport: Transport,
  ) {}

  createNode(id: NodeId): SimNode {
    const w = this.w;
    const drift = w.o.clockDrift;
    const rng = w.root.fork(`node-${id}`);
    // One draw either way, so 'extremes' changes nothing else in the run.
    const u = rng.float();
    const factor =
      w.o.clockRates === 'extremes' ? (u < 0.5 ? 1 - drift : 1 + drift) : 1 + drift * (2 * u - 1);
    const period = Math.max(1, Math.round(w.settings.baseTickUs * factor));
    const electionRng = rng.fork('election');
    const s = w.settings;
    const restartApplied = w.o.workarounds.has('restart-applied');
    const makeConfig = (applied: number): RaftConfig => ({
      ...(restartApplied ? { applied } : {}),
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
    const node = new SimNode(id, period, makeConfig, copyConf(w.bootstrapConf));
    w.nodes.set(id, node);
    w.stats.nodesCreated++;
    w.log(`n${id} created, tick period ${period}us`);
    this.restart(node);
    w.queue.push(w.now + rng.range(0, period - 1), { k: 'tick', node: id });
    return node;
  }

  /** Starts the node from its durable storage only (a core that cannot is a core-error). */
  restart(node: SimNode): void {
    const w = this.w;
    try {
      node.start();
    } catch (err) {
      if (err instanceof InvariantViolation) throw err;
      w.checker.coreError(node.id, 'restart from durable storage', err);
      return;
    }
    const snap = node.durable.snapshot().metadata;
    const hs = node.durableHs;
    w.log(
      `n${node.id} start from durable: snapshot ${snap.index}/${snap.term} log ..${node.durable.lastIndex()} term=${hs.term} vote=${hs.vote} commit=${hs.commit}`,
    );
    w.checker.observeRestore(node.id, node.durableHs.term, snap.index, snap.term, node.app.chain, 'restart');
  }

  /** kill -9: volatile state and queued messages are gone; during chaos it restarts later. */
  crash(node: SimNode, why: string): void {
    const w = this.w;
    // A snapshot stream to a process that dies breaks, and the sender's transport says so (seed
    // 2000662 --faults storm: a snapshot queued for a paused node vanished with its crash, and the
    // leader waited for that follower forever).
    const lostSnaps = node.inbox.filter((q) => q.msg.type === 'snap');
    node.crash();
    for (const q of lostSnaps) this.transport.reportSnapshot(q.msg, q.senderLife, false);
    w.stats.crashes++;
    w.log(`n${node.id} CRASH (${why})`);
    if (w.phase === 'chaos' && !node.removed) {
      w.queue.push(w.now + w.outage(1_000, 800_000), {
        k: 'restart',
        node: node.id,
        life: node.incarnation,
      });
    }
  }

  /** Ends a pause: the messages that queued up are delivered now, in order. */
  resume(node: SimNode): void {
    const w = this.w;
    node.paused = false;
    w.log(`n${node.id} resume (${node.inbox.length} queued messages)`);
    for (const { msg, senderLife } of node.inbox) {
      w.queue.push(w.now, { k: 'deliver', msg, fromInbox: true, senderLife });
    }
    node.inbox = [];
  }

  /** A committed conf change removed `id`. */
  onRemoved(id: NodeId): void {
    const w = this.w;
    const node = w.nodes.get(id);
    if (node === undefined || node.removed) return;
    // (The workload never offers a removed node as its spare: it checks `removed`.)
    node.removed = true;
    // Operators shut removed servers down eventually; until then they may try to disrupt.
    const delay = w.faultRng.range(2, 6) * w.settings.electionTicks * w.settings.baseTickUs;
    w.queue.push(w.now + delay, { k: 'retire', node: id });
  }

  retire(node: SimNode): void {
    if (node.state === 'retired') return;
    node.retire();
    this.w.log(`n${node.id} retired (removed from the cluster)`);
  }
}
