// The caller-facing wrapper: feeds inputs to the state machine and hands out its outputs as a Ready.
//
// Contract (see docs/raft-core.md):
//   while (node.hasReady()) {
//     const rd = node.ready();
//     persist rd.hardState, rd.snapshot, rd.entries   (durably if rd.mustSync)
//     send rd.messages
//     apply rd.snapshot, then rd.committedEntries (calling applyConfChange for conf entries);
//       serve rd.readStates once applied >= their index
//     node.advance(rd);
//   }
// Guarantees:
//   - every message in a Ready depends only on state that is in that Ready or in an earlier one
//     (so "persist, then send" is enough: a vote is never sent before the vote is durable);
//   - every entry in committedEntries was persisted by an earlier Ready (already advanced);
//   - committedEntries is empty while a snapshot is pending (the snapshot comes first).

import { Raft } from './raft.js';
import type {
  ConfChange,
  ConfState,
  Entry,
  EntryPosition,
  HardState,
  Message,
  NodeId,
  RaftConfig,
  Ready,
  Role,
  SoftState,
  Status,
  Storage,
} from './types.js';

export class RawNode {
  private readonly raft: Raft;
  private prevSoft: SoftState;
  private prevHard: HardState;
  private outstanding: Ready | undefined;

  constructor(config: RaftConfig, storage: Storage) {
    this.raft = new Raft(config, storage);
    this.prevSoft = { lead: this.raft.lead, role: this.raft.role };
    this.prevHard = this.hardState();
  }

  get id(): NodeId {
    return this.raft.id;
  }

  /** The current term (cheaper than status()). */
  get term(): number {
    return this.raft.term;
  }

  /** The current role (cheaper than status()). */
  get role(): Role {
    return this.raft.role;
  }

  tick(): void {
    this.raft.tick();
  }

  /**
   * Leader lease: ticks of this node during which no other leader can exist (0 without `leaderLease`, when not the
   * leader, before this term's first commit, or once a leadership transfer started). Cheaper than status().
   */
  leaseRemainingTicks(): number {
    return this.raft.leaseRemainingTicks();
  }

  step(msg: Message): void {
    this.raft.step(msg);
  }

  /**
   * Proposes one entry. Returns where it landed in this leader's log: (term, index) names one entry
   * for ever (Log Matching), so a caller can tell its own entry from any other applied at that index.
   */
  propose(data: Uint8Array): EntryPosition {
    const e: Entry = { type: 'normal', term: 0, index: 0, data };
    this.raft.propose([e]);
    return { term: e.term, index: e.index };
  }

  /** Proposes several entries at once (they succeed or fail together). */
  proposeBatch(data: readonly Uint8Array[]): void {
    if (data.length === 0) return;
    const ents: Entry[] = new Array(data.length);
    for (let i = 0; i < data.length; i++) {
      ents[i] = { type: 'normal', term: 0, index: 0, data: data[i] as Uint8Array };
    }
    this.raft.propose(ents);
  }

  proposeConfChange(cc: ConfChange): void {
    this.raft.proposeConfChange(cc);
  }

  campaign(): void {
    this.raft.campaignRequested();
  }

  transferLeadership(to: NodeId): void {
    this.raft.transferLeadership(to);
  }

  readIndex(context: Uint8Array): void {
    this.raft.readIndex(context);
  }

  applyConfChange(cc: ConfChange): ConfState {
    return this.raft.applyConfChange(cc);
  }

  reportUnreachable(id: NodeId): void {
    this.raft.reportUnreachable(id);
  }

  reportSnapshot(id: NodeId, ok: boolean): void {
    this.raft.reportSnapshot(id, ok);
  }

  private hardState(): HardState {
    return { term: this.raft.term, vote: this.raft.vote, commit: this.raft.log.committed };
  }

  hasReady(): boolean {
    const r = this.raft;
    r.flushAppends();
    if (r.msgs.length > 0 || r.readStates.length > 0) return true;
    const log = r.log;
    if (log.unstable.entries.length > 0 || log.unstable.snapshot !== undefined) return true;
    if (r.lead !== this.prevSoft.lead || r.role !== this.prevSoft.role) return true;
    const h = this.prevHard;
    if (r.term !== h.term || r.vote !== h.vote || log.committed !== h.commit) return true;
    // Between ready() and advance() the committed entries handed out are not yet applied.
    return this.outstanding === undefined && log.hasNextCommittedEntries();
  }

  ready(): Ready {
    if (this.outstanding !== undefined) {
      throw new Error('raft: ready() called again before advance() for the previous Ready');
    }
    const r = this.raft;
    r.flushAppends();
    const log = r.log;
    const rd: Ready = {
      entries: log.unstable.entries.slice(),
      messages: r.msgs,
      committedEntries: log.nextCommittedEntries(r.cfg.maxCommittedEntriesPerReady),
      readStates: r.readStates,
      mustSync: false,
    };
    r.msgs = [];
    r.readStates = [];
    if (r.lead !== this.prevSoft.lead || r.role !== this.prevSoft.role) {
      this.prevSoft = { lead: r.lead, role: r.role };
      rd.softState = this.prevSoft;
    }
    const h = this.prevHard;
    const termOrVoteChanged = r.term !== h.term || r.vote !== h.vote;
    if (termOrVoteChanged || log.committed !== h.commit) {
      this.prevHard = this.hardState();
      rd.hardState = this.prevHard;
    }
    if (log.unstable.snapshot !== undefined) rd.snapshot = log.unstable.snapshot;
    rd.mustSync = termOrVoteChanged || rd.entries.length > 0 || rd.snapshot !== undefined;
    this.outstanding = rd;
    return rd;
  }

  advance(rd: Ready): void {
    if (rd !== this.outstanding) {
      throw new Error('raft: advance() must be given the Ready returned by the last ready()');
    }
    this.outstanding = undefined;
    const log = this.raft.log;
    const lastEntry = rd.entries[rd.entries.length - 1];
    if (lastEntry !== undefined) log.unstable.stableTo(lastEntry.index, lastEntry.term);
    if (rd.snapshot !== undefined) {
      log.unstable.stableSnapTo(rd.snapshot.metadata.index);
      log.appliedTo(rd.snapshot.metadata.index);
    }
    const lastApplied = rd.committedEntries[rd.committedEntries.length - 1];
    if (lastApplied !== undefined) {
      log.appliedTo(lastApplied.index);
      this.raft.reduceUncommitted(rd.committedEntries);
    }
    this.raft.onPersisted();
  }

  status(): Status {
    const r = this.raft;
    const st: Status = {
      id: r.id,
      role: r.role,
      lead: r.lead,
      term: r.term,
      vote: r.vote,
      commit: r.log.committed,
      applied: r.log.applied,
      lastIndex: r.log.lastIndex(),
      conf: r.tracker.confState(),
      leadTransferee: r.leadTransferee,
    };
    if (r.role === 'leader') {
      const progress: NonNullable<Status['progress']> = {};
      for (const [id, pr] of r.tracker.progress) {
        progress[id] = { match: pr.match, next: pr.next, state: pr.state, recentActive: pr.recentActive };
      }
      st.progress = progress;
      if (r.cfg.leaderLease) {
        const remaining = r.leaseRemainingTicks();
        st.leaseValid = remaining > 0;
        st.leaseRemainingTicks = remaining;
      }
    }
    return st;
  }
}
