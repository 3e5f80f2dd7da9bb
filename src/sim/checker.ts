// Raft's safety properties, checked incrementally as the simulation runs. The driver reports
// every durable write, every sent message, every applied entry and every role change; each
// observation is checked against everything observed before it. The first broken property throws
// an InvariantViolation naming the node, term and index involved.
//
// The checker never looks inside the Raft core: it sees only what a real deployment could see
// (the disk, the wire, the state machine), so it cannot be fooled by the core's own bookkeeping.

import type { Entry, HardState, Message, NodeId, SnapshotMetadata } from '../raft/types.js';
import { entryDigest, GENESIS_CHAIN } from './kv-app.js';

export type Invariant =
  /** At most one leader per term. */
  | 'election-safety'
  /** A node grants at most one vote per term (the cause behind most election-safety failures). */
  | 'double-vote'
  /** Same (index, term) ⇒ same entry and the same history before it. */
  | 'log-matching'
  /** A leader never overwrites or deletes entries in its own log. */
  | 'leader-append-only'
  /** A new leader's log holds every entry committed before it was elected. */
  | 'leader-completeness'
  /** Every node applies the same entries in the same order, without gaps or repeats. */
  | 'state-machine-safety'
  /** An entry known committed is on a quorum of durable logs, and no durable copy is ever dropped. */
  | 'committed-entry-lost'
  /** Durable term/vote never go backwards, vote changes only with the term, commit never decreases. */
  | 'hardstate-monotonic'
  /** A message never claims a term or vote the sender has not yet made durable. */
  | 'persist-before-send'
  /** A read index is at least every index known committed when the read was issued. */
  | 'linearizable-read'
  /** With leader leases on, two nodes never both believe they hold a valid lease. */
  | 'lease-overlap'
  /** The core threw something other than a documented rejection (a panic). */
  | 'core-error';

export const ALL_INVARIANTS: readonly Invariant[] = [
  'election-safety',
  'double-vote',
  'log-matching',
  'leader-append-only',
  'leader-completeness',
  'state-machine-safety',
  'committed-entry-lost',
  'hardstate-monotonic',
  'persist-before-send',
  'linearizable-read',
  'lease-overlap',
  'core-error',
];

export interface ViolationContext {
  node?: NodeId;
  term?: number;
  index?: number;
}

export class InvariantViolation extends Error {
  readonly invariant: Invariant;
  readonly context: ViolationContext;
  readonly detail: string;
  constructor(invariant: Invariant, detail: string, context: ViolationContext) {
    const where = [
      context.node !== undefined ? `node=${context.node}` : '',
      context.term !== undefined ? `term=${context.term}` : '',
      context.index !== undefined ? `index=${context.index}` : '',
    ]
      .filter((s) => s !== '')
      .join(' ');
    super(`${invariant}${where ? ` (${where})` : ''}: ${detail}`);
    this.name = 'InvariantViolation';
    this.invariant = invariant;
    this.context = context;
    this.detail = detail;
  }
}

/** A read-only view of one node's durable log, as the checker needs it. */
export interface LogView {
  /** Index and term of the snapshot the log starts after (0/0 for the bootstrap snapshot). */
  snapshotIndex: number;
  snapshotTerm: number;
  lastIndex: number;
  /** Term of entry i for snapshotIndex <= i <= lastIndex (compacted entries are still known by term
   *  when the view can tell); undefined when the log cannot say. */
  term(i: number): number | undefined;
}

/** A LogView over a plain list of (index, term) pairs, for tests and small tools. */
export function logViewOf(entries: Array<[number, number]>, snapshot: [number, number] = [0, 0]): LogView {
  const terms = new Map(entries);
  const last = entries.length > 0 ? (entries[entries.length - 1] as [number, number])[0] : snapshot[0];
  return {
    snapshotIndex: snapshot[0],
    snapshotTerm: snapshot[1],
    lastIndex: last,
    term: (i) => (i === snapshot[0] ? snapshot[1] : terms.get(i)),
  };
}

/** Does `view` durably hold entry (index, term), either in its log or folded into its snapshot? */
function holds(view: LogView, index: number, term: number): boolean {
  if (index <= view.snapshotIndex) return true;
  return view.term(index) === term;
}

/** Message types only a leader (of the message's term) sends. */
const LEADER_ONLY: ReadonlySet<Message['type']> = new Set([
  'app',
  'heartbeat',
  'snap',
  'timeoutNow',
  'readIndexResp',
]);

export class SafetyChecker {
  private readonly disabled: ReadonlySet<Invariant>;
  private readonly leaders = new Map<number, NodeId>();
  private readonly votes = new Map<string, NodeId>();
  /** `${index}:${term}` → digest of the entry and the term of the entry before it. */
  private readonly logRecords = new Map<string, { digest: string; prevTerm: number | undefined }>();
  /** index → term of the entry known committed there (holes where nothing was observed yet). */
  private readonly committedTerms: number[] = [0];
  /**
   * index → an upper bound on the term in which that entry became committed: the smallest current
   * term of any node seen holding it as committed (a node learns of a commit made in term U only
   * from a message of term >= U). Leader completeness binds leaders of later terms only.
   */
  private readonly commitTermBound: number[] = [0];
  private committedHi = 0;
  /** index → the state machine's chain hash after applying that index. */
  private readonly chainAt: string[] = [GENESIS_CHAIN];
  private readonly lastApplied = new Map<NodeId, number>();
  private readonly reads = new Map<string, { node: NodeId; minIndex: number }>();

  constructor(options: { disabled?: Iterable<Invariant> } = {}) {
    this.disabled = new Set(options.disabled ?? []);
  }

  /** Highest index known committed (from durable commit indexes, applies and snapshots). */
  get knownCommit(): number {
    return this.committedHi;
  }

  /** Term of the entry known committed at `index`, if observed. */
  committedTermAt(index: number): number | undefined {
    return this.committedTerms[index];
  }

  /** The leader recorded for `term`, if any. */
  leaderOf(term: number): NodeId | undefined {
    return this.leaders.get(term);
  }

  private fail(invariant: Invariant, detail: string, context: ViolationContext): void {
    if (this.disabled.has(invariant)) return;
    throw new InvariantViolation(invariant, detail, context);
  }

  // ---- elections -----------------------------------------------------------------------------

  /** `node` acts as leader of `term` (its role says so, or it sent a leader-only message). */
  observeLeader(node: NodeId, term: number, how: string): void {
    const prior = this.leaders.get(term);
    if (prior === undefined) {
      this.leaders.set(term, node);
    } else if (prior !== node) {
      this.fail('election-safety', `nodes ${prior} and ${node} are both leader of term ${term} (${how})`, {
        node,
        term,
      });
    }
  }

  /** Only a voter of its own configuration may become leader (learners and removed nodes never). */
  observeLeaderIsVoter(node: NodeId, term: number, voters: readonly NodeId[]): void {
    if (!voters.includes(node)) {
      this.fail(
        'election-safety',
        `node ${node} became leader of term ${term} but is not among its voters [${voters}]`,
        {
          node,
          term,
        },
      );
    }
  }

  /** A leader (of `term`) is rewriting its durable log from `from` on, where it held `before`. */
  observeLeaderRewrite(
    node: NodeId,
    term: number,
    before: Array<[number, number]>,
    entries: readonly Entry[],
  ): void {
    for (const [i, t] of before) {
      const replacement = entries.find((e) => e.index === i);
      if (replacement === undefined || replacement.term !== t) {
        this.fail(
          'leader-append-only',
          `leader ${node} of term ${term} overwrote its own entry ${i} (term ${t})`,
          {
            node,
            term,
            index: i,
          },
        );
        return;
      }
    }
  }

  observeVoteGrant(voter: NodeId, candidate: NodeId, term: number): void {
    const key = `${term}:${voter}`;
    const prior = this.votes.get(key);
    if (prior === undefined) {
      this.votes.set(key, candidate);
    } else if (prior !== candidate) {
      this.fail(
        'double-vote',
        `node ${voter} granted its term-${term} vote to ${prior} and then to ${candidate}`,
        {
          node: voter,
          term,
        },
      );
    }
  }

  /**
   * Called when `node` has just become leader of `term`, with its durable log (incl. its no-op).
   * Checks every entry known to have been committed in a term before `term`. (A leader elected late,
   * e.g. a candidate that was paused with a vote grant in its inbox, legitimately lacks entries
   * committed by leaders of later terms.)
   */
  observeLeaderLog(node: NodeId, term: number, log: LogView): void {
    const snapTerm = this.committedTerms[log.snapshotIndex];
    const snapBound = this.commitTermBound[log.snapshotIndex] ?? Number.POSITIVE_INFINITY;
    if (
      log.snapshotIndex > 0 &&
      snapTerm !== undefined &&
      snapBound < term &&
      snapTerm !== log.snapshotTerm
    ) {
      this.fail(
        'leader-completeness',
        `new leader's snapshot at ${log.snapshotIndex} has term ${log.snapshotTerm}, committed term is ${snapTerm}`,
        { node, term, index: log.snapshotIndex },
      );
    }
    for (let i = log.snapshotIndex + 1; i <= this.committedHi; i++) {
      const want = this.committedTerms[i];
      if (want === undefined || (this.commitTermBound[i] ?? Number.POSITIVE_INFINITY) >= term) continue;
      const have = log.term(i);
      if (have !== want) {
        this.fail(
          'leader-completeness',
          `new leader of term ${term} lacks entry ${i} (term ${want}) committed by term ${this.commitTermBound[i]}; its log has ${
            have === undefined ? 'nothing' : `term ${have}`
          } there (last index ${log.lastIndex})`,
          { node, term, index: i },
        );
        return;
      }
    }
  }

  // ---- durable state -------------------------------------------------------------------------

  /** A hard state is about to replace `prev` in `node`'s durable storage. */
  observeHardState(node: NodeId, prev: HardState, next: HardState, log: LogView): void {
    const ctx = { node, term: next.term };
    if (next.term < prev.term) {
      this.fail('hardstate-monotonic', `durable term went back from ${prev.term} to ${next.term}`, ctx);
    } else if (next.term === prev.term && prev.vote !== 0 && next.vote !== prev.vote) {
      this.fail(
        'hardstate-monotonic',
        `durable vote changed from ${prev.vote} to ${next.vote} within term ${next.term}`,
        ctx,
      );
    }
    if (next.commit < prev.commit) {
      this.fail('hardstate-monotonic', `durable commit went back from ${prev.commit} to ${next.commit}`, {
        ...ctx,
        index: next.commit,
      });
    }
    if (next.commit > log.lastIndex) {
      this.fail(
        'hardstate-monotonic',
        `durable commit ${next.commit} points past the durable log (last index ${log.lastIndex})`,
        { ...ctx, index: next.commit },
      );
    }
  }

  /**
   * Entries at the listed (index, term) positions were in `node`'s durable log and the log was then
   * rewritten (append with truncation, or snapshot install) into `after`, on behalf of a leader of
   * `writerTerm` (the node's current term). A leader of a term at or after the one in which an entry
   * was committed holds that entry, so it can never make anyone drop it. (A stale leader of an
   * earlier term can, on a node that was not part of the committing quorum: that is legal, the
   * quorum still holds the entry.)
   */
  observeLogRewrite(
    node: NodeId,
    writerTerm: number,
    before: Array<[number, number]>,
    after: LogView,
    how: string,
  ): void {
    for (const [i, t] of before) {
      if (this.committedTerms[i] !== t) continue;
      const committedBy = this.commitTermBound[i] ?? Number.POSITIVE_INFINITY;
      if (writerTerm < committedBy) continue;
      if (!holds(after, i, t)) {
        this.fail(
          'committed-entry-lost',
          `${how} for a leader of term ${writerTerm} dropped entry ${i} (term ${t}), committed by term ${committedBy}, from node ${node}'s durable log`,
          { node, term: t, index: i },
        );
        return;
      }
    }
  }

  /** `entries` were just appended to `node`'s durable log, which is now `after`. */
  observeAppended(node: NodeId, entries: readonly Entry[], after: LogView): void {
    for (const e of entries) {
      const key = `${e.index}:${e.term}`;
      const digest = entryDigest(e);
      const prevTerm = e.index - 1 >= after.snapshotIndex ? after.term(e.index - 1) : undefined;
      const prior = this.logRecords.get(key);
      if (prior === undefined) {
        this.logRecords.set(key, { digest, prevTerm });
        continue;
      }
      if (prior.digest !== digest) {
        this.fail('log-matching', `two different entries exist at index ${e.index} in term ${e.term}`, {
          node,
          term: e.term,
          index: e.index,
        });
      } else if (prior.prevTerm !== undefined && prevTerm !== undefined && prior.prevTerm !== prevTerm) {
        this.fail(
          'log-matching',
          `entry ${e.index}/${e.term} follows term ${prevTerm} here but term ${prior.prevTerm} in another log`,
          { node, term: e.term, index: e.index - 1 },
        );
      } else if (prior.prevTerm === undefined && prevTerm !== undefined) {
        prior.prevTerm = prevTerm;
      }
    }
  }

  /**
   * `node`, in term `nodeTerm`, durably committed up to `commit` (was `prevCommit`); `log` is its
   * durable log.
   */
  observeCommit(node: NodeId, nodeTerm: number, prevCommit: number, commit: number, log: LogView): void {
    for (let i = Math.max(prevCommit + 1, log.snapshotIndex); i <= commit; i++) {
      const t = log.term(i);
      if (t !== undefined) this.recordCommitted(node, nodeTerm, i, t);
    }
    if (commit > this.committedHi) this.committedHi = commit;
  }

  /**
   * A leader (whose voters are `voters` now) durably committed `commit`: every quorum of the voters
   * must contain a node that durably holds the entry, or a later election could lose it. That is
   * `voters - quorum + 1` holders among the voters: a quorum for an odd number of voters, one fewer
   * for an even number. (Not "a quorum of holders": a commit decided under the previous membership —
   * the removed member acknowledged it — may be persisted after the removal was applied; with
   * single-server changes the old and new quorums intersect, which is what keeps it. Full-stack
   * seed 106634: a 3 → 2 removal, the leader's commit 107 held by the leader and the removed node.)
   */
  observeCommitQuorum(
    leader: NodeId,
    commit: number,
    voters: readonly NodeId[],
    logs: ReadonlyMap<NodeId, LogView>,
  ) {
    const term = this.committedTerms[commit];
    if (term === undefined || commit === 0) return;
    const holders = voters.filter((v) => {
      const log = logs.get(v);
      return log !== undefined && holds(log, commit, term);
    });
    const quorum = Math.floor(voters.length / 2) + 1;
    const needed = voters.length - quorum + 1;
    if (holders.length < needed) {
      this.fail(
        'committed-entry-lost',
        `leader ${leader} committed entry ${commit} (term ${term}) but only [${holders.join(',')}] of voters [${voters.join(
          ',',
        )}] hold it durably (every quorum of ${quorum} needs one of ${needed})`,
        { node: leader, term, index: commit },
      );
    }
  }

  /** A snapshot taken at `meta` with state-machine chain hash `chain` is now durable on `node` (in term `nodeTerm`). */
  observeSnapshot(node: NodeId, nodeTerm: number, meta: SnapshotMetadata, chain: string): void {
    if (meta.index === 0) return;
    this.recordCommitted(node, nodeTerm, meta.index, meta.term);
    this.recordChain(node, meta.index, chain, 'snapshot');
    if (meta.index > this.committedHi) this.committedHi = meta.index;
  }

  // ---- the wire --------------------------------------------------------------------------------

  /** `node` is sending `msg` while its durable hard state is `durable`. */
  observeSend(msg: Message, durable: HardState): void {
    if (LEADER_ONLY.has(msg.type)) this.observeLeader(msg.from, msg.term, `sent ${msg.type}`);
    if (msg.type === 'voteResp' && !msg.reject) this.observeVoteGrant(msg.from, msg.to, msg.term);
    // Pre-vote messages carry a term the sender has not (and must not) adopted.
    if (msg.type === 'preVote' || msg.type === 'preVoteResp') return;
    if (msg.term > durable.term) {
      this.fail(
        'persist-before-send',
        `node ${msg.from} sent ${msg.type} in term ${msg.term} while its durable term is ${durable.term}`,
        { node: msg.from, term: msg.term },
      );
    }
    if (msg.type === 'voteResp' && !msg.reject && (durable.term !== msg.term || durable.vote !== msg.to)) {
      this.fail(
        'persist-before-send',
        `node ${msg.from} granted its vote to ${msg.to} in term ${msg.term} before persisting it (durable term ${durable.term}, vote ${durable.vote})`,
        { node: msg.from, term: msg.term },
      );
    }
  }

  // ---- the state machine -----------------------------------------------------------------------

  /** `node` (in term `nodeTerm`) applied `entry` to its state machine, reaching chain hash `chain`. */
  observeApply(node: NodeId, nodeTerm: number, entry: Entry, chain: string): void {
    const last = this.lastApplied.get(node);
    if (last !== undefined && entry.index !== last + 1) {
      this.fail('state-machine-safety', `node ${node} applied index ${entry.index} right after ${last}`, {
        node,
        term: entry.term,
        index: entry.index,
      });
    }
    this.recordCommitted(node, nodeTerm, entry.index, entry.term);
    this.recordChain(node, entry.index, chain, 'applied sequence');
    this.lastApplied.set(node, entry.index);
    if (entry.index > this.committedHi) this.committedHi = entry.index;
  }

  /** `node`'s state machine was replaced by a snapshot at `index`/`term` with chain hash `chain`. */
  observeRestore(
    node: NodeId,
    nodeTerm: number,
    index: number,
    term: number,
    chain: string,
    how: 'restart' | 'install',
  ): void {
    const last = this.lastApplied.get(node);
    if (how === 'install' && last !== undefined && index < last) {
      this.fail(
        'state-machine-safety',
        `node ${node} rolled its state back from ${last} to snapshot ${index}`,
        {
          node,
          term,
          index,
        },
      );
    }
    if (index > 0) {
      this.recordCommitted(node, nodeTerm, index, term);
      this.recordChain(node, index, chain, `snapshot (${how})`);
      if (index > this.committedHi) this.committedHi = index;
    }
    this.lastApplied.set(node, index);
  }

  private recordCommitted(node: NodeId, nodeTerm: number, index: number, term: number): void {
    const bound = this.commitTermBound[index];
    if (bound === undefined || nodeTerm < bound) this.commitTermBound[index] = nodeTerm;
    const prior = this.committedTerms[index];
    if (prior === undefined) {
      this.committedTerms[index] = term;
    } else if (prior !== term) {
      this.fail(
        'state-machine-safety',
        `node ${node} holds term ${term} at committed index ${index}, which was committed with term ${prior}`,
        { node, term, index },
      );
    }
  }

  private recordChain(node: NodeId, index: number, chain: string, what: string): void {
    const prior = this.chainAt[index];
    if (prior === undefined) {
      this.chainAt[index] = chain;
    } else if (prior !== chain) {
      this.fail('state-machine-safety', `node ${node}'s ${what} diverges at index ${index}`, { node, index });
    }
  }

  // ---- reads and leases ------------------------------------------------------------------------

  observeReadIssued(node: NodeId, context: string): void {
    this.reads.set(context, { node, minIndex: this.committedHi });
  }

  /** `minIndex` the read was issued with, if known. */
  readMinIndex(context: string): number | undefined {
    return this.reads.get(context)?.minIndex;
  }

  observeReadState(node: NodeId, context: string, index: number): void {
    const read = this.reads.get(context);
    if (read === undefined) return; // a duplicate answer for a read already checked, or a foreign context
    if (index < read.minIndex) {
      this.fail(
        'linearizable-read',
        `read ${context} issued on node ${read.node} got read index ${index}, but ${read.minIndex} was already committed`,
        { node, index },
      );
    }
  }

  /** The nodes that, right now, believe they hold a valid leader lease. */
  observeLeases(holders: ReadonlyArray<{ node: NodeId; term: number }>): void {
    if (holders.length > 1) {
      const list = holders.map((h) => `${h.node}@term${h.term}`).join(', ');
      const first = holders[0] as { node: NodeId; term: number };
      this.fail('lease-overlap', `several nodes believe they hold a valid lease: ${list}`, first);
    }
  }

  coreError(node: NodeId, what: string, err: unknown): void {
    const text = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
    this.fail('core-error', `${what} threw ${text}`, { node });
  }
}
