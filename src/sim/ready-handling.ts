// The Ready contract, followed literally for every node after every event: persist (snapshot,
// entries, hard state — or only a prefix of them when a torn write is armed), send, apply (snapshot,
// committed entries, conf changes), answer reads, advance; then take a snapshot when due. Every
// durable change is shown to the safety checker as it happens.

import type { Entry, NodeId, Ready, Snapshot } from '../raft/types.js';
import type { LogView } from './checker.js';
import { describeEntries } from './describe.js';
import { decodeOp, KvApp } from './kv-app.js';
import type { Processes } from './processes.js';
import type { SimNode } from './sim-node.js';
import type { Transport } from './transport.js';
import { copyConf, type SimWorld } from './world.js';

const decoder = new TextDecoder();

export class ReadyHandling {
  constructor(
    private readonly w: SimWorld,
    private readonly transport: Transport,
    private readonly processes: Processes,
  ) {}

  /** Handles every node's Readies until none has one. */
  drainReadies(): void {
    const w = this.w;
    for (const node of w.nodes.values()) {
      let rounds = 0;
      while (node.active && node.raw?.hasReady()) {
        if (++rounds > 1000) {
          w.checker.coreError(node.id, 'hasReady()', new Error('still true after 1000 Readies'));
          break;
        }
        const rd = w.core(node, 'ready', (raw) => raw.ready());
        if (rd === undefined) break;
        this.handleReady(node, rd);
      }
    }
  }

  private handleReady(node: SimNode, rd: Ready): void {
    const w = this.w;
    const id = node.id;
    let becameLeaderTerm: number | undefined;
    if (rd.softState) {
      const wasLeader = node.role === 'leader';
      node.role = rd.softState.role;
      node.lead = rd.softState.lead;
      const term = rd.hardState?.term ?? w.core(node, 'status', (raw) => raw.status().term) ?? 0;
      w.log(`n${id} role ${node.role} lead=${node.lead} term=${term}`);
      if (node.role === 'leader' && !wasLeader) {
        becameLeaderTerm = w.core(node, 'status', (raw) => raw.status().term) ?? term;
        w.leaderTerms.add(becameLeaderTerm);
        w.stats.maxTerm = Math.max(w.stats.maxTerm, becameLeaderTerm);
        w.checker.observeLeader(id, becameLeaderTerm, 'role');
        w.checker.observeLeaderIsVoter(id, becameLeaderTerm, node.conf.voters);
      }
    }

    // Proposals are located by their first appearance, which is in the proposing leader's Ready.
    for (const e of node.role === 'leader' ? rd.entries : []) {
      if (e.type !== 'normal' || e.data.length === 0) continue;
      const op = decodeOp(e.data);
      const p = op && w.proposals.get(op.id);
      if (p && p.loc === undefined) p.loc = { index: e.index, term: e.term };
    }

    // 1. Persist: snapshot, entries, hard state — or, with a torn write armed, only a prefix of them.
    const hasSnap = rd.snapshot !== undefined && rd.snapshot.metadata.index > 0;
    const total = (hasSnap ? 1 : 0) + rd.entries.length + (rd.hardState ? 1 : 0);
    let budget = total;
    if (node.tornPending && total > 0) {
      budget = w.tornRng.int(total);
      // With the workaround, a snapshot and its hard state land together or not at all.
      if (hasSnap && budget > 0 && w.o.workarounds.has('atomic-snapshot')) budget = total;
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
      w.stats.tornWrites++;
      this.processes.crash(
        node,
        `torn write: persisted ${kept} of ${total} units (snapshot, entries, hard state)`,
      );
      return;
    }
    if (becameLeaderTerm !== undefined) w.checker.observeLeaderLog(id, becameLeaderTerm, node.view());

    // 2. Send.
    for (const msg of rd.messages) this.transport.send(node, msg);

    // 3. Apply: snapshot, then committed entries; then answer reads.
    if (hasSnap) {
      const snap = rd.snapshot as Snapshot;
      node.app = KvApp.restore(snap.data);
      node.conf = copyConf(snap.metadata.conf);
      w.stats.snapshotsInstalled++;
      w.log(`n${id} install snapshot ${snap.metadata.index}/${snap.metadata.term}`);
      w.checker.observeRestore(
        id,
        node.durableHs.term,
        snap.metadata.index,
        snap.metadata.term,
        node.app.chain,
        'install',
      );
    }
    if (rd.committedEntries.length > 0) {
      w.log(`n${id} apply ${describeEntries(rd.committedEntries)}`);
      for (const e of rd.committedEntries) this.apply(node, e);
    }
    for (const rs of rd.readStates) {
      const ctx = decoder.decode(rs.context);
      w.stats.readsAnswered++;
      w.log(
        `n${id} read ${ctx} index=${rs.index} (issued with committed=${w.checker.readMinIndex(ctx) ?? '?'})`,
      );
      w.checker.observeReadState(id, ctx, rs.index);
    }

    // 4. Advance.
    w.core(node, 'advance', (raw) => raw.advance(rd));
    this.maybeSnapshot(node);
  }

  private persistSnapshot(node: SimNode, writerTerm: number, snap: Snapshot): void {
    const w = this.w;
    const before = durableTerms(node, snap.metadata.index + 1);
    w.storageOp(node, 'storage.applySnapshot', () => node.durable.applySnapshot(snap));
    w.checker.observeLogRewrite(node.id, writerTerm, before, node.view(), 'snapshot install');
    w.checker.observeSnapshot(node.id, node.durableHs.term, snap.metadata, KvApp.restore(snap.data).chain);
    w.log(`n${node.id} persist snapshot ${snap.metadata.index}/${snap.metadata.term}`);
  }

  private persistEntries(node: SimNode, writerTerm: number, entries: Entry[]): void {
    const w = this.w;
    const first = (entries[0] as Entry).index;
    const before = durableTerms(node, first);
    if (before.length > 0 && node.role === 'leader') {
      w.checker.observeLeaderRewrite(node.id, writerTerm, before, entries);
    }
    w.storageOp(node, 'storage.append', () => node.durable.append(entries));
    const view = node.view();
    if (before.length > 0) w.checker.observeLogRewrite(node.id, writerTerm, before, view, 'append');
    w.checker.observeAppended(node.id, entries, view);
    w.log(
      `n${node.id} persist ${describeEntries(entries)}${before.length > 0 ? ` (overwrote from ${first})` : ''}`,
    );
  }

  private persistHardState(node: SimNode, next: { term: number; vote: NodeId; commit: number }): void {
    const w = this.w;
    const prev = node.durableHs;
    const hs = w.o.bug === 'amnesia' ? { term: prev.term, vote: prev.vote, commit: next.commit } : next;
    const view = node.view();
    w.checker.observeHardState(node.id, prev, hs, view);
    node.durable.setHardState({ ...hs });
    node.durableHs = { ...hs };
    if (hs.commit > prev.commit) {
      w.checker.observeCommit(node.id, hs.term, prev.commit, hs.commit, view);
      if (node.role === 'leader') {
        const logs = new Map<NodeId, LogView>();
        for (const v of node.conf.voters) {
          const other = w.nodes.get(v);
          if (other) logs.set(v, other.view());
        }
        w.checker.observeCommitQuorum(node.id, hs.commit, node.conf.voters, logs);
      }
    }
    if (hs.term !== prev.term || hs.vote !== prev.vote) {
      w.log(`n${node.id} persist term=${hs.term} vote=${hs.vote} commit=${hs.commit}`);
    }
  }

  private apply(node: SimNode, e: Entry): void {
    const w = this.w;
    node.app.apply(e);
    if (e.type === 'conf') {
      const conf = w.core(node, 'applyConfChange', (raw) => raw.applyConfChange(e.change));
      if (conf) node.conf = copyConf(conf);
      w.log(
        `n${node.id} conf ${e.change.type} ${e.change.nodeId} -> voters=[${node.conf.voters}] learners=[${node.conf.learners}]`,
      );
      if (e.change.type === 'remove') this.processes.onRemoved(e.change.nodeId);
    }
    w.checker.observeApply(node.id, node.durableHs.term, e, node.app.chain);
  }

  /** Snapshots the state machine every `snapshotEvery` applied entries, keeping a trailing window. */
  private maybeSnapshot(node: SimNode): void {
    const w = this.w;
    const s = w.settings;
    const snapIndex = node.durable.snapshot().metadata.index;
    if (node.app.applied - snapIndex < s.snapshotEvery) return;
    const snap = w.storageOp(node, 'storage.createSnapshot at the applied index', () =>
      node.durable.createSnapshot(node.app.applied, copyConf(node.conf), node.app.serialize()),
    );
    if (snap === undefined) return;
    w.stats.snapshotsTaken++;
    w.checker.observeSnapshot(node.id, node.durableHs.term, snap.metadata, node.app.chain);
    const compactTo = node.app.applied - s.snapshotWindow;
    if (compactTo >= node.durable.firstIndex()) {
      w.storageOp(node, 'storage.compact', () => node.durable.compact(compactTo));
    }
    w.log(`n${node.id} snapshot at ${node.app.applied}, compacted to ${node.durable.firstIndex() - 1}`);
  }
}

/** (index, term) of every durable entry from `from` to the end of the log. */
function durableTerms(node: SimNode, from: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  const view = node.view();
  for (let i = Math.max(from, view.snapshotIndex + 1); i <= view.lastIndex; i++) {
    const t = view.term(i);
    if (t !== undefined) out.push([i, t]);
  }
  return out;
}
