import { randomBytes } from 'node:crypto';
import {
  type AllocOk,
  buildCreate,
  type CreateOptions,
  checkKey,
  encodeSequenceCommand,
  MAX_ALLOC,
  MAX_VALUE,
  type SequenceCommand,
  type SequenceError,
  type SequenceInfo,
  type SequenceResult,
  type SequenceStateMachine,
} from '../state/sequences/index.js';
import { RoundCoalescer } from './round-coalescer.js';

/** What the service needs from the node (a FloeNode through `sequenceNodeOf`). */
export interface SequenceNode {
  propose(command: Uint8Array): Promise<unknown>;
  /** Resolves once a ReadIndex round that started after the call confirmed this node's leadership. */
  linearizableRead(): Promise<void>;
  isLeader(): boolean;
  /** The node's current Raft term. */
  term(): number;
  onRoleChange(cb: (leader: boolean) => void): () => void;
  notLeaderError(): Error;
  /**
   * Whether this node holds a Raft leader lease in `term` now (decision 0009). Present only when the node serves
   * strict values from its lease (`floe serve --leader-lease`); absent: every value waits for a ReadIndex round.
   */
  holdsLeaderLease?(term: number): boolean;
}

export interface SequenceServiceOptions {
  node: SequenceNode;
  state: SequenceStateMachine;
  /** This node's name in allocations (e.g. `node-1`). */
  owner: string;
  /**
   * Monotonic clock (ms) for the adaptive step and for ReadIndex rounds' start stamps, which are compared with
   * `IncrOptions.arrivedAt`: callers must stamp arrivals on this clock. Default performance.now.
   */
  monotonic?: () => number;
  /**
   * Told about the values handed out, as ranges per segment: when a segment is left, when values stop being
   * contiguous, and every `rangeReportMs` (default 1,000) for the segment in use. The audit trail's `ids_range`.
   */
  onRange?: (r: IssuedRange) => void;
  rangeReportMs?: number;
  /** Fetch the next segment when this fraction of the current one is used. Default 0.5 (as March). */
  prefetchAt?: number;
  /**
   * Adaptive step (Leaf): a segment used up faster than this doubles the next one (up to maxStep),
   * one lasting over twice this halves it (down to minStep). Default 15 minutes, as Leaf.
   */
  segmentLifetimeMs?: number;
  /** Requests waiting for a segment, per key; beyond it they are refused as overloaded. Default 10,000. */
  maxWaitersPerKey?: number;
  /** Create a missing key on first use with these options; undefined (the default) refuses it. */
  autoCreate?: CreateOptions;
  /**
   * How a follower allocates segments of `node`-mode keys: sends the alloc command to the leader
   * (over HTTP with the cluster secret, see start.ts) and returns its result. Absent: followers
   * answer node-mode keys with the leader's address, like strict ones.
   */
  remoteAlloc?: (cmd: AllocCommand) => Promise<SequenceResult>;
  /** ReadIndex rounds in flight at once for strict requests (RoundCoalescer). Default 2. */
  readRoundsInFlight?: number;
  /**
   * This process's part of its allocation requestIds (unique per process, so a retried allocation is recognised and
   * another process's is not). Default: 6 random bytes, hex; the simulator passes one from its seed.
   */
  incarnation?: string;
}

export type AllocCommand = Extract<SequenceCommand, { op: 'alloc' }>;

/** A refusal of the replicated state (not_found, exhausted, exists, invalid_argument, ...). */
export class SequenceRefusedError extends Error {
  constructor(readonly refusal: SequenceError) {
    super(refusal.message);
    this.name = 'SequenceRefusedError';
  }
}

/** A reply that does not answer the request it was sent for: an error, never a value. */
export class SequenceReplyMismatchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SequenceReplyMismatchError';
  }
}

/** Too many requests are waiting for this key's next segment. */
export class SequenceOverloadedError extends Error {
  constructor(key: string, limit: number) {
    super(`overloaded: ${limit} requests are already waiting for a segment of ${JSON.stringify(key)}`);
    this.name = 'OverloadedError';
  }
}

interface Segment {
  start: bigint;
  next: bigint;
  end: bigint;
  size: bigint;
  /** Values handed out from this segment and not reported yet (`onRange`): [from, to], contiguous. */
  pending?: { from: bigint; to: bigint };
}

export interface IncrOptions {
  /**
   * When the request arrived, on the service's `monotonic` clock (performance.now() by default): at or after the
   * moment the server had all of it, e.g. when the bytes that completed a pipelined command were read. A ReadIndex
   * round that started at or after it, in the same term, may answer it (decision 0004). Absent: a round started by this call.
   */
  arrivedAt?: number;
}

/** Values of `key` this node handed out from one segment: [first, last], `count` of them (audit `ids_range`). */
export interface IssuedRange {
  key: string;
  node: string;
  /** The segment's first value (identifies the segment). */
  segment: bigint;
  first: bigint;
  last: bigint;
  count: bigint;
}

/** This leader's serving state of one key, valid for one term only. */
interface KeyState {
  /** strict: served only in `term`, by the leader. node: this node's own segments, any role. */
  strict: boolean;
  term: number;
  current: Segment | undefined;
  spare: Segment | undefined;
  fetching: Promise<void> | undefined;
  step: number;
  /** When the current segment was taken into use (monotonic ms), for the adaptive step. */
  currentSince: number;
  lastIssued: bigint | undefined;
  waiters: number;
  /** node mode: the key's record it was made for (`SequenceStateMachine.recordOf`); a re-created key starts afresh. */
  record: object | undefined;
}

/**
 * Serves `strict`-mode sequence values on the leader (issue 11).
 *
 * Values come from segments [a, b) allocated by proposals (the high-water mark is persisted ahead
 * of use). Two segments are kept per key (double buffer): the next one is fetched when the current
 * one is `prefetchAt` used, so switching does not wait for a proposal.
 *
 * Why values strictly increase across the cluster, across failovers (docs/decisions/0004):
 * - every value handed out is preceded by a ReadIndex round that started after the request arrived,
 *   and is served only if this node still leads in the term its segments were allocated in. A
 *   deposed leader's round cannot be confirmed once a quorum voted for a newer term, so it stops
 *   serving before the new leader can serve anything;
 * - segments are dropped on any change of term or role: a new leader allocates fresh segments,
 *   which the log orders above every segment allocated before.
 * Values skipped (a segment left behind at a failover, a remainder too short for INCRBY n) are a gap,
 * never a repeat.
 */
export class SequenceService {
  private readonly keys = new Map<string, KeyState>();
  /** `node`-mode keys: this node's own segments survive role and term changes. */
  private readonly nodeKeys = new Map<string, KeyState>();
  /** The term in which this node, leading, last confirmed a round before serving node mode (see `incrBy`). */
  private nodeModeTerm = -1;
  private readonly confirmer: RoundCoalescer;
  private readonly mono: () => number;
  private readonly prefetchAt: number;
  private readonly lifetime: number;
  private readonly maxWaiters: number;
  private readonly unsubscribe: () => void;
  private readonly incarnation: string;
  private requestSeq = 0;
  /** `issuedValues`: values handed out by this node (INCR, INCRBY, HTTP), read by the metrics at scrape time. */
  readonly stats = {
    issuedValues: 0,
    /** Requests that found both buffers empty and waited for a segment proposal (issue 11: refills must not stall). */
    stalls: 0,
    /**
     * The most segment proposals one request has waited for. A stall joins the prefetch in flight, or starts the
     * one fetch it needs (the first request of a term): 1. More means a burst outran a refill.
     */
    stallFetchesMax: 0,
  };

  /** ReadIndex rounds started for strict requests, and requests the leader lease answered with none (decision 0009). */
  get confirmStats(): { readonly rounds: number; readonly leased: number } {
    return this.confirmer.stats;
  }

  constructor(private readonly o: SequenceServiceOptions) {
    this.mono = o.monotonic ?? (() => performance.now());
    this.incarnation = o.incarnation ?? randomBytes(6).toString('hex');
    // Rounds are stamped on the clock callers stamp arrivals on (`IncrOptions.arrivedAt`): one clock, or the
    // comparison "started after it arrived" means nothing.
    this.confirmer = new RoundCoalescer(
      () => o.node.linearizableRead(),
      this.mono,
      () => o.node.term(),
      o.readRoundsInFlight ?? 2,
      o.node.holdsLeaderLease === undefined
        ? undefined
        : (tag) => typeof tag === 'number' && (o.node.holdsLeaderLease as (t: number) => boolean)(tag),
    );
    this.prefetchAt = o.prefetchAt ?? 0.5;
    if (!(this.prefetchAt > 0 && this.prefetchAt <= 1)) throw new Error('prefetchAt must be in (0, 1]');
    this.lifetime = o.segmentLifetimeMs ?? 15 * 60_000;
    this.maxWaiters = o.maxWaitersPerKey ?? 10_000;
    this.unsubscribe = o.node.onRoleChange(() => {
      this.reportAll(this.keys);
      this.keys.clear();
    });
    if (o.onRange) {
      this.rangeTimer = setInterval(() => {
        this.reportAll(this.keys);
        this.reportAll(this.nodeKeys);
      }, o.rangeReportMs ?? 1000);
      this.rangeTimer.unref();
    }
  }

  private rangeTimer: ReturnType<typeof setInterval> | undefined;

  /** Reports what was handed out from `seg` since its last report. */
  private report(key: string, seg: Segment | undefined): void {
    const p = seg?.pending;
    if (!seg || !p || !this.o.onRange) return;
    seg.pending = undefined;
    this.o.onRange({
      key,
      node: this.o.owner,
      segment: seg.start,
      first: p.from,
      last: p.to,
      count: p.to - p.from + 1n,
    });
  }

  private reportAll(keys: Map<string, KeyState>): void {
    for (const [key, ks] of keys) {
      this.report(key, ks.current);
      this.report(key, ks.spare);
    }
  }

  /** Notes [first, last] handed out from `seg` (reported later, merged with contiguous neighbours). */
  private issued(key: string, seg: Segment, first: bigint, last: bigint): void {
    if (!this.o.onRange) return;
    if (seg.pending && seg.pending.to + 1n === first) seg.pending.to = last;
    else {
      this.report(key, seg);
      seg.pending = { from: first, to: last };
    }
  }

  close(): void {
    this.unsubscribe();
    if (this.rangeTimer) clearInterval(this.rangeTimer);
    this.reportAll(this.keys);
    this.reportAll(this.nodeKeys);
    this.keys.clear();
  }

  /**
   * `incrBy` answered synchronously, or undefined when it cannot be now (the caller then calls `incrBy`, which answers
   * or refuses). It answers only a strict key this leader already serves in its current term, from its buffered
   * segments, when a ReadIndex round that started at or after `arrivedAt` (on the service's clock) in this term has
   * already confirmed: the same rule as `incrBy` (decision 0004), without a promise. A pipeline read in one chunk thus
   * costs one round and one promise, for its first command; the rest are answered inline.
   *
   * Only keys in `keys` (made by `stateOf` after a confirmed round of this term, so after every earlier term's entries
   * were applied) are served: they are strict, and a delete of one in this term goes through `delete`, which drops
   * it. Never throws.
   */
  incrByNow(key: string, count: bigint, arrivedAt: number): bigint | undefined {
    const ks = this.servingNow(key, count, arrivedAt);
    if (ks === undefined) return undefined;
    const took = this.take(key, ks, count);
    if (took !== undefined) this.maybePrefetch(key, ks);
    return took;
  }

  /**
   * `times` requests `incrBy(key, count)` that arrived together (a pipeline of the same INCR), answered now as
   * `incrByNow` answers one: the results of the first k of them in order (k ≤ times; 0 when none can be answered
   * now, and the rest then go through `incrBy`). Each gets the next `count` values; the segment in use is finished
   * before the spare is started, as one request at a time would (no gap). Never throws.
   */
  incrRepeatedNow(key: string, count: bigint, times: number, arrivedAt: number): bigint[] {
    const out: bigint[] = [];
    const ks = this.servingNow(key, count, arrivedAt);
    if (ks === undefined) return out;
    while (out.length < times) {
      // As many whole requests as the segment in use still holds, at least one (which may start the spare).
      const cur = ks.current;
      let k = cur === undefined ? 1 : Number((cur.end - cur.next) / count);
      k = Math.max(1, Math.min(k, times - out.length));
      const last = this.take(key, ks, count * BigInt(k));
      if (last === undefined) break;
      for (let v = last - count * BigInt(k - 1); v <= last; v += count) out.push(v);
    }
    this.maybePrefetch(key, ks);
    return out;
  }

  /** The serving state `key` is answered from now (the conditions of `incrByNow`), or undefined. */
  private servingNow(key: string, count: bigint, arrivedAt: number): KeyState | undefined {
    const ks = this.keys.get(key);
    if (ks === undefined || count < 1n || count > MAX_ALLOC_BIG) return undefined;
    // Serving state can outlive its key: a delete whose proposal timed out (outcome unknown) and was applied later
    // leaves it behind (review of 97ed4d2: a deleted key answered, or a key recreated in node mode stepped back).
    if (this.o.state.modeOf(key) !== 'strict') return undefined;
    const node = this.o.node;
    if (!node.isLeader()) return undefined;
    const term = node.term();
    if (ks.term !== term || !this.confirmer.confirmedAtOrAfter(arrivedAt, term)) return undefined;
    return ks;
  }

  /**
   * Reserves `count` consecutive values of `key` and returns the last one (as Redis INCRBY returns
   * the new value): the caller owns [result − count + 1, result]. INCR is `incrBy(key, 1n)`.
   */
  incrBy(key: string, count: bigint, opts: IncrOptions = {}): Promise<bigint> {
    // Keys with serving state here passed checkKey when it was made; only new ones are checked again.
    if (!this.keys.has(key) && !this.nodeKeys.has(key)) {
      const keyProblem = checkKey(key);
      if (keyProblem)
        return Promise.reject(
          new SequenceRefusedError({ ok: false, code: 'invalid_argument', message: keyProblem }),
        );
    }
    if (count < 1n || count > MAX_ALLOC_BIG)
      return Promise.reject(
        new SequenceRefusedError({
          ok: false,
          code: 'invalid_argument',
          message: `count must be in [1, ${MAX_ALLOC}], got ${count}`,
        }),
      );
    const node = this.o.node;
    const mode = this.o.state.get(key)?.mode;
    const leader = node.isLeader();
    if (mode === 'node' && (leader || this.o.remoteAlloc !== undefined)) {
      // A new leader's applied state may lag what its log holds as committed (a delete, a re-create as strict): once
      // per term, it serves node mode only after a ReadIndex round, which applies every earlier entry (review of
      // stop 35). A follower serves from what it applied (docs/sequences.md, "Deleting a key").
      if (leader && this.nodeModeTerm !== node.term()) return this.incrAfterTermBarrier(key, count, opts);
      return this.incrNodeMode(key, count);
    }
    if (!leader) return Promise.reject(node.notLeaderError());
    const term = node.term();
    if (mode === 'strict') {
      // The common case: a strict key this leader knows. A round that started after the request arrived, in this
      // term, answers it (one round serves every request read in one turn, and a pipeline that arrived together).
      if (opts.arrivedAt !== undefined && this.confirmer.confirmedSince({ at: opts.arrivedAt, tag: term })) {
        try {
          const v = this.takeStrict(key, count, term);
          if (v !== undefined) return Promise.resolve(v);
        } catch (err) {
          return Promise.reject(err);
        }
        return this.serveStrict(key, count, term);
      }
      const confirmed = this.confirmer.confirm(
        opts.arrivedAt === undefined ? undefined : { at: opts.arrivedAt, tag: term },
      );
      return confirmed.then(() => this.takeStrict(key, count, term) ?? this.serveStrict(key, count, term));
    }
    return this.incrSlow(key, count, term, opts);
  }

  /**
   * After the round: the value from the buffered segments when they hold `count` values (undefined when not), only
   * while this node still leads the term the round ran in.
   */
  private takeStrict(key: string, count: bigint, term: number): bigint | undefined {
    // The round started after the request arrived, while this node led `term`; serve only in it.
    if (!this.o.node.isLeader() || this.o.node.term() !== term) throw this.o.node.notLeaderError();
    const ks = this.stateOf(key, term);
    const took = this.take(key, ks, count);
    if (took !== undefined) this.maybePrefetch(key, ks);
    return took;
  }

  /** The leader's first node-mode request of a term: a round first, then the request as its applied state says. */
  private async incrAfterTermBarrier(key: string, count: bigint, opts: IncrOptions): Promise<bigint> {
    const term = this.o.node.term();
    await this.o.node.linearizableRead();
    if (this.o.node.isLeader() && this.o.node.term() === term) this.nodeModeTerm = term;
    return this.incrBy(key, count, opts);
  }

  /** A key not known here yet (auto-creation, or a refusal after asking the log). */
  private async incrSlow(key: string, count: bigint, term: number, opts: IncrOptions): Promise<bigint> {
    const confirmed = this.confirmer.confirm(
      opts.arrivedAt === undefined ? undefined : { at: opts.arrivedAt, tag: term },
    );
    // Awaited only after the key is known, which can take a proposal: a round that fails meanwhile must not be an
    // unhandled rejection, which ends the process (full simulation, swarm seed 152891). `await confirmed` below
    // still sees the failure.
    confirmed.catch(() => {});
    if (!this.o.state.get(key)) await this.ensureExists(key);
    if (this.o.state.get(key)?.mode === 'node') return this.incrNodeMode(key, count);
    await confirmed;
    return this.serveStrict(key, count, term);
  }

  /** Serves a strict request whose round has confirmed: from the buffer, or after fetching a segment. */
  private async serveStrict(key: string, count: bigint, term: number): Promise<bigint> {
    if (!this.o.node.isLeader() || this.o.node.term() !== term) throw this.o.node.notLeaderError();
    let fetchesWaited = 0;
    for (;;) {
      const ks = this.stateOf(key, term);
      const took = this.take(key, ks, count);
      if (took !== undefined) {
        this.maybePrefetch(key, ks);
        return took;
      }
      if (count > BigInt(ks.step)) {
        // Larger than a segment: a segment of its own, exactly this size. Everything buffered is
        // below it and is dropped by take() (a gap), so later values stay above this one.
        const seg = await this.allocate(key, ks, Number(count), true);
        if (this.keys.get(key) !== ks) continue; // the term changed while it was allocated
        ks.lastIssued = seg.end - 1n;
        this.stats.issuedValues += Number(count);
        this.issued(key, seg, seg.start, seg.end - 1n);
        this.report(key, seg);
        return seg.end - 1n;
      }
      if (ks.waiters >= this.maxWaiters) throw new SequenceOverloadedError(key, this.maxWaiters);
      fetchesWaited = this.stalled(fetchesWaited);
      ks.waiters++;
      try {
        await this.fetch(key, ks);
      } finally {
        ks.waiters--;
      }
    }
  }

  /**
   * True when this node answers `key` itself, in any role: a `node`-mode sequence it knows of, and a
   * way to allocate segments (it leads, or it can ask the leader). Servers use it to decide MOVED.
   */
  servesLocally(key: string): boolean {
    return (
      this.o.state.get(key)?.mode === 'node' && (this.o.node.isLeader() || this.o.remoteAlloc !== undefined)
    );
  }

  /**
   * `node` mode: values from this node's own segments. Unique across the cluster (segments are
   * allocated through the log), increasing per node; no leadership check, since no order across
   * nodes is promised. A restart leaves the rest of its segments unused (a gap).
   */
  private incrNodeMode(key: string, count: bigint): Promise<bigint> {
    // The common case, without an async function's hops: the buffered segments hold the values.
    const ks = this.nodeStateOf(key);
    const took = this.take(key, ks, count);
    if (took !== undefined) {
      this.maybePrefetch(key, ks);
      return Promise.resolve(took);
    }
    return this.incrNodeModeSlow(key, count);
  }

  private async incrNodeModeSlow(key: string, count: bigint): Promise<bigint> {
    let fetchesWaited = 0;
    for (;;) {
      // The key may have been deleted, or re-created in strict mode, while this request waited for a segment: a
      // strict key is never served here (review 2 of stop 35: a follower answered a strict key's value, no round).
      if (this.o.state.modeOf(key) !== 'node') {
        this.dropServing(key);
        throw new SequenceRefusedError({
          ok: false,
          code: 'not_found',
          message: `no node-mode sequence ${JSON.stringify(key)} (deleted or re-created while the request waited)`,
        });
      }
      const ks = this.nodeStateOf(key);
      const took = this.take(key, ks, count);
      if (took !== undefined) {
        this.maybePrefetch(key, ks);
        return took;
      }
      if (count > BigInt(ks.step)) {
        const seg = await this.allocate(key, ks, Number(count), true);
        if (this.nodeKeys.get(key) !== ks || ks.record !== this.o.state.recordOf(key)) continue;
        if (ks.lastIssued !== undefined && seg.next <= ks.lastIssued) continue; // defensive: never go back
        ks.lastIssued = seg.end - 1n;
        this.stats.issuedValues += Number(count);
        this.issued(key, seg, seg.start, seg.end - 1n);
        this.report(key, seg);
        return seg.end - 1n;
      }
      if (ks.waiters >= this.maxWaiters) throw new SequenceOverloadedError(key, this.maxWaiters);
      fetchesWaited = this.stalled(fetchesWaited);
      ks.waiters++;
      try {
        await this.fetch(key, ks);
      } finally {
        ks.waiters--;
      }
    }
  }

  /** Counts one more segment fetch a request waits for; returns its new count. */
  private stalled(fetchesWaited: number): number {
    if (fetchesWaited === 0) this.stats.stalls++;
    const n = fetchesWaited + 1;
    if (n > this.stats.stallFetchesMax) this.stats.stallFetchesMax = n;
    return n;
  }

  private nodeStateOf(key: string): KeyState {
    let ks = this.nodeKeys.get(key);
    const record = this.o.state.recordOf(key);
    if (ks !== undefined && ks.record !== record) {
      // The key was deleted (and maybe created again) since these segments were allocated, through any member: their
      // values lie below the new record's, so serving them would step back on this node (review of stop 35).
      this.dropServing(key);
      ks = undefined;
    }
    if (!ks) {
      ks = this.newKeyState(key, false, 0);
      ks.record = record;
      this.nodeKeys.set(key, ks);
    }
    return ks;
  }

  private newKeyState(key: string, strict: boolean, term: number): KeyState {
    return {
      strict,
      term,
      current: undefined,
      spare: undefined,
      fetching: undefined,
      step: this.o.state.get(key)?.step ?? 1000,
      currentSince: this.mono(),
      lastIssued: undefined,
      waiters: 0,
      record: undefined,
    };
  }

  /** The map a key's serving state lives in. */
  private mapOf(ks: KeyState): Map<string, KeyState> {
    return ks.strict ? this.keys : this.nodeKeys;
  }

  /**
   * The last value this leader issued for `key`, or, when it issued none since it was elected, the
   * highest value anyone may have issued (the first value of its current segment minus one, or the
   * high-water mark minus one). Never below an issued value, never above a value issued later.
   */
  async get(key: string): Promise<bigint> {
    // As INCR: a leader answers from node-mode state only after its once-per-term round (review 2 of stop 35).
    if (this.o.node.isLeader() && this.nodeModeTerm !== this.o.node.term()) {
      const term = this.o.node.term();
      await this.o.node.linearizableRead();
      if (this.o.node.isLeader() && this.o.node.term() === term) this.nodeModeTerm = term;
    }
    if (this.servesLocally(key)) {
      // node mode: what this node issued (no order across nodes is promised).
      const ks = this.nodeKeys.get(key);
      if (ks?.lastIssued !== undefined) return ks.lastIssued;
      if (ks?.current) return ks.current.next - 1n;
      return BigInt(this.o.state.get(key)?.next ?? '1') - 1n;
    }
    if (!this.o.node.isLeader()) throw this.o.node.notLeaderError();
    const term = this.o.node.term();
    await this.confirmer.confirm();
    if (!this.o.node.isLeader() || this.o.node.term() !== term) throw this.o.node.notLeaderError();
    const info = this.o.state.get(key);
    if (!info)
      throw new SequenceRefusedError({
        ok: false,
        code: 'not_found',
        message: `no sequence ${JSON.stringify(key)}`,
      });
    const ks = this.keys.get(key);
    if (ks && ks.term === term) {
      if (ks.lastIssued !== undefined) return ks.lastIssued;
      if (ks.current) return ks.current.next - 1n;
      if (ks.spare) return ks.spare.next - 1n;
    }
    return BigInt(info.next) - 1n;
  }

  /** Allocates a segment for a client (SEQ.ALLOC key n): [start, end) with end − start = n, or exhausted. */
  async alloc(key: string, count: number, requestId?: string): Promise<AllocOk> {
    if (!Number.isSafeInteger(count) || count < 1 || count > MAX_ALLOC)
      throw new SequenceRefusedError({
        ok: false,
        code: 'invalid_argument',
        message: `count must be in [1, ${MAX_ALLOC}], got ${count}`,
      });
    await this.ensureExists(key);
    return this.proposeAlloc(key, count, true, requestId);
  }

  async create(key: string, options: CreateOptions): Promise<{ created: boolean; info: SequenceInfo }> {
    const cmd = buildCreate(key, options);
    if ('ok' in cmd) throw new SequenceRefusedError(cmd);
    const r = (await this.o.node.propose(encodeSequenceCommand(cmd))) as SequenceResult;
    if (!r.ok) throw new SequenceRefusedError(r);
    if (r.op !== 'create' || r.key !== key)
      throw new SequenceReplyMismatchError(`create ${key} answered with ${describe(r)}`);
    return { created: r.created, info: r.info };
  }

  async delete(key: string): Promise<void> {
    const problem = checkKey(key);
    if (problem) throw new SequenceRefusedError({ ok: false, code: 'invalid_argument', message: problem });
    // A missing key is refused before the log (issue 15 item 2), after a ReadIndex round so that a key whose create
    // was acknowledged (maybe by a previous leader) is seen.
    await this.o.node.linearizableRead();
    if (this.o.state.get(key) === undefined)
      throw new SequenceRefusedError({
        ok: false,
        code: 'not_found',
        message: `no sequence ${JSON.stringify(key)}`,
      });
    let r: SequenceResult;
    try {
      r = (await this.o.node.propose(encodeSequenceCommand({ op: 'delete', key }))) as SequenceResult;
    } catch (err) {
      // Outcome unknown (a timeout, a lost leadership): the delete may still be applied. Drop what is buffered, as a
      // delete would (a gap at worst); the serving paths also check the replicated state.
      this.dropServing(key);
      throw err;
    }
    if (!r.ok) throw new SequenceRefusedError(r);
    if (r.op !== 'delete' || r.key !== key)
      throw new SequenceReplyMismatchError(`delete ${key} answered with ${describe(r)}`);
    this.dropServing(key);
  }

  /** Forgets the key's buffered segments; what was handed out from them is still reported (round 4). */
  private dropServing(key: string): void {
    for (const m of [this.keys, this.nodeKeys]) {
      const ks = m.get(key);
      if (ks) {
        this.report(key, ks.current);
        this.report(key, ks.spare);
      }
    }
    this.keys.delete(key);
    this.nodeKeys.delete(key);
  }

  /** Linearizable on the leader (ReadIndex); `stale` reads this node's applied state. */
  async info(key: string, opts: { stale?: boolean } = {}): Promise<SequenceInfo | undefined> {
    if (!opts.stale) await this.o.node.linearizableRead();
    return this.o.state.get(key);
  }

  async list(opts: { stale?: boolean; after?: string; limit?: number } = {}): Promise<SequenceInfo[]> {
    if (!opts.stale) await this.o.node.linearizableRead();
    return this.o.state.list(opts.after, opts.limit);
  }

  /** Serving state for tests and metrics: the current segment of a key on this leader. */
  segmentOf(key: string): { next: bigint; end: bigint; spare: boolean; step: number } | undefined {
    const ks = this.keys.get(key);
    if (!ks?.current) return undefined;
    return { next: ks.current.next, end: ks.current.end, spare: ks.spare !== undefined, step: ks.step };
  }

  private async ensureExists(key: string): Promise<void> {
    if (this.o.state.get(key)) return;
    if (!this.o.autoCreate) {
      // Ask the log, not this node's possibly stale state, before refusing.
      await this.o.node.linearizableRead();
      if (this.o.state.get(key)) return;
      throw new SequenceRefusedError({
        ok: false,
        code: 'not_found',
        message: `no sequence ${JSON.stringify(key)} (create it with SEQ.CREATE; auto-creation is off)`,
      });
    }
    await this.create(key, this.o.autoCreate);
  }

  /** The serving state of `key` for the current term (a new term starts empty). */
  private stateOf(key: string, term: number): KeyState {
    // The key may have been deleted (or recreated in node mode) while this request waited for its round or a
    // segment: strict serving state is for strict keys only (a recreated strict key continues above its tombstone,
    // so its old segments stay below the new ones).
    if (this.o.state.modeOf(key) !== 'strict') {
      this.keys.delete(key);
      throw new SequenceRefusedError({
        ok: false,
        code: 'not_found',
        message: `no strict sequence ${JSON.stringify(key)} (deleted while the request waited)`,
      });
    }
    let ks = this.keys.get(key);
    if (!ks || ks.term !== term) {
      ks = this.newKeyState(key, true, term);
      this.keys.set(key, ks);
    }
    return ks;
  }

  /**
   * Takes `count` consecutive values from the current segment (or the spare); undefined if neither
   * has them. A segment at or below the last value issued (left behind by a dedicated INCRBY
   * segment) is dropped: values only ever go up.
   */
  private take(key: string, ks: KeyState, count: bigint): bigint | undefined {
    if (ks.strict && (!this.o.node.isLeader() || this.o.node.term() !== ks.term))
      throw this.o.node.notLeaderError();
    const floor = ks.lastIssued === undefined ? undefined : ks.lastIssued + 1n;
    for (;;) {
      const cur = ks.current;
      if (cur && floor !== undefined && cur.next < floor) cur.next = cur.end < floor ? cur.end : floor;
      if (cur && cur.end - cur.next >= count) {
        const first = cur.next;
        const last = cur.next + count - 1n;
        cur.next = last + 1n;
        ks.lastIssued = last;
        this.stats.issuedValues += Number(count);
        this.issued(key, cur, first, last);
        return last;
      }
      if (!ks.spare) return undefined;
      // The rest of the current segment is too short: a gap, never a repeat.
      if (cur) {
        this.adapt(key, ks, cur);
        this.report(key, cur);
      }
      ks.current = ks.spare;
      ks.spare = undefined;
      ks.currentSince = this.mono();
    }
  }

  /** Leaf's adaptive step: segments used up quickly grow, segments that last long shrink. */
  private adapt(key: string, ks: KeyState, used: Segment): void {
    const info = this.o.state.get(key);
    if (!info) return;
    const lasted = this.mono() - ks.currentSince;
    if (lasted < this.lifetime && used.size >= BigInt(ks.step)) ks.step = Math.min(ks.step * 2, info.maxStep);
    else if (lasted > 2 * this.lifetime) ks.step = Math.max(Math.floor(ks.step / 2), info.minStep);
  }

  private maybePrefetch(key: string, ks: KeyState): void {
    const cur = ks.current;
    if (!cur || ks.spare || ks.fetching) return;
    const used = cur.size - (cur.end - cur.next);
    if (Number(used) >= Number(cur.size) * this.prefetchAt) this.fetch(key, ks).catch(() => {});
  }

  /** Fetches one segment into the buffer (one fetch at a time per key). */
  private fetch(key: string, ks: KeyState): Promise<void> {
    if (ks.fetching) return ks.fetching;
    const p = this.allocate(key, ks, ks.step, false)
      .then((seg) => {
        if (this.mapOf(ks).get(key) !== ks) return; // a new term: this segment is left unused (a gap)
        if (ks.lastIssued !== undefined && seg.next <= ks.lastIssued) return; // below what was issued
        if (!ks.current || ks.current.next >= ks.current.end) {
          if (ks.current) {
            this.adapt(key, ks, ks.current);
            this.report(key, ks.current);
          }
          ks.current = seg;
          ks.currentSince = this.mono();
        } else ks.spare = seg;
      })
      .finally(() => {
        if (ks.fetching === p) ks.fetching = undefined;
      });
    ks.fetching = p;
    return p;
  }

  private async allocate(key: string, ks: KeyState, count: number, exact: boolean): Promise<Segment> {
    const r = await this.proposeAlloc(key, count, exact);
    if (ks.strict && this.o.node.term() !== ks.term) throw this.o.node.notLeaderError();
    // A segment of the key as it is now in the log: a lagging member asking for node mode may get one of a key
    // re-created as strict, whose values only the leader may answer, after a round (review 3 of stop 35). Dropped: a gap.
    const want = ks.strict ? 'strict' : 'node';
    if (r.mode !== want) {
      if (!ks.strict) this.dropServing(key);
      throw new SequenceRefusedError({
        ok: false,
        code: 'not_found',
        message: `no ${want}-mode sequence ${JSON.stringify(key)}: it is ${r.mode} in the log now`,
      });
    }
    const start = BigInt(r.start);
    const end = BigInt(r.end);
    if (start < 0n || end > MAX_VALUE + 1n || end <= start)
      throw new SequenceReplyMismatchError(`segment ${r.start}..${r.end} is out of range`);
    return { start, next: start, end, size: end - start };
  }

  private async proposeAlloc(
    key: string,
    count: number,
    exact: boolean,
    requestId?: string,
  ): Promise<AllocOk> {
    const id = requestId ?? `${this.o.owner}:${this.incarnation}:${++this.requestSeq}`;
    const cmd: AllocCommand = { op: 'alloc', key, count, owner: this.o.owner, requestId: id, exact };
    const r =
      !this.o.node.isLeader() && this.o.remoteAlloc
        ? await this.o.remoteAlloc(cmd)
        : ((await this.o.node.propose(encodeSequenceCommand(cmd))) as SequenceResult);
    if (!r.ok) throw new SequenceRefusedError(r);
    if (r.op !== 'alloc' || r.key !== key || r.requestId !== id || r.owner !== this.o.owner)
      throw new SequenceReplyMismatchError(`alloc ${key} (${id}) answered with ${describe(r)}`);
    const n = BigInt(r.end) - BigInt(r.start);
    if (n < 1n || n > BigInt(count) || (exact && n !== BigInt(count)))
      throw new SequenceReplyMismatchError(`alloc ${key} of ${count} answered with ${r.start}..${r.end}`);
    return r;
  }
}

const MAX_ALLOC_BIG = BigInt(MAX_ALLOC);

function describe(r: SequenceResult): string {
  return JSON.stringify(r).slice(0, 200);
}
