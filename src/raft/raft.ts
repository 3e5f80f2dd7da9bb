// The Raft protocol as a deterministic state machine: roles, elections, replication, commitment,
// snapshots, membership, leadership transfer, ReadIndex and lease bookkeeping.
// Inputs are tick() and step(message) (plus local requests); outputs accumulate in `msgs` and
// `readStates` and are collected by RawNode into a Ready. No clock, no I/O, no randomness of its own.

import { type ResolvedConfig, resolveConfig } from './config.js';
import type { Progress } from './progress.js';
import { payloadSize, RaftLog } from './raft-log.js';
import { ReadOnly } from './read-only.js';
import { ProgressTracker } from './tracker.js';
import {
  type AppendMessage,
  type AppendResponse,
  type ConfChange,
  type ConfState,
  type Entry,
  type HeartbeatMessage,
  type HeartbeatResponse,
  InvalidConfChangeError,
  type Message,
  NONE,
  type NodeId,
  ProposalDroppedError,
  type RaftConfig,
  type ReadIndexRequest,
  type ReadState,
  type Role,
  type SnapshotMessage,
  type Storage,
  type VoteRequest,
  type VoteResponse,
} from './types.js';

const EMPTY_BYTES = new Uint8Array(0);

type CampaignKind = 'preElection' | 'election' | 'transfer';

export class Raft {
  readonly id: NodeId;
  readonly cfg: ResolvedConfig;
  readonly log: RaftLog;
  readonly tracker: ProgressTracker;

  term = 0;
  vote: NodeId = NONE;
  lead: NodeId = NONE;
  role: Role = 'follower';

  /** Outgoing messages, collected by RawNode.ready(). */
  msgs: Message[] = [];
  /** Answered ReadIndex requests, collected by RawNode.ready(). */
  readStates: ReadState[] = [];

  leadTransferee: NodeId = NONE;
  /** Index of the latest conf change the leader appended; another waits until it is applied. */
  pendingConfIndex = 0;
  /** Payload bytes the leader appended and has not yet seen applied. */
  uncommittedSize = 0;

  /** Logical clock: ticks since this node started. */
  tickCount = 0;
  /**
   * The tick at which this node last stepped a message from the leader of its term (append, heartbeat, snapshot):
   * with leasePromise it refuses votes until E ticks after it, whatever happens to its term meanwhile.
   */
  private leaderHeardTick = Number.NEGATIVE_INFINITY;
  private electionElapsed = 0;
  private heartbeatElapsed = 0;
  private randomizedElectionTimeout = 0;

  private readOnly = new ReadOnly();
  /** Reads that arrived before this leader committed an entry of its own term. */
  private pendingReadIndex: ReadIndexRequest[] = [];
  /** Set once the leader sends timeoutNow: a transferee may win without respecting anyone's lease. */
  private transferStartedThisTerm = false;
  /** New entries were appended by proposals: ship them at the next Ready (batches many proposals). */
  private appendPending = false;

  constructor(config: RaftConfig, storage: Storage) {
    this.cfg = resolveConfig(config);
    this.id = this.cfg.id;
    this.log = new RaftLog(storage);
    this.tracker = new ProgressTracker(this.cfg.maxInflightMessages, this.cfg.maxInflightBytes);

    const { hardState, conf } = storage.initialState();
    const first = this.log.firstIndex();
    const last = this.log.lastIndex();
    // A commit index below the snapshot is fine (the snapshot was persisted, the hard state that came
    // with it was not: the snapshot is committed by definition). One beyond the log means lost entries.
    if (hardState.commit > last) {
      throw new Error(
        `raft: stored commit ${hardState.commit} is outside the stored log [${first - 1}, ${last}]`,
      );
    }
    this.tracker.setConf(conf, last);
    this.becomeFollower(hardState.term, NONE);
    this.vote = hardState.vote;
    // The snapshot may be newer than firstIndex - 1 (a trailing window of entries is kept after it):
    // its state is committed and, unless told otherwise, already applied.
    const snapIndex = storage.snapshot().metadata.index;
    if (snapIndex > last)
      throw new Error(`raft: stored snapshot ${snapIndex} is beyond the stored log (${last})`);
    this.log.commitTo(Math.max(hardState.commit, snapIndex));
    const applied = this.cfg.applied ?? snapIndex;
    if (applied < first - 1 || applied > this.log.committed) {
      throw new Error(`raft: config.applied ${applied} must be in [${first - 1}, ${this.log.committed}]`);
    }
    this.log.appliedTo(applied);
  }

  // ---------------------------------------------------------------------------------------------
  // Role transitions
  // ---------------------------------------------------------------------------------------------

  private reset(term: number): void {
    if (this.term !== term) {
      this.term = term;
      this.vote = NONE;
    }
    this.lead = NONE;
    this.electionElapsed = 0;
    this.heartbeatElapsed = 0;
    this.randomizedElectionTimeout = this.cfg.electionTicks + this.cfg.random(this.cfg.electionTicks);
    this.leadTransferee = NONE;
    this.tracker.resetVotes();
    this.tracker.resetProgress(this.log.lastIndex());
    const self = this.tracker.progress.get(this.id);
    if (self !== undefined) self.match = this.log.stableIndex();
    this.pendingConfIndex = 0;
    this.uncommittedSize = 0;
    this.readOnly = new ReadOnly();
    this.pendingReadIndex = [];
    this.transferStartedThisTerm = false;
    this.appendPending = false;
  }

  becomeFollower(term: number, lead: NodeId): void {
    this.reset(term);
    this.lead = lead;
    this.role = 'follower';
  }

  private becomePreCandidate(): void {
    // Pre-vote changes neither term nor vote: a node that cannot win leaves no trace.
    this.role = 'preCandidate';
    this.tracker.resetVotes();
    this.lead = NONE;
  }

  private becomeCandidate(): void {
    this.reset(this.term + 1);
    this.vote = this.id;
    this.role = 'candidate';
  }

  private becomeLeader(): void {
    this.reset(this.term);
    this.lead = this.id;
    this.role = 'leader';
    const self = this.tracker.progress.get(this.id);
    if (self !== undefined) {
      self.becomeReplicate();
      self.recentActive = true;
    }
    // The no-op entry of §5.4.2 / §8: entries of earlier terms commit only once it does. Conf changes
    // and reads wait for it too (pendingConfIndex, committedEntryInCurrentTerm).
    this.appendEntries([{ type: 'normal', term: 0, index: 0, data: EMPTY_BYTES }]);
    this.pendingConfIndex = this.log.lastIndex();
  }

  // ---------------------------------------------------------------------------------------------
  // Time
  // ---------------------------------------------------------------------------------------------

  tick(): void {
    this.tickCount++;
    if (this.role === 'leader') this.tickHeartbeat();
    else this.tickElection();
  }

  private tickElection(): void {
    this.electionElapsed++;
    if (this.promotable() && this.electionElapsed >= this.randomizedElectionTimeout) {
      this.electionElapsed = 0;
      this.hup(this.cfg.preVote ? 'preElection' : 'election');
    }
  }

  private tickHeartbeat(): void {
    this.heartbeatElapsed++;
    this.electionElapsed++;
    if (this.electionElapsed >= this.cfg.electionTicks) {
      this.electionElapsed = 0;
      if (this.cfg.checkQuorum) {
        if (!this.tracker.quorumActive(this.id)) {
          this.becomeFollower(this.term, NONE);
          return;
        }
        for (const [id, pr] of this.tracker.progress) if (id !== this.id) pr.recentActive = false;
      }
      // A transfer that did not finish within an election timeout is abandoned.
      if (this.leadTransferee !== NONE) this.leadTransferee = NONE;
    }
    if (this.heartbeatElapsed >= this.cfg.heartbeatTicks) {
      this.heartbeatElapsed = 0;
      this.bcastHeartbeat(this.readOnly.lastPendingContext() ?? EMPTY_BYTES);
    }
  }

  /**
   * True while this node believes a leader is alive: it heard from one within the last election
   * timeout (or, with leasePromise, it started less than an election timeout ago and may have promised
   * a lease before it restarted). Such a node refuses non-transfer (pre-)votes.
   */
  inLease(): boolean {
    if (!this.cfg.checkQuorum) return false;
    if (this.lead !== NONE && this.electionElapsed < this.cfg.electionTicks) return true;
    return this.promiseHolds();
  }

  /**
   * leasePromise: this node may have acknowledged a leader's message less than an election timeout ago (it stepped
   * one, or it started less than one ago and a previous process may have). Kept as a tick deadline, not in `lead`:
   * a newer term learnt from any other message (a stale vote rejection, a late response) clears `lead` but not
   * the promise (review of decision 0009, stop 34).
   */
  private promiseHolds(): boolean {
    if (!this.cfg.leasePromise) return false;
    return this.tickCount < Math.max(0, this.leaderHeardTick) + this.cfg.electionTicks;
  }

  /**
   * Leader lease: ticks left during which no other leader can exist. A quorum acknowledged messages
   * sent at tick T; each of those voters refuses votes until electionTicks of its own ticks after it
   * received them (>= T), so none can help elect anyone before T + electionTicks. The margin absorbs
   * follower clocks that tick faster than ours. 0 when not leader, before this term's no-op commits,
   * or once a leadership transfer started this term (a transferee is allowed to ignore leases).
   */
  leaseRemainingTicks(): number {
    if (!this.cfg.leaderLease || this.role !== 'leader') return 0;
    if (this.transferStartedThisTerm || this.leadTransferee !== NONE) return 0;
    if (!this.committedEntryInCurrentTerm()) return 0;
    const acked = this.tracker.quorumAckedSentTick(this.id, this.tickCount);
    const remaining = acked + this.cfg.electionTicks - this.cfg.leaseMarginTicks - this.tickCount;
    return Math.max(remaining, 0);
  }

  // ---------------------------------------------------------------------------------------------
  // Elections
  // ---------------------------------------------------------------------------------------------

  private soleVoter(): boolean {
    const v = this.tracker.voters;
    return v.size === 1 && v.has(this.id);
  }

  /** Only voters can become leader; learners and removed nodes never campaign. */
  promotable(): boolean {
    return this.tracker.voters.has(this.id);
  }

  /**
   * campaign() from the API: ignored where it could break a lease the leader relies on. A sole voter too, unless the
   * caller vouches that its leaders stop relying on their lease once they propose their own removal
   * (`soleVoterSkipsPromise`): a leader of {X, L} removing itself may count X's acknowledgements until it applies its
   * removal, which X, restarted with {X}, may have applied first (review 2 of stop 34).
   */
  campaignRequested(): void {
    if (this.cfg.leasePromise && this.inLease() && !(this.cfg.soleVoterSkipsPromise && this.soleVoter()))
      return;
    this.hup(this.cfg.preVote ? 'preElection' : 'election');
  }

  hup(kind: CampaignKind): void {
    if (this.role === 'leader' || !this.promotable()) return;
    // A committed but unapplied conf change could change who votes: wait until it is applied.
    if (this.hasUnappliedConfChange()) return;
    this.campaign(kind);
  }

  private hasUnappliedConfChange(): boolean {
    if (this.log.committed <= this.log.applied) return false;
    // Entries below a received snapshot that is still being saved are covered by it (the tracker
    // already holds its membership) and are no longer readable: start after it.
    let lo = Math.max(this.log.applied + 1, this.log.firstIndex());
    const hi = this.log.committed + 1;
    while (lo < hi) {
      const ents = this.log.slice(lo, Math.min(hi, lo + 1024), Number.POSITIVE_INFINITY);
      for (const e of ents) if (e.type === 'conf') return true;
      lo += ents.length;
    }
    return false;
  }

  private campaign(kind: CampaignKind): void {
    let type: 'vote' | 'preVote';
    let term: number;
    if (kind === 'preElection') {
      this.becomePreCandidate();
      type = 'preVote';
      // Ask with the term we would use, without adopting it yet.
      term = this.term + 1;
    } else {
      this.becomeCandidate();
      type = 'vote';
      term = this.term;
    }
    if (this.poll(this.id, true) === 'won') {
      // A single-voter cluster wins at once.
      if (kind === 'preElection') this.campaign('election');
      else this.becomeLeader();
      return;
    }
    const lastIndex = this.log.lastIndex();
    const lastTerm = this.log.lastTerm();
    for (const id of this.tracker.voters) {
      if (id === this.id) continue;
      const m: VoteRequest = {
        type,
        from: this.id,
        to: id,
        term,
        lastIndex,
        lastTerm,
        transfer: kind === 'transfer',
      };
      this.msgs.push(m);
    }
  }

  private poll(id: NodeId, granted: boolean): 'won' | 'lost' | 'pending' {
    this.tracker.recordVote(id, granted);
    return this.tracker.tallyVotes();
  }

  private handleVoteRequest(m: VoteRequest): void {
    const respType = m.type === 'vote' ? 'voteResp' : 'preVoteResp';
    // A request of our own term that did not pass step()'s lease check: a term learnt without a leader (a stale
    // rejection) leaves us free to vote in it, but not inside a promise (a repeated request of a candidate of it).
    if (!m.transfer && this.vote !== m.from && this.promiseHolds()) {
      this.send<VoteResponse>({ type: respType, from: this.id, to: m.from, term: this.term, reject: true });
      return;
    }
    const canVote =
      this.vote === m.from ||
      (this.vote === NONE && this.lead === NONE) ||
      (m.type === 'preVote' && m.term > this.term);
    if (canVote && this.log.isUpToDate(m.lastIndex, m.lastTerm)) {
      // Reply with the request's term: for a pre-vote our own term may be older, and the
      // candidate ignores answers from older terms.
      this.send<VoteResponse>({ type: respType, from: this.id, to: m.from, term: m.term, reject: false });
      if (m.type === 'vote') {
        this.electionElapsed = 0;
        this.vote = m.from;
      }
    } else {
      this.send<VoteResponse>({ type: respType, from: this.id, to: m.from, term: this.term, reject: true });
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Step: every message from a peer
  // ---------------------------------------------------------------------------------------------

  step(m: Message): void {
    if (m.to !== this.id || m.from === this.id) return;
    if (m.term > this.term) {
      if (m.type === 'vote' || m.type === 'preVote') {
        // Leader stickiness (§4.2.3 of the thesis): while we hear from a live leader, ignore
        // candidates, unless the leader itself asked for this election (transfer).
        if (!m.transfer && this.inLease()) return;
      }
      if (m.type === 'preVote') {
        // Never change our term because of a pre-vote.
      } else if (m.type === 'preVoteResp' && !m.reject) {
        // A granted pre-vote carries the term we asked for; we adopt it only by winning.
      } else if (m.type === 'app' || m.type === 'heartbeat' || m.type === 'snap') {
        this.becomeFollower(m.term, m.from);
      } else {
        this.becomeFollower(m.term, NONE);
      }
    } else if (m.term < this.term) {
      if (m.type === 'heartbeat' || m.type === 'app') {
        // A leader from an older term (e.g. one that was partitioned): tell it our term so it steps
        // down. Without this it might never learn of the newer term (with check-quorum/pre-vote
        // nobody disrupts it; with both off the simulator found elections stuck: finding F3).
        this.send<AppendResponse>({
          type: 'appResp',
          from: this.id,
          to: m.from,
          term: this.term,
          index: 0,
          reject: false,
          rejectHint: 0,
          logTermHint: 0,
        });
      } else if (m.type === 'preVote' || m.type === 'vote') {
        // Reject with our term (Raft §5.1: "reply false if term < currentTerm", with currentTerm).
        // Staying silent to a lower-term vote can deadlock elections when pre-vote is off: a
        // stale-config voter at a high term never grants, and the candidates never learn its term
        // (simulator finding F3, seed 100791).
        this.send<VoteResponse>({
          type: m.type === 'preVote' ? 'preVoteResp' : 'voteResp',
          from: this.id,
          to: m.from,
          term: this.term,
          reject: true,
        });
      }
      return;
    }

    if (m.type === 'vote' || m.type === 'preVote') {
      this.handleVoteRequest(m);
      return;
    }
    // The leader of this term (a higher one made us its follower above): the promise runs from now.
    if ((m.type === 'app' || m.type === 'heartbeat' || m.type === 'snap') && this.role !== 'leader')
      this.leaderHeardTick = this.tickCount;
    switch (this.role) {
      case 'leader':
        this.stepLeader(m);
        break;
      case 'candidate':
      case 'preCandidate':
        this.stepCandidate(m);
        break;
      case 'follower':
        this.stepFollower(m);
        break;
    }
  }

  private stepFollower(m: Message): void {
    switch (m.type) {
      case 'app':
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleAppend(m);
        break;
      case 'heartbeat':
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleHeartbeat(m);
        break;
      case 'snap':
        this.electionElapsed = 0;
        this.lead = m.from;
        this.handleSnapshot(m);
        break;
      case 'timeoutNow':
        // Leadership transfer: campaign at once, skipping pre-vote, bypassing leases.
        this.hup('transfer');
        break;
      case 'readIndexResp':
        this.readStates.push({ index: m.index, context: m.context });
        break;
      default:
        // readIndex requests sent to a non-leader, stale responses: nothing to do.
        break;
    }
  }

  private stepCandidate(m: Message): void {
    const myResp = this.role === 'preCandidate' ? 'preVoteResp' : 'voteResp';
    switch (m.type) {
      case 'app':
        this.becomeFollower(m.term, m.from);
        this.handleAppend(m);
        break;
      case 'heartbeat':
        this.becomeFollower(m.term, m.from);
        this.handleHeartbeat(m);
        break;
      case 'snap':
        this.becomeFollower(m.term, m.from);
        this.handleSnapshot(m);
        break;
      case 'voteResp':
      case 'preVoteResp': {
        if (m.type !== myResp) break;
        const res = this.poll(m.from, !m.reject);
        if (res === 'won') {
          if (this.role === 'preCandidate') this.campaign('election');
          else {
            this.becomeLeader();
            this.bcastAppend();
          }
        } else if (res === 'lost') {
          this.becomeFollower(this.term, NONE);
        }
        break;
      }
      default:
        break;
    }
  }

  private stepLeader(m: Message): void {
    if (m.type === 'readIndex') {
      this.leaderReadIndex(m);
      return;
    }
    const pr = this.tracker.progress.get(m.from);
    if (pr === undefined) return; // not a member (removed, or not yet added): ignore
    switch (m.type) {
      case 'appResp':
        this.handleAppendResponse(m, pr);
        break;
      case 'heartbeatResp':
        this.handleHeartbeatResponse(m, pr);
        break;
      default:
        break;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Follower side of replication
  // ---------------------------------------------------------------------------------------------

  private handleAppend(m: AppendMessage): void {
    const resp: AppendResponse = {
      type: 'appResp',
      from: this.id,
      to: m.from,
      term: this.term,
      index: 0,
      reject: false,
      rejectHint: 0,
      logTermHint: 0,
      sentTick: m.sentTick,
    };
    if (m.logIndex < this.log.committed) {
      // Everything up to commit is known to match: tell the leader where we really are.
      resp.index = this.log.committed;
    } else {
      const lastNew = this.log.maybeAppend(m.logIndex, m.logTerm, m.commit, m.entries);
      if (lastNew >= 0) {
        resp.index = lastNew;
      } else {
        // Reject with a hint: the last index <= logIndex whose term is <= the leader's term there.
        const [hintIndex, hintTerm] = this.log.findConflictByTerm(
          Math.min(m.logIndex, this.log.lastIndex()),
          m.logTerm,
        );
        resp.index = m.logIndex;
        resp.reject = true;
        resp.rejectHint = hintIndex;
        resp.logTermHint = hintTerm;
      }
    }
    this.msgs.push(resp);
  }

  private handleHeartbeat(m: HeartbeatMessage): void {
    this.log.commitTo(m.commit);
    this.send<HeartbeatResponse>({
      type: 'heartbeatResp',
      from: this.id,
      to: m.from,
      term: this.term,
      context: m.context,
      sentTick: m.sentTick,
    });
  }

  private handleSnapshot(m: SnapshotMessage): void {
    const restored = this.restore(m);
    this.send<AppendResponse>({
      type: 'appResp',
      from: this.id,
      to: m.from,
      term: this.term,
      index: restored ? this.log.lastIndex() : this.log.committed,
      reject: false,
      rejectHint: 0,
      logTermHint: 0,
    });
  }

  /** Installs a snapshot unless it is stale or our log already contains its last entry. */
  private restore(m: SnapshotMessage): boolean {
    const meta = m.snapshot.metadata;
    // Older than what we know is committed: nothing to learn.
    if (meta.index <= this.log.committed) return false;
    if (this.log.matchTerm(meta.index, meta.term)) {
      // We hold the snapshot's last entry, hence (Log Matching) everything before it: keep our log,
      // including any suffix after it, and just advance commit.
      this.log.commitTo(meta.index);
      return false;
    }
    this.log.restore(m.snapshot);
    this.tracker.setConf(meta.conf, this.log.lastIndex());
    return true;
  }

  // ---------------------------------------------------------------------------------------------
  // Leader side of replication
  // ---------------------------------------------------------------------------------------------

  private send<M extends Message>(m: M): void {
    this.msgs.push(m);
  }

  /** Appends entries proposed on this leader, assigning term and index. */
  private appendEntries(ents: Entry[]): void {
    let li = this.log.lastIndex();
    for (const e of ents) {
      e.term = this.term;
      e.index = ++li;
    }
    this.log.append(ents);
    // Our own acknowledgement arrives in advance(), once the caller has persisted them.
  }

  private addUncommitted(ents: Entry[]): boolean {
    let size = 0;
    for (const e of ents) size += payloadSize(e);
    // Always accept something when nothing is outstanding, or a large entry could never get in.
    if (this.uncommittedSize > 0 && this.uncommittedSize + size > this.cfg.maxUncommittedBytes) return false;
    this.uncommittedSize += size;
    return true;
  }

  reduceUncommitted(ents: readonly Entry[]): void {
    if (this.role !== 'leader') return;
    let size = 0;
    for (const e of ents) size += payloadSize(e);
    this.uncommittedSize = size > this.uncommittedSize ? 0 : this.uncommittedSize - size;
  }

  private maybeCommit(): boolean {
    return this.log.maybeCommit(this.tracker.committedIndex(), this.term);
  }

  committedEntryInCurrentTerm(): boolean {
    return this.log.termAt(this.log.committed) === this.term;
  }

  /** Sends entries to a follower if flow control allows. Returns whether a message was sent. */
  private maybeSendAppend(to: NodeId, pr: Progress, sendIfEmpty: boolean): boolean {
    if (pr.isPaused()) return false;
    const prevIndex = pr.next - 1;
    if (prevIndex < this.log.firstIndex() - 1) return this.sendSnapshot(to, pr);
    const prevTerm = this.log.termAt(prevIndex);
    if (prevTerm === undefined) {
      throw new Error(
        `raft: progress of ${to} points past the log (next ${pr.next}, last ${this.log.lastIndex()})`,
      );
    }
    const ents = this.log.entriesFrom(pr.next, this.cfg.maxMessageBytes, this.cfg.maxEntriesPerMessage);
    if (ents.length === 0 && !sendIfEmpty) return false;
    let bytes = 0;
    for (let i = 0; i < ents.length; i++) bytes += payloadSize(ents[i] as Entry);
    const m: AppendMessage = {
      type: 'app',
      from: this.id,
      to,
      term: this.term,
      logIndex: prevIndex,
      logTerm: prevTerm,
      entries: ents,
      commit: this.log.committed,
      sentTick: this.tickCount,
    };
    this.msgs.push(m);
    pr.sentAppend(ents.length, prevIndex + ents.length, bytes);
    return true;
  }

  private sendSnapshot(to: NodeId, pr: Progress): boolean {
    // Do not ship a (possibly large) snapshot to a member we have not heard from lately.
    if (!pr.recentActive) return false;
    const snapshot = this.log.snapshot();
    pr.becomeSnapshot(snapshot.metadata.index);
    this.send<SnapshotMessage>({ type: 'snap', from: this.id, to, term: this.term, snapshot });
    return true;
  }

  /** Sends as much as flow control allows to one follower. */
  private sendAppendLoop(to: NodeId, pr: Progress, sendIfEmpty: boolean): void {
    if (!this.maybeSendAppend(to, pr, sendIfEmpty)) return;
    while (pr.state === 'replicate' && this.maybeSendAppend(to, pr, false)) {
      // keep streaming: each message is bounded by maxMessageBytes / maxEntriesPerMessage
    }
  }

  bcastAppend(sendIfEmpty = true): void {
    for (const [id, pr] of this.tracker.progress) {
      if (id !== this.id) this.sendAppendLoop(id, pr, sendIfEmpty);
    }
  }

  private bcastHeartbeat(context: Uint8Array): void {
    for (const [id, pr] of this.tracker.progress) {
      if (id === this.id) continue;
      // Never tell a follower to commit beyond what it is known to hold.
      this.send<HeartbeatMessage>({
        type: 'heartbeat',
        from: this.id,
        to: id,
        term: this.term,
        commit: Math.min(pr.match, this.log.committed),
        context,
        sentTick: this.tickCount,
      });
    }
  }

  private noteAck(pr: Progress, sentTick: number | undefined): void {
    pr.recentActive = true;
    if (sentTick !== undefined && sentTick > pr.ackedSentTick) pr.ackedSentTick = sentTick;
  }

  private handleAppendResponse(m: AppendResponse, pr: Progress): void {
    this.noteAck(pr, m.sentTick);
    if (m.reject) {
      // Skip every index that cannot match, using the follower's term hint (see findConflictByTerm).
      let nextProbe = m.rejectHint;
      if (m.logTermHint > 0) nextProbe = this.log.findConflictByTerm(m.rejectHint, m.logTermHint)[0];
      if (pr.maybeDecrTo(m.index, nextProbe)) {
        if (pr.state === 'replicate') pr.becomeProbe();
        this.sendAppendLoop(m.from, pr, true);
      }
      return;
    }
    const wasPaused = pr.isPaused();
    // A probe that merely confirms the known match also proves where the follower's log is.
    const confirmsProbe = pr.state === 'probe' && m.index === pr.match;
    if (!pr.maybeUpdate(m.index) && !confirmsProbe) return;
    if (pr.state === 'probe') {
      pr.becomeReplicate();
    } else if (pr.state === 'snapshot') {
      // The follower caught up past what is compacted: stream from here.
      if (pr.match + 1 >= this.log.firstIndex()) {
        pr.becomeProbe();
        pr.becomeReplicate();
      }
    } else {
      pr.inflights.freeLE(m.index);
    }
    if (this.maybeCommit()) {
      this.onCommitAdvanced();
    } else if (wasPaused || pr.state === 'replicate') {
      this.sendAppendLoop(m.from, pr, false);
    }
    if (m.from === this.leadTransferee && pr.match === this.log.lastIndex()) {
      this.sendTimeoutNow(m.from);
    }
  }

  private onCommitAdvanced(): void {
    this.releasePendingReadIndex();
    // Tell everyone the new commit index (and send whatever else is ready).
    this.bcastAppend(true);
  }

  private handleHeartbeatResponse(m: HeartbeatResponse, pr: Progress): void {
    this.noteAck(pr, m.sentTick);
    pr.probeSent = false;
    // If every in-flight append was lost, acks never come: free a slot so that the next (empty) append
    // is sent, gets rejected for its gap, and sends the follower back to probing.
    if (pr.state === 'replicate' && pr.inflights.full()) pr.inflights.freeFirst();
    if (pr.match < this.log.lastIndex() || pr.state === 'probe') this.sendAppendLoop(m.from, pr, true);
    if (m.context.length === 0) return;
    if (this.readOnly.recvAck(m.from, m.context)) this.releaseReads();
  }

  /** Answers the reads a quorum of the current configuration has confirmed; returns how many. */
  private releaseReads(): number {
    const released = this.readOnly.release((ids) => this.tracker.hasQuorum(ids));
    for (const p of released) this.answerRead(p.req, p.index);
    return released.length;
  }

  /** Called by RawNode.advance(): the caller persisted entries up to the stable index. */
  onPersisted(): void {
    if (this.role !== 'leader') return;
    const self = this.tracker.progress.get(this.id);
    if (self === undefined) return;
    if (self.maybeUpdate(this.log.stableIndex()) && this.maybeCommit()) this.onCommitAdvanced();
  }

  /** Ships proposals appended since the last Ready (one message per follower instead of one each). */
  flushAppends(): void {
    if (!this.appendPending) return;
    this.appendPending = false;
    if (this.role === 'leader') this.bcastAppend(false);
  }

  // ---------------------------------------------------------------------------------------------
  // Local requests
  // ---------------------------------------------------------------------------------------------

  private checkCanPropose(): void {
    if (this.role !== 'leader') throw new ProposalDroppedError('notLeader', this.lead);
    if (!this.tracker.progress.has(this.id)) throw new ProposalDroppedError('removed', NONE);
    if (this.leadTransferee !== NONE) throw new ProposalDroppedError('transferring', this.lead);
  }

  propose(ents: Entry[]): void {
    this.checkCanPropose();
    if (!this.addUncommitted(ents)) throw new ProposalDroppedError('tooMuchUncommitted', this.id);
    this.appendEntries(ents);
    this.appendPending = true;
  }

  proposeConfChange(cc: ConfChange): void {
    this.checkCanPropose();
    // One change at a time, and only after this leader committed an entry of its own term (the
    // no-op): otherwise two leaders could run overlapping single-server changes (Ongaro's fix).
    if (this.pendingConfIndex > this.log.applied || !this.committedEntryInCurrentTerm()) {
      throw new ProposalDroppedError('confChangePending', this.id);
    }
    validateConfChange(cc, this.tracker.voters, this.tracker.learners, this.id);
    // The tracker holds the applied membership (nothing else is pending): stamp the result on the entry.
    const e: Entry = {
      type: 'conf',
      term: 0,
      index: 0,
      change: { ...cc, resulting: resultingConf(this.tracker.confState(), cc) },
    };
    if (!this.addUncommitted([e])) throw new ProposalDroppedError('tooMuchUncommitted', this.id);
    this.appendEntries([e]);
    this.pendingConfIndex = e.index;
    this.appendPending = true;
  }

  transferLeadership(to: NodeId): void {
    if (this.role !== 'leader') throw new ProposalDroppedError('notLeader', this.lead);
    if (to === this.id) return;
    if (!this.tracker.voters.has(to)) {
      throw new InvalidConfChangeError(`cannot transfer leadership to ${to}: it is not a voter`);
    }
    if (this.leadTransferee === to) return;
    this.leadTransferee = to;
    // The transfer must finish within an election timeout, counted from now.
    this.electionElapsed = 0;
    const pr = this.tracker.progress.get(to) as Progress;
    if (pr.match === this.log.lastIndex()) this.sendTimeoutNow(to);
    else this.sendAppendLoop(to, pr, true);
  }

  private sendTimeoutNow(to: NodeId): void {
    this.transferStartedThisTerm = true;
    this.send({ type: 'timeoutNow', from: this.id, to, term: this.term });
  }

  readIndex(context: Uint8Array): void {
    const req: ReadIndexRequest = { type: 'readIndex', from: this.id, to: this.id, term: this.term, context };
    if (this.role === 'leader') {
      this.leaderReadIndex(req);
      return;
    }
    if (this.lead === NONE || this.role !== 'follower') throw new ProposalDroppedError('notLeader', NONE);
    this.send<ReadIndexRequest>({ ...req, to: this.lead });
  }

  private leaderReadIndex(req: ReadIndexRequest): void {
    // Until the no-op of this term commits, our commit index may be behind the true one.
    if (!this.committedEntryInCurrentTerm()) {
      this.pendingReadIndex.push(req);
      return;
    }
    this.startReadRound(req);
  }

  private startReadRound(req: ReadIndexRequest): void {
    if (this.tracker.isSingleton(this.id)) {
      this.answerRead(req, this.log.committed);
      return;
    }
    const round = this.readOnly.addRequest(this.log.committed, req);
    this.readOnly.recvAck(this.id, round);
    if (this.releaseReads() > 0) return;
    this.bcastHeartbeat(round);
  }

  private releasePendingReadIndex(): void {
    if (this.pendingReadIndex.length === 0 || !this.committedEntryInCurrentTerm()) return;
    const reqs = this.pendingReadIndex;
    this.pendingReadIndex = [];
    for (const r of reqs) this.startReadRound(r);
  }

  private answerRead(req: ReadIndexRequest, index: number): void {
    if (req.from === this.id) {
      this.readStates.push({ index, context: req.context });
    } else {
      this.send({
        type: 'readIndexResp',
        from: this.id,
        to: req.from,
        term: this.term,
        index,
        context: req.context,
      });
    }
  }

  reportUnreachable(id: NodeId): void {
    if (this.role !== 'leader') return;
    const pr = this.tracker.progress.get(id);
    // Stop streaming into the void; probe again (one message per heartbeat).
    if (pr !== undefined && pr.state === 'replicate') pr.becomeProbe();
  }

  reportSnapshot(id: NodeId, ok: boolean): void {
    if (this.role !== 'leader') return;
    const pr = this.tracker.progress.get(id);
    if (pr === undefined || pr.state !== 'snapshot') return;
    if (!ok) pr.pendingSnapshot = 0;
    // Either way, wait for the follower's next answer (or heartbeat response) before sending more.
    pr.becomeProbe();
    pr.probeSent = true;
  }

  // ---------------------------------------------------------------------------------------------
  // Membership (applied by the caller when the conf entry is applied, etcd style)
  // ---------------------------------------------------------------------------------------------

  applyConfChange(cc: ConfChange): ConfState {
    const last = this.log.lastIndex();
    if (cc.resulting !== undefined) {
      this.tracker.applyConf(cc.resulting, last);
    } else {
      switch (cc.type) {
        case 'addVoter':
          this.tracker.addVoter(cc.nodeId, last);
          break;
        case 'addLearner':
          this.tracker.addLearner(cc.nodeId, last);
          break;
        case 'remove':
          this.tracker.remove(cc.nodeId);
          break;
      }
    }
    if (this.role === 'leader') this.afterLeaderConfChange();
    return this.tracker.confState();
  }

  private afterLeaderConfChange(): void {
    if (!this.tracker.voters.has(this.id)) {
      // Removed (or demoted): let the others know the commit index, hand leadership to a voter that
      // has the whole log if there is one, and step down.
      this.bcastAppend(true);
      const last = this.log.lastIndex();
      for (const [id, pr] of this.tracker.progress) {
        if (this.tracker.voters.has(id) && pr.match === last) {
          this.sendTimeoutNow(id);
          break;
        }
      }
      this.becomeFollower(this.term, NONE);
      return;
    }
    if (this.leadTransferee !== NONE && !this.tracker.voters.has(this.leadTransferee)) {
      this.leadTransferee = NONE;
    }
    // The quorum changed: something may now be committed; new members need the log.
    if (this.maybeCommit()) this.onCommitAdvanced();
    else this.bcastAppend(false);
    // Reads waiting for a quorum of the old configuration: re-check against the new one. A leader that is the only
    // voter left has voted for no one else in its term: every read waiting on it is confirmed.
    if (this.tracker.isSingleton(this.id)) {
      for (const p of this.readOnly.releaseAll()) this.answerRead(p.req, p.index);
    } else {
      this.releaseReads();
    }
  }
}

/** The membership after applying cc to conf (one server at a time). */
export function resultingConf(conf: ConfState, cc: ConfChange): ConfState {
  const voters = conf.voters.filter((id) => id !== cc.nodeId);
  const learners = conf.learners.filter((id) => id !== cc.nodeId);
  if (cc.type === 'addVoter') voters.push(cc.nodeId);
  else if (cc.type === 'addLearner') learners.push(cc.nodeId);
  return { voters: voters.sort((a, b) => a - b), learners: learners.sort((a, b) => a - b) };
}

/** Rejects a membership change that could never make sense, whatever the timing. */
export function validateConfChange(
  cc: ConfChange,
  voters: ReadonlySet<NodeId>,
  learners: ReadonlySet<NodeId>,
  self: NodeId,
): void {
  if (!Number.isSafeInteger(cc.nodeId) || cc.nodeId <= 0) {
    throw new InvalidConfChangeError(`nodeId must be a positive integer, got ${cc.nodeId}`);
  }
  switch (cc.type) {
    case 'addVoter':
      if (voters.has(cc.nodeId)) throw new InvalidConfChangeError(`${cc.nodeId} is already a voter`);
      return;
    case 'addLearner':
      if (learners.has(cc.nodeId)) throw new InvalidConfChangeError(`${cc.nodeId} is already a learner`);
      if (cc.nodeId === self) {
        throw new InvalidConfChangeError('the leader cannot demote itself; transfer leadership first');
      }
      return;
    case 'remove':
      if (!voters.has(cc.nodeId) && !learners.has(cc.nodeId)) {
        throw new InvalidConfChangeError(`${cc.nodeId} is not a member`);
      }
      if (voters.has(cc.nodeId) && voters.size === 1) {
        throw new InvalidConfChangeError(`cannot remove ${cc.nodeId}: it is the last voter`);
      }
      return;
    default:
      throw new InvalidConfChangeError(`unknown type ${(cc as { type: string }).type}`);
  }
}
