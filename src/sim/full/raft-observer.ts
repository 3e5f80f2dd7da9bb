// Feeds the existing Raft safety checker (src/sim/checker.ts) from what the production node
// shows from outside: its durable storage (every save and snapshot, through a wrapper of the
// NodeStorage seam), its wire (every message the network carries) and its applied entries (the
// 'applied' and 'role' events, with the entries read back from its durable log).

import type { NodeStorage } from '../../node/seams.js';
import type { ConfState, Entry, HardState, Message, NodeId, Snapshot, Storage } from '../../raft/types.js';
import { InvariantViolation, type LogView, SafetyChecker } from '../checker.js';
import { chainNext, GENESIS_CHAIN } from '../kv-app.js';

interface NodeView {
  storage: Storage;
  durableHs: HardState;
  lastApplied: number;
  /** The node's role as of its last Ready (from its 'role' events). */
  leader: boolean;
  /** Reads the node's voters (FloeNode.status() copies a lot: cached until a conf entry or snapshot applies). */
  readVoters: () => readonly NodeId[];
  cachedVoters: readonly NodeId[] | undefined;
}

function votersOf(n: NodeView): readonly NodeId[] {
  n.cachedVoters ??= n.readVoters();
  return n.cachedVoters;
}

function viewOf(s: Storage): LogView {
  const snap = s.snapshot().metadata;
  return {
    snapshotIndex: snap.index,
    snapshotTerm: snap.term,
    lastIndex: s.lastIndex(),
    term: (i) => {
      if (i === snap.index) return snap.term;
      if (i < s.firstIndex() || i > s.lastIndex()) return undefined;
      try {
        return s.term(i);
      } catch {
        return undefined;
      }
    },
  };
}

export class RaftObserver {
  readonly checker = new SafetyChecker();
  private readonly nodes = new Map<NodeId, NodeView>();
  /** index → chain hash of the applied sequence up to it (first observer wins; the checker compares). */
  private readonly chains = new Map<number, string>([[0, GENESIS_CHAIN]]);
  private readonly nodeChain = new Map<NodeId, string>();

  /** Coverage: messages a node stepped while a snapshot it received was still being saved (issue 9 item 6). */
  stepsDuringSnapshotSave = 0;
  private readonly savingSnapshot = new Set<NodeId>();

  /** The network is about to hand `id` a message. */
  delivering(id: NodeId): void {
    if (this.savingSnapshot.has(id)) this.stepsDuringSnapshotSave++;
  }

  /** (index:term) → the resulting membership a conf entry carried when it was saved (for the FS-2 workaround). */
  private readonly resulting = new Map<string, ConfState>();

  constructor(
    private readonly trace: (line: string) => void,
    /** Called with the first broken invariant (the checker's InvariantViolation). */
    private readonly onViolation: (err: InvariantViolation) => void,
    /**
     * Workaround for finding FS-2 (the WAL drops a conf entry's resulting membership): entries
     * read back from a node's storage get it back, as a fixed WAL would return them.
     */
    private readonly restoreConfResulting = false,
  ) {}

  private patchedStorage(inner: Storage): Storage {
    if (!this.restoreConfResulting) return inner;
    const resulting = this.resulting;
    const patch = (e: Entry): Entry => {
      if (e.type !== 'conf' || e.change.resulting !== undefined) return e;
      const r = resulting.get(`${e.index}:${e.term}`);
      return r ? { ...e, change: { ...e.change, resulting: r } } : e;
    };
    return {
      initialState: () => inner.initialState(),
      entries: (lo, hi, maxBytes) => inner.entries(lo, hi, maxBytes).map(patch),
      term: (i) => inner.term(i),
      firstIndex: () => inner.firstIndex(),
      lastIndex: () => inner.lastIndex(),
      snapshot: () => inner.snapshot(),
    };
  }

  /** Checker calls happen inside production callbacks: a violation is reported, never thrown into them. */
  private check(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      if (err instanceof InvariantViolation) this.onViolation(err);
      else throw err;
    }
  }

  /**
   * A node process (re)started on `storage`. Its recovered hard state must not have gone back
   * (a cut WAL tail is fenced: the next term with an unknown vote, which is never a step back).
   */
  started(id: NodeId, storage: Storage, voters: () => readonly NodeId[]): void {
    const hs = storage.initialState().hardState;
    const prev = this.nodes.get(id);
    if (prev) {
      const p = prev.durableHs;
      if (hs.term < p.term || (hs.term === p.term && p.vote !== 0 && hs.vote !== p.vote)) {
        this.check(() =>
          this.checker.observeHardState(
            id,
            p,
            { ...hs, commit: Math.max(hs.commit, p.commit) },
            viewOf(storage),
          ),
        );
      }
    }
    const snap = storage.snapshot().metadata;
    this.nodes.set(id, {
      storage,
      durableHs: { ...hs },
      lastApplied: snap.index,
      leader: false,
      readVoters: voters,
      cachedVoters: undefined,
    });
    this.restored(id, snap.index, snap.term, 'restart');
  }

  private restored(id: NodeId, index: number, term: number, how: 'restart' | 'install'): void {
    const n = this.nodes.get(id)!;
    n.cachedVoters = undefined;
    const chain = index === 0 ? GENESIS_CHAIN : this.chains.get(index);
    n.lastApplied = index;
    if (chain === undefined) {
      // Nobody was seen applying up to here (cannot happen with every node observed): no chain check.
      this.trace(`observer: no chain known at ${index} for n${id}`);
      this.nodeChain.delete(id);
      return;
    }
    this.nodeChain.set(id, chain);
    this.check(() => this.checker.observeRestore(id, n.durableHs.term, index, term, chain, how));
  }

  /** The node became leader (its 'role' event) or stopped being it. */
  role(id: NodeId, isLeader: boolean, term: number): void {
    const n = this.nodes.get(id);
    if (!n) return;
    const was = n.leader;
    n.leader = isLeader;
    if (isLeader && !was) {
      this.trace(`n${id} leads term ${term} (voters ${votersOf(n).join(',')})`);
      this.check(() => this.checker.observeLeader(id, term, 'role'));
      this.check(() => this.checker.observeLeaderIsVoter(id, term, votersOf(n)));
      this.check(() => this.checker.observeLeaderLog(id, term, viewOf(n.storage)));
    }
  }

  /** The network carries `m` from its sender. */
  sent(m: Message): void {
    const n = this.nodes.get(m.from);
    if (!n) return;
    if (m.type === 'voteResp' && !m.reject && m.term < n.durableHs.term) {
      // One Ready may hold a grant for term t and, after a later message in the same batch, the
      // hard state of a higher term (the production loop steps messages while a save is in flight).
      // The durable higher term already rules out a second vote in t: only the double-vote check applies.
      this.check(() => this.checker.observeVoteGrant(m.from, m.to, m.term));
      return;
    }
    this.check(() => this.checker.observeSend(m, n.durableHs));
  }

  /** The node applied everything up to `applied` (its 'applied' event). */
  applied(id: NodeId, applied: number): void {
    const n = this.nodes.get(id);
    if (!n || applied <= n.lastApplied) return;
    const s = n.storage;
    const from = n.lastApplied + 1;
    if (from < s.firstIndex()) {
      this.trace(`observer: n${id} applied ${from}..${applied} but its log starts at ${s.firstIndex()}`);
      n.lastApplied = applied;
      this.nodeChain.delete(id);
      return;
    }
    const entries: Entry[] = s.entries(from, applied + 1);
    const term = n.durableHs.term;
    let chain = this.nodeChain.get(id);
    for (const e of entries) {
      if (e.type === 'conf') n.cachedVoters = undefined;
      if (chain !== undefined) {
        const c = chainNext(chain, e);
        chain = c;
        if (!this.chains.has(e.index)) this.chains.set(e.index, c);
        this.check(() => this.checker.observeApply(id, term, e, c));
      }
    }
    if (chain !== undefined) this.nodeChain.set(id, chain);
    n.lastApplied = applied;
  }

  /** Wraps a node's storage so that every durable write is checked. */
  wrap(id: NodeId, inner: NodeStorage & { storage: Storage }): NodeStorage {
    const obs = this;
    const readSide = this.patchedStorage(inner.storage);
    return {
      get storage() {
        return readSide;
      },
      async save(batch, opts) {
        for (const e of batch.entries) {
          if (e.type === 'conf' && e.change.resulting)
            obs.resulting.set(`${e.index}:${e.term}`, e.change.resulting);
        }
        const n = obs.nodes.get(id);
        const writerTerm = batch.hardState?.term ?? n?.durableHs.term ?? 0;
        const snap = batch.snapshot && batch.snapshot.metadata.index > 0 ? batch.snapshot : undefined;
        const beforeSnap = n && snap ? obs.durableTerms(n, snap.metadata.index + 1) : [];
        const first = batch.entries[0]?.index;
        const beforeEntries = n && first !== undefined ? obs.durableTerms(n, first) : [];
        if (n && beforeEntries.length > 0 && n.leader) {
          obs.check(() => obs.checker.observeLeaderRewrite(id, writerTerm, beforeEntries, batch.entries));
        }
        if (snap) obs.savingSnapshot.add(id);
        try {
          await inner.save(batch, opts);
        } finally {
          if (snap) obs.savingSnapshot.delete(id);
        }
        if (!n) return;
        const view = viewOf(n.storage);
        if (snap) obs.savedSnapshot(id, n, writerTerm, snap, beforeSnap, view);
        if (batch.entries.length > 0) {
          if (beforeEntries.length > 0)
            obs.check(() => obs.checker.observeLogRewrite(id, writerTerm, beforeEntries, view, 'append'));
          obs.check(() => obs.checker.observeAppended(id, batch.entries, view));
        }
        if (batch.hardState) obs.savedHardState(id, n, batch.hardState, view);
      },
      async createSnapshot(index: number, conf: ConfState, data: Uint8Array) {
        await inner.createSnapshot(index, conf, data);
        const n = obs.nodes.get(id);
        const chain = obs.chains.get(index);
        if (n && chain !== undefined) {
          const meta = n.storage.snapshot().metadata;
          if (meta.index === index)
            obs.check(() => obs.checker.observeSnapshot(id, n.durableHs.term, meta, chain));
        }
      },
      ...(inner.checkLock ? { checkLock: () => inner.checkLock!() } : {}),
      close: () => inner.close(),
    };
  }

  private savedSnapshot(
    id: NodeId,
    n: NodeView,
    writerTerm: number,
    snap: Snapshot,
    before: Array<[number, number]>,
    view: LogView,
  ): void {
    this.check(() => this.checker.observeLogRewrite(id, writerTerm, before, view, 'snapshot install'));
    const chain = this.chains.get(snap.metadata.index);
    if (chain !== undefined)
      this.check(() => this.checker.observeSnapshot(id, n.durableHs.term, snap.metadata, chain));
    // The node restores its state machine from it right after the save, if it is ahead.
    if (snap.metadata.index > n.lastApplied)
      this.restored(id, snap.metadata.index, snap.metadata.term, 'install');
  }

  private savedHardState(id: NodeId, n: NodeView, hs: HardState, view: LogView): void {
    const prev = n.durableHs;
    this.check(() => this.checker.observeHardState(id, prev, hs, view));
    n.durableHs = { ...hs };
    if (hs.commit > prev.commit) {
      this.check(() => this.checker.observeCommit(id, hs.term, prev.commit, hs.commit, view));
      if (n.leader) {
        const voters = votersOf(n);
        const logs = new Map<NodeId, LogView>();
        for (const v of voters) {
          const other = this.nodes.get(v);
          if (other) logs.set(v, viewOf(other.storage));
        }
        this.check(() => this.checker.observeCommitQuorum(id, hs.commit, voters, logs));
      }
    }
  }

  /** (index, term) of every durable entry of the node from `from` on. */
  private durableTerms(n: NodeView, from: number): Array<[number, number]> {
    const s = n.storage;
    const out: Array<[number, number]> = [];
    for (let i = Math.max(from, s.firstIndex()); i <= s.lastIndex(); i++) out.push([i, s.term(i)]);
    return out;
  }
}
