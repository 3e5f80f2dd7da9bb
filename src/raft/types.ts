// The Raft core's public vocabulary. Everything here is plain data: it can be persisted with
// msgpackr, sent over a socket, recorded by the simulator and compared in tests.
// The core itself never touches a clock, a timer, a socket, a file or Math.random.

/** A member's identity: a positive integer, unique within a cluster, never reused (the node runtime refuses to re-add one: FS-24). */
export type NodeId = number;

/** 0 means "none" wherever a NodeId is optional (no vote, no known leader). */
export const NONE: NodeId = 0;

export type Role = 'follower' | 'preCandidate' | 'candidate' | 'leader';

/** What must be durable before any message that depends on it is sent. */
export interface HardState {
  term: number;
  vote: NodeId;
  commit: number;
}

/** Membership: voters decide elections and commitment; learners only receive the log. */
export interface ConfState {
  voters: NodeId[];
  learners: NodeId[];
}

/**
 * One server at a time (Raft thesis §4.1):
 * - addLearner: a new member that receives the log but does not vote;
 * - addVoter: a new voter, or the promotion of an existing learner;
 * - remove: the member leaves (a removed leader steps down once the change commits).
 */
export interface ConfChange {
  type: 'addLearner' | 'addVoter' | 'remove';
  nodeId: NodeId;
  /** Opaque to the core: e.g. the member's peer address, carried so every replica learns it. */
  context?: Uint8Array;
  /**
   * Filled in by the leader when it appends the change (callers leave it unset): the whole membership
   * after the change. Applying the entry installs exactly this, so a member that joined with an empty
   * membership and replays old conf entries ends up with the right one (never "I am the only voter").
   */
  resulting?: ConfState;
}

export interface NormalEntry {
  type: 'normal';
  term: number;
  index: number;
  /** Empty for the no-op a new leader appends to commit entries of earlier terms. */
  data: Uint8Array;
}

export interface ConfEntry {
  type: 'conf';
  term: number;
  index: number;
  change: ConfChange;
}

export type Entry = NormalEntry | ConfEntry;

/** Where an entry sits in the log. Two entries with the same term and index are the same entry. */
export interface EntryPosition {
  term: number;
  index: number;
}

export interface SnapshotMetadata {
  index: number;
  term: number;
  conf: ConfState;
}

export interface Snapshot {
  metadata: SnapshotMetadata;
  /** The application state machine's serialized state as of metadata.index. */
  data: Uint8Array;
}

/** A linearizable read is safe to serve once the applied index reaches `index`. */
export interface ReadState {
  index: number;
  /** The caller's request context, echoed back unchanged so it can match requests. */
  context: Uint8Array;
}

/** Volatile state worth reporting (not persisted). */
export interface SoftState {
  lead: NodeId;
  role: Role;
}

// ---------------------------------------------------------------------------------------------
// Messages. Every message names its sender, its receiver and the sender's term.
// The simulator and the transport only look at `type`, `from` and `to`; everything else is the
// core's business.
// ---------------------------------------------------------------------------------------------

interface MessageBase {
  from: NodeId;
  to: NodeId;
  term: number;
}

/** Leader → follower: entries after (logIndex, logTerm); also carries the leader's commit. */
export interface AppendMessage extends MessageBase {
  type: 'app';
  logIndex: number;
  logTerm: number;
  entries: Entry[];
  commit: number;
  /** The leader's logical tick when it sent this; echoed in the response (leader-lease bookkeeping). */
  sentTick?: number;
}

/** Follower → leader. On rejection, `hint` is the follower's best guess of a matching index. */
export interface AppendResponse extends MessageBase {
  type: 'appResp';
  index: number;
  reject: boolean;
  rejectHint: number;
  logTermHint: number;
  /** Echo of AppendMessage.sentTick: proves the follower heard from the leader no earlier than that tick. */
  sentTick?: number;
}

export interface VoteRequest extends MessageBase {
  type: 'vote' | 'preVote';
  lastIndex: number;
  lastTerm: number;
  /** Set when the election was triggered by leadership transfer: bypasses the leader-stickiness check. */
  transfer: boolean;
}

export interface VoteResponse extends MessageBase {
  type: 'voteResp' | 'preVoteResp';
  reject: boolean;
}

export interface HeartbeatMessage extends MessageBase {
  type: 'heartbeat';
  commit: number;
  /** ReadIndex round this heartbeat confirms leadership for (empty when none). */
  context: Uint8Array;
  /** The leader's logical tick when it sent this; echoed in the response (leader-lease bookkeeping). */
  sentTick?: number;
}

export interface HeartbeatResponse extends MessageBase {
  type: 'heartbeatResp';
  context: Uint8Array;
  /** Echo of HeartbeatMessage.sentTick. */
  sentTick?: number;
}

export interface SnapshotMessage extends MessageBase {
  type: 'snap';
  snapshot: Snapshot;
}

/** Leader → transfer target: start an election now, ignoring the election timeout. */
export interface TimeoutNowMessage extends MessageBase {
  type: 'timeoutNow';
}

/** Follower → leader: please tell me a safe read index for this context. */
export interface ReadIndexRequest extends MessageBase {
  type: 'readIndex';
  context: Uint8Array;
}

/** Leader → follower: the read index for a context the follower asked about. */
export interface ReadIndexResponse extends MessageBase {
  type: 'readIndexResp';
  index: number;
  context: Uint8Array;
}

export type Message =
  | AppendMessage
  | AppendResponse
  | VoteRequest
  | VoteResponse
  | HeartbeatMessage
  | HeartbeatResponse
  | SnapshotMessage
  | TimeoutNowMessage
  | ReadIndexRequest
  | ReadIndexResponse;

export type MessageType = Message['type'];

/**
 * The output of the core. The caller must, in this order:
 *  1. persist `hardState` (if present), `snapshot` (if present) and append `entries` to stable storage
 *     (durably when `mustSync`);
 *  2. send `messages`;
 *  3. apply `snapshot` then `committedEntries` to the state machine, and handle `readStates`;
 *  4. call `advance(ready)`.
 */
export interface Ready {
  softState?: SoftState;
  hardState?: HardState;
  snapshot?: Snapshot;
  entries: Entry[];
  messages: Message[];
  committedEntries: Entry[];
  readStates: ReadState[];
  /** True when hardState changed in term/vote or entries were appended: an fsync is required. */
  mustSync: boolean;
}

/** Deterministic randomness, injected. Returns an integer in [0, n). */
export type RandomInt = (n: number) => number;

export interface RaftConfig {
  id: NodeId;
  /** Ticks without hearing from a leader before a follower campaigns. Randomized in [e, 2e). */
  electionTicks: number;
  /** Ticks between leader heartbeats. Must be < electionTicks. */
  heartbeatTicks: number;
  /** Seeded random source for election timeouts. */
  random: RandomInt;
  /** Pre-vote (thesis §9.6): a partitioned node cannot disrupt a healthy cluster. Default true. */
  preVote?: boolean;
  /** Check-quorum: a leader that has not heard from a majority in an election timeout steps down. Default true. */
  checkQuorum?: boolean;
  /**
   * Leader-lease bookkeeping for lease-based reads (requires checkQuorum). Default false. Implies
   * `leasePromise`. Every other voter must keep the promise (`leasePromise`) for this node's lease to hold
   * (see docs/decisions/0001-raft-core.md).
   */
  leaderLease?: boolean;
  /**
   * Keep the followers' side of leader leases even when this node does not use its own: refuse votes and ignore
   * campaign() for an election timeout after it starts (it may have acknowledged a leader's lease before it
   * restarted), besides check-quorum's stickiness. Lets a leader rely on its lease whatever flags the other members
   * run with (decision 0009). Default: leaderLease. Requires checkQuorum.
   */
  leasePromise?: boolean;
  /**
   * With leasePromise: campaign() on the sole voter of its configuration is not held back by the promise. Only for
   * callers whose leaders stop relying on their lease once they propose their own removal (FloeNode): otherwise a
   * leader of {X, L} removing itself may count X's acknowledgements until it applies the removal, which X, restarted
   * with {X}, may have applied first (review 2 of stop 34). Default false.
   */
  soleVoterSkipsPromise?: boolean;

  /**
   * The documented bound ε on tick-clock error: every member's tick period stays within (1 ± ε) × its
   * nominal length (so two members' rates differ by at most (1 + ε) / (1 − ε)). The default lease margin
   * is derived from it. Default 0.1; must be in [0, 0.5).
   */
  clockDriftBound?: number;
  /**
   * Safety margin for the lease, in ticks: the lease lasts electionTicks - leaseMarginTicks ticks from the
   * send tick of the latest message a quorum acknowledged. Covers followers' tick clocks running faster than
   * the leader's. Default leaseMarginFor(electionTicks, clockDriftBound) = E − ⌊(E − 1)(1 − ε) / (1 + ε)⌋
   * (3 for E = 9 or 10 with ε = 0.1); must be in [0, electionTicks - 1].
   */
  leaseMarginTicks?: number;
  /** Flow control: in-flight append messages per follower in replicate state. Default 256. */
  maxInflightMessages?: number;
  /** Flow control: in-flight bytes (entry payload) per follower. Default 8 MiB. */
  maxInflightBytes?: number;
  /** Cap on entry payload bytes in one append message. Default 1 MiB. */
  maxMessageBytes?: number;
  /** Cap on the number of entries in one append message. Default 4096. */
  maxEntriesPerMessage?: number;
  /** Cap on uncommitted payload bytes a leader accepts before refusing proposals. Default 64 MiB. */
  maxUncommittedBytes?: number;
  /** Entries to apply per Ready (bounds memory and latency of one batch). Default 4096. */
  maxCommittedEntriesPerReady?: number;
  /** Index already applied by the caller's state machine when restarting (default: snapshot index). */
  applied?: number;
}

/** Read-only view of what is durable, owned by the caller (disk, or memory in tests/simulation). */
export interface Storage {
  initialState(): { hardState: HardState; conf: ConfState };
  /** Entries in [lo, hi). Throws CompactedError when lo <= the snapshot index. */
  entries(lo: number, hi: number, maxBytes?: number): Entry[];
  /** Term of entry i; for the snapshot index, the snapshot's term. Throws CompactedError/UnavailableError. */
  term(i: number): number;
  /** Index of the first entry still present (snapshot index + 1). */
  firstIndex(): number;
  lastIndex(): number;
  snapshot(): Snapshot;
}

export class CompactedError extends Error {
  constructor(index: number) {
    super(`raft: index ${index} is compacted away (it is covered by a snapshot)`);
    this.name = 'CompactedError';
  }
}

export class UnavailableError extends Error {
  constructor(index: number) {
    super(`raft: index ${index} is not yet in the log`);
    this.name = 'UnavailableError';
  }
}

/** A membership change that can never be valid (as opposed to one that must wait: ProposalDroppedError). */
export class InvalidConfChangeError extends Error {
  constructor(reason: string) {
    super(`raft: invalid membership change: ${reason}`);
    this.name = 'InvalidConfChangeError';
  }
}

/** A RaftConfig field out of its allowed range. */
export class RaftConfigError extends Error {
  constructor(reason: string) {
    super(`raft: invalid config: ${reason}`);
    this.name = 'RaftConfigError';
  }
}

/** MemoryStorage.createSnapshot/applySnapshot with an index older than the snapshot it already holds. */
export class SnapshotOutOfDateError extends Error {
  constructor(index: number, current: number) {
    super(`raft: snapshot at index ${index} is older than the current snapshot at index ${current}`);
    this.name = 'SnapshotOutOfDateError';
  }
}

export type ProposalRejection =
  | 'notLeader'
  | 'transferring'
  | 'tooMuchUncommitted'
  | 'confChangePending'
  | 'removed';

export class ProposalDroppedError extends Error {
  readonly reason: ProposalRejection;
  readonly lead: NodeId;
  constructor(reason: ProposalRejection, lead: NodeId) {
    super(`raft: proposal dropped (${reason}${lead ? `, leader is ${lead}` : ', no known leader'})`);
    this.name = 'ProposalDroppedError';
    this.reason = reason;
    this.lead = lead;
  }
}

export interface Status {
  id: NodeId;
  role: Role;
  lead: NodeId;
  term: number;
  vote: NodeId;
  commit: number;
  applied: number;
  lastIndex: number;
  conf: ConfState;
  /** Only on the leader: each follower's replication progress. */
  progress?: Record<
    number,
    { match: number; next: number; state: 'probe' | 'replicate' | 'snapshot'; recentActive: boolean }
  >;
  /** Only with leaderLease on the leader: true while no other leader can have been elected. */
  leaseValid?: boolean;
  /** Only with leaderLease on the leader: ticks of lease left (0 when invalid). */
  leaseRemainingTicks?: number;
  leadTransferee: NodeId;
}
