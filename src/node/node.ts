import { EventEmitter } from 'node:events';
import { RawNode } from '../raft/raw-node.js';
import {
  type ConfChange,
  type ConfState,
  type Entry,
  type Message,
  NONE,
  type NodeId,
  ProposalDroppedError,
  type RandomInt,
  type Ready,
  type Role,
  type Status,
} from '../raft/types.js';
import { decodeEnvelope, encodeEnvelope, pack, unpack } from './envelope.js';
import {
  type LeaderHint,
  NodeStoppedError,
  NotLeaderError,
  OverloadedError,
  ProposalTimeoutError,
  ReadTimeoutError,
} from './errors.js';
import {
  decodeMemberContext,
  encodeMemberContext,
  MemberDirectory,
  type MemberInfo,
  type SysCommand,
} from './members.js';
import {
  type NodeClock,
  type NodeStorage,
  type NodeTransport,
  systemClock,
  type TransportSink,
} from './seams.js';
import type { StateMachine } from './state-machine.js';

/** Minimal structured logger (pino-compatible subset). */
export interface NodeLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

const silentLogger: NodeLogger = { info() {}, warn() {}, error() {} };

export interface FloeNodeOptions<R> {
  id: NodeId;
  storage: NodeStorage;
  transport: NodeTransport;
  stateMachine: StateMachine<R>;
  /** Members of a brand-new cluster (ignored once the log or a snapshot says otherwise). */
  initialMembers: MemberInfo[];
  /** This node's client-facing addresses, published through the log when it leads. */
  self?: { httpAddr?: string; respAddr?: string };
  /** Milliseconds per Raft tick. Default 50. */
  tickMs?: number;
  /** Election timeout in ticks (randomized in [e, 2e)). Default 10 → 0.5–1 s with 50 ms ticks. */
  electionTicks?: number;
  /** Heartbeat interval in ticks. Default 1. */
  heartbeatTicks?: number;
  /** Snapshot the state machine every this many applied entries. Default 10,000. */
  snapshotEvery?: number;
  /** Proposals not applied within this time fail with ProposalTimeoutError (outcome unknown). Default 5,000. */
  proposalTimeoutMs?: number;
  /** Proposals waiting to be applied at once; more fail with OverloadedError. Default 20,000. */
  maxPendingProposals?: number;
  /** Seeded randomness for the core's election timeouts. */
  random: RandomInt;
  clock?: NodeClock;
  logger?: NodeLogger;
  leaderLease?: boolean;
}

interface PendingProposal<R> {
  resolve(result: R): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

interface PendingRead {
  resolve(): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
  index?: number;
}

export interface NodeEvents {
  role: [Role, NodeId];
  applied: [number];
  stopped: [string];
}

/**
 * The node runtime: drives the pure Raft core with real time and I/O.
 * Loop: ticks and messages go into the core; each Ready is persisted (one fsync for everything
 * it holds: group commit), then its messages are sent, then committed entries are applied and
 * waiting callers answered, then the core is told (advance).
 */
export class FloeNode<R = unknown> extends EventEmitter<NodeEvents> implements TransportSink {
  readonly id: NodeId;
  private readonly raw: RawNode;
  private readonly storage: NodeStorage;
  private readonly transport: NodeTransport;
  private readonly sm: StateMachine<R>;
  private readonly clock: NodeClock;
  private readonly log: NodeLogger;
  private readonly opts: Required<
    Pick<
      FloeNodeOptions<R>,
      | 'tickMs'
      | 'electionTicks'
      | 'heartbeatTicks'
      | 'snapshotEvery'
      | 'proposalTimeoutMs'
      | 'maxPendingProposals'
    >
  >;
  private readonly self: { httpAddr?: string; respAddr?: string };
  private members: MemberDirectory;
  private conf: ConfState;
  private applied = 0;
  private snapshotIndex = 0;
  private role: Role = 'follower';
  private lead: NodeId = NONE;
  private persistedTerm = 0;
  private persistedVote: NodeId = NONE;
  private seq = 0;
  private readonly pending = new Map<number, PendingProposal<R>>();
  private readonly reads = new Map<string, PendingRead>();
  private readonly readsAwaitingApply: PendingRead[] = [];
  private ticker: NodeJS.Timeout | undefined;
  private lastTickAt = 0;
  private draining = false;
  private drainScheduled = false;
  private snapshotting = false;
  private stoppedReason: string | undefined;
  private fatal: Error | undefined;
  /** Counters for /metrics. */
  readonly stats = { proposals: 0, applied: 0, readyBatches: 0, fsyncs: 0, snapshots: 0, leaderChanges: 0 };

  constructor(options: FloeNodeOptions<R>) {
    super();
    this.id = options.id;
    this.storage = options.storage;
    this.transport = options.transport;
    this.sm = options.stateMachine;
    this.clock = options.clock ?? systemClock;
    this.log = options.logger ?? silentLogger;
    this.self = options.self ?? {};
    this.opts = {
      tickMs: options.tickMs ?? 50,
      electionTicks: options.electionTicks ?? 10,
      heartbeatTicks: options.heartbeatTicks ?? 1,
      snapshotEvery: options.snapshotEvery ?? 10_000,
      proposalTimeoutMs: options.proposalTimeoutMs ?? 5_000,
      maxPendingProposals: options.maxPendingProposals ?? 20_000,
    };

    // Restore the state machine and member directory from the newest snapshot; the core then
    // hands out every committed entry after it again, rebuilding the rest.
    const snap = this.storage.storage.snapshot();
    const init = this.storage.storage.initialState();
    this.conf = snap.metadata.index > 0 ? snap.metadata.conf : init.conf;
    this.members = new MemberDirectory(options.initialMembers);
    if (snap.data.length > 0) this.restoreSnapshotData(snap.data);
    this.applied = snap.metadata.index;
    this.snapshotIndex = snap.metadata.index;
    this.persistedTerm = init.hardState.term;
    this.persistedVote = init.hardState.vote;

    this.raw = new RawNode(
      {
        id: this.id,
        electionTicks: this.opts.electionTicks,
        heartbeatTicks: this.opts.heartbeatTicks,
        random: options.random,
        preVote: true,
        checkQuorum: true,
        leaderLease: options.leaderLease ?? false,
        applied: this.applied,
      },
      this.storage.storage,
    );
    for (const m of this.members.all()) if (m.id !== this.id) this.transport.addPeer(m.id, m.peerAddr);
  }

  /** Starts ticking. A single-voter cluster elects itself at once. */
  start(): void {
    if (this.ticker) return;
    this.lastTickAt = this.clock.monotonicMs();
    this.ticker = setInterval(() => this.onTimer(), this.opts.tickMs);
    const voters = this.conf.voters;
    if (voters.length === 1 && voters[0] === this.id) this.raw.campaign();
    this.kick();
  }

  // ---- inputs -----------------------------------------------------------------------------

  onMessage(msg: Message): void {
    if (this.stoppedReason) return;
    try {
      this.raw.step(msg);
    } catch (err) {
      this.log.warn({ err, type: msg.type, from: msg.from }, 'raft refused a peer message');
    }
    this.kick();
  }

  onUnreachable(peer: NodeId): void {
    if (this.stoppedReason) return;
    this.raw.reportUnreachable(peer);
  }

  onSnapshotStatus(peer: NodeId, ok: boolean): void {
    if (this.stoppedReason) return;
    this.raw.reportSnapshot(peer, ok);
    this.kick();
  }

  private onTimer(): void {
    // Ticks follow the monotonic clock, not the timer count: after the event loop was blocked
    // (or the process stopped), elapsed ticks are delivered so leases and check-quorum see the
    // real time that passed. Capped so a long pause does not spin.
    const now = this.clock.monotonicMs();
    let due = Math.floor((now - this.lastTickAt) / this.opts.tickMs);
    if (due <= 0) return;
    this.lastTickAt += due * this.opts.tickMs;
    due = Math.min(due, this.opts.electionTicks * 4);
    for (let i = 0; i < due; i++) this.raw.tick();
    this.kick();
  }

  // ---- client API ------------------------------------------------------------------------

  /**
   * Proposes an application command. Resolves with the state machine's result once the entry is
   * committed and applied on this node. Fails fast with NotLeaderError on a follower.
   */
  propose(command: Uint8Array): Promise<R> {
    return this.proposeEnvelope('app', command) as Promise<R>;
  }

  private proposeEnvelope(kind: 'app' | 'sys', payload: Uint8Array): Promise<unknown> {
    if (this.stoppedReason) return Promise.reject(new NodeStoppedError(this.stoppedReason));
    if (this.pending.size >= this.opts.maxPendingProposals) {
      return Promise.reject(new OverloadedError(this.opts.maxPendingProposals));
    }
    const seq = ++this.seq;
    const data = encodeEnvelope({ origin: this.id, seq, leaderTimeMs: this.clock.wallMs(), kind, payload });
    try {
      this.raw.propose(data);
    } catch (err) {
      return Promise.reject(this.translateDrop(err));
    }
    this.stats.proposals++;
    const p = new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(seq);
        reject(new ProposalTimeoutError(this.opts.proposalTimeoutMs));
      }, this.opts.proposalTimeoutMs);
      this.pending.set(seq, { resolve: resolve as (r: R) => void, reject, timer });
    });
    this.kick();
    return p;
  }

  /** Resolves once this node has applied everything committed before the call (ReadIndex). */
  linearizableRead(): Promise<void> {
    if (this.stoppedReason) return Promise.reject(new NodeStoppedError(this.stoppedReason));
    if (this.lead === NONE) return Promise.reject(new NotLeaderError(this.id, undefined));
    const ctx = pack([this.id, ++this.seq]);
    const key = Buffer.from(ctx).toString('base64');
    const p = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.reads.delete(key);
        const i = this.readsAwaitingApply.indexOf(read);
        if (i >= 0) this.readsAwaitingApply.splice(i, 1);
        reject(new ReadTimeoutError(this.opts.proposalTimeoutMs));
      }, this.opts.proposalTimeoutMs);
      const read: PendingRead = { resolve, reject, timer };
      this.reads.set(key, read);
    });
    this.raw.readIndex(ctx);
    this.kick();
    return p;
  }

  /** Adds a member as a learner; call `promote` once it has caught up (see `waitCaughtUp`). */
  async addLearner(info: MemberInfo): Promise<void> {
    await this.proposeConf({ type: 'addLearner', nodeId: info.id, context: encodeMemberContext(info) });
  }

  async promote(id: NodeId): Promise<void> {
    const info = this.members.get(id);
    await this.proposeConf({
      type: 'addVoter',
      nodeId: id,
      context: info ? encodeMemberContext(info) : undefined,
    });
  }

  async removeMember(id: NodeId): Promise<void> {
    await this.proposeConf({ type: 'remove', nodeId: id });
  }

  /** Resolves when the learner's replicated log is within `slack` entries of the leader's. */
  async waitCaughtUp(id: NodeId, timeoutMs = 30_000, slack = 100): Promise<void> {
    const deadline = this.clock.monotonicMs() + timeoutMs;
    while (this.clock.monotonicMs() < deadline) {
      const st = this.raw.status();
      if (st.role !== 'leader') throw new NotLeaderError(this.id, this.leaderHint());
      const pr = st.progress?.[id];
      if (pr && pr.match + slack >= st.lastIndex) return;
      await new Promise<void>((r) => this.once('applied', () => r()));
    }
    throw new Error(`member ${id} did not catch up within ${timeoutMs} ms`);
  }

  /** Adds a member the safe way: as a learner first, promoted once its log has caught up. */
  async addMember(info: MemberInfo, timeoutMs = 30_000): Promise<void> {
    await this.addLearner(info);
    await this.waitCaughtUp(info.id, timeoutMs);
    await this.promote(info.id);
  }

  private proposeConf(cc: ConfChange): Promise<void> {
    if (this.stoppedReason) return Promise.reject(new NodeStoppedError(this.stoppedReason));
    try {
      this.raw.proposeConfChange(cc);
    } catch (err) {
      return Promise.reject(this.translateDrop(err));
    }
    this.kick();
    // The change is done when this node applies it (we see the new membership).
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.off('applied', check);
        reject(new ProposalTimeoutError(this.opts.proposalTimeoutMs));
      }, this.opts.proposalTimeoutMs);
      const check = () => {
        const inVoters = this.conf.voters.includes(cc.nodeId);
        const inLearners = this.conf.learners.includes(cc.nodeId);
        const done =
          (cc.type === 'addLearner' && inLearners) ||
          (cc.type === 'addVoter' && inVoters) ||
          (cc.type === 'remove' && !inVoters && !inLearners);
        if (done) {
          clearTimeout(timer);
          this.off('applied', check);
          resolve();
        }
      };
      this.on('applied', check);
    });
  }

  /** Asks the leader (this node) to hand leadership to `to`; resolves when `to` leads. */
  async transferLeadership(to: NodeId, timeoutMs = 5_000): Promise<void> {
    if (this.role !== 'leader') throw new NotLeaderError(this.id, this.leaderHint());
    this.raw.transferLeadership(to);
    this.kick();
    await this.waitFor(() => this.lead === to, timeoutMs, `leadership did not move to ${to}`);
  }

  private waitFor(pred: () => boolean, timeoutMs: number, what: string): Promise<void> {
    if (pred()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const onRole = () => {
        if (pred()) {
          clearTimeout(timer);
          this.off('role', onRole);
          resolve();
        }
      };
      const timer = setTimeout(() => {
        this.off('role', onRole);
        reject(new Error(`${what} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.on('role', onRole);
    });
  }

  /** Resolves once some leader is known (useful after start). */
  waitForLeader(timeoutMs = 10_000): Promise<void> {
    return this.waitFor(() => this.lead !== NONE, timeoutMs, 'no leader elected');
  }

  /**
   * Graceful stop: a leader first hands leadership to the most caught-up voter so clients see
   * a short blip, not an election timeout.
   */
  async stop(reason = 'stopped'): Promise<void> {
    if (this.stoppedReason) return;
    if (this.role === 'leader' && this.conf.voters.length > 1) {
      const st = this.raw.status();
      let best: NodeId = NONE;
      let bestMatch = -1;
      for (const v of this.conf.voters) {
        if (v === this.id) continue;
        const m = st.progress?.[v]?.match ?? -1;
        if (m > bestMatch) {
          best = v;
          bestMatch = m;
        }
      }
      if (best !== NONE) {
        try {
          await this.transferLeadership(best, this.opts.tickMs * this.opts.electionTicks * 2);
        } catch (err) {
          this.log.warn({ err: String(err) }, 'leadership transfer before stop did not finish');
        }
      }
    }
    this.halt(reason);
    // Let an in-flight persist finish so nothing acknowledged is half-written.
    while (this.draining) await new Promise((r) => setImmediate(r));
    await this.transport.close();
    await this.storage.close();
  }

  private halt(reason: string): void {
    if (this.stoppedReason) return;
    this.stoppedReason = reason;
    if (this.ticker) clearInterval(this.ticker);
    this.ticker = undefined;
    const err = new NodeStoppedError(reason);
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.pending.clear();
    for (const r of this.reads.values()) {
      clearTimeout(r.timer);
      r.reject(err);
    }
    this.reads.clear();
    this.readsAwaitingApply.length = 0;
    this.emit('stopped', reason);
  }

  // ---- introspection ------------------------------------------------------------------------

  status(): Status & {
    appliedIndex: number;
    snapshotIndex: number;
    members: MemberInfo[];
    stopped?: string;
  } {
    return {
      ...this.raw.status(),
      appliedIndex: this.applied,
      snapshotIndex: this.snapshotIndex,
      members: this.members.all(),
      stopped: this.stoppedReason,
    };
  }

  get isLeader(): boolean {
    return this.role === 'leader';
  }

  get leaderId(): NodeId {
    return this.lead;
  }

  get stopped(): string | undefined {
    return this.stoppedReason;
  }

  leaderHint(): LeaderHint | undefined {
    if (this.lead === NONE) return undefined;
    const m = this.members.get(this.lead);
    return { id: this.lead, peerAddr: m?.peerAddr, httpAddr: m?.httpAddr, respAddr: m?.respAddr };
  }

  private translateDrop(err: unknown): Error {
    if (err instanceof ProposalDroppedError) {
      if (err.reason === 'notLeader' || err.reason === 'removed')
        return new NotLeaderError(this.id, this.leaderHint());
      return err;
    }
    return err instanceof Error ? err : new Error(String(err));
  }

  // ---- the Ready loop ---------------------------------------------------------------------

  private kick(): void {
    if (this.drainScheduled || this.stoppedReason) return;
    this.drainScheduled = true;
    setImmediate(() => {
      this.drainScheduled = false;
      void this.drain();
    });
  }

  private async drain(): Promise<void> {
    if (this.draining || this.stoppedReason) return;
    this.draining = true;
    try {
      while (!this.stoppedReason && this.raw.hasReady()) {
        const rd = this.raw.ready();
        await this.handleReady(rd);
      }
    } catch (err) {
      // Storage failures are fatal: continuing could acknowledge what is not durable.
      this.fatal = err instanceof Error ? err : new Error(String(err));
      this.log.error({ err: this.fatal.message }, 'fatal error in the Raft loop; stopping the node');
      this.halt(`fatal: ${this.fatal.message}`);
    } finally {
      this.draining = false;
    }
    if (!this.stoppedReason && this.raw.hasReady()) this.kick();
  }

  private async handleReady(rd: Ready): Promise<void> {
    this.stats.readyBatches++;
    if (rd.softState) this.onSoftState(rd.softState.role, rd.softState.lead);
    // A leader may replicate in parallel with its own fsync (Raft thesis §10.2.1, etcd does too):
    // its messages depend on no unpersisted vote, and the core counts the leader's own copy only
    // after advance(). Anything else (votes, a term change) is sent only after it is durable.
    const termOrVoteChanged =
      rd.hardState !== undefined &&
      (rd.hardState.term !== this.persistedTerm || rd.hardState.vote !== this.persistedVote);
    const sendEarly = this.role === 'leader' && !termOrVoteChanged && !rd.snapshot;
    if (sendEarly && rd.messages.length > 0) this.transport.send(rd.messages);
    // 1. persist (hard state before anything that depends on it is sent)
    if (rd.hardState || rd.entries.length > 0 || rd.snapshot) {
      if (rd.mustSync) this.stats.fsyncs++;
      await this.storage.save(
        { hardState: rd.hardState, entries: rd.entries, snapshot: rd.snapshot },
        { sync: rd.mustSync || rd.snapshot !== undefined },
      );
    }
    if (rd.hardState) {
      this.persistedTerm = rd.hardState.term;
      this.persistedVote = rd.hardState.vote;
    }
    if (this.stoppedReason) return;
    // 2. send
    if (!sendEarly && rd.messages.length > 0) this.transport.send(rd.messages);
    // 3. apply
    if (rd.snapshot && rd.snapshot.metadata.index > this.applied) {
      this.restoreSnapshotData(rd.snapshot.data);
      this.conf = rd.snapshot.metadata.conf;
      this.applied = rd.snapshot.metadata.index;
      this.snapshotIndex = rd.snapshot.metadata.index;
      this.syncTransportPeers();
    }
    for (const e of rd.committedEntries) this.applyEntry(e);
    for (const rs of rd.readStates) {
      const key = Buffer.from(rs.context).toString('base64');
      const read = this.reads.get(key);
      if (!read) continue;
      this.reads.delete(key);
      read.index = rs.index;
      this.readsAwaitingApply.push(read);
    }
    this.releaseReads();
    this.raw.advance(rd);
    if (rd.committedEntries.length > 0) this.emit('applied', this.applied);
    // 4. snapshot every N entries (in the background; the log keeps a trailing window)
    if (!this.snapshotting && this.applied - this.snapshotIndex >= this.opts.snapshotEvery) {
      void this.takeSnapshot();
    }
  }

  private releaseReads(): void {
    if (this.readsAwaitingApply.length === 0) return;
    for (let i = this.readsAwaitingApply.length - 1; i >= 0; i--) {
      const r = this.readsAwaitingApply[i]!;
      if ((r.index ?? Number.POSITIVE_INFINITY) <= this.applied) {
        this.readsAwaitingApply.splice(i, 1);
        clearTimeout(r.timer);
        r.resolve();
      }
    }
  }

  private applyEntry(e: Entry): void {
    if (e.index <= this.applied) return;
    this.applied = e.index;
    this.stats.applied++;
    if (e.type === 'conf') {
      this.conf = this.raw.applyConfChange(e.change);
      const ctx = decodeMemberContext(e.change.context);
      if (e.change.type === 'remove') {
        this.members.remove(e.change.nodeId);
      } else if (ctx) {
        this.members.upsert({ id: e.change.nodeId, ...ctx });
      }
      this.syncTransportPeers();
      if (e.change.type === 'remove' && e.change.nodeId === this.id) {
        this.log.warn({ index: e.index }, 'this node was removed from the cluster; stopping');
        setImmediate(() => void this.stop('removed from the cluster'));
      }
      return;
    }
    if (e.data.length === 0) return; // a new leader's no-op
    let env: ReturnType<typeof decodeEnvelope>;
    try {
      env = decodeEnvelope(e.data);
    } catch (err) {
      this.log.error({ index: e.index, err: String(err) }, 'undecodable log entry skipped');
      return;
    }
    let result: unknown;
    if (env.kind === 'sys') {
      this.members.applySys(unpack<SysCommand>(env.payload));
      result = undefined;
    } else {
      result = this.sm.apply(env.payload, { index: e.index, term: e.term, leaderTimeMs: env.leaderTimeMs });
    }
    if (env.origin === this.id) {
      const p = this.pending.get(env.seq);
      if (p) {
        this.pending.delete(env.seq);
        clearTimeout(p.timer);
        p.resolve(result as R);
      }
    }
  }

  private onSoftState(role: Role, lead: NodeId): void {
    const changed = role !== this.role || lead !== this.lead;
    if (lead !== this.lead) this.stats.leaderChanges++;
    this.role = role;
    this.lead = lead;
    if (!changed) return;
    this.log.info({ role, lead, term: this.raw.status().term }, 'raft role changed');
    this.emit('role', role, lead);
    if (role === 'leader') this.publishSelf();
  }

  /**
   * Leader only: records a member's client addresses in the log (a follower asks the leader to
   * do this for it, see start.ts). Resolves once applied.
   */
  async publishAddresses(
    id: NodeId,
    httpAddr: string | undefined,
    respAddr: string | undefined,
  ): Promise<void> {
    if (!this.members.get(id)) throw new Error(`member ${id} is not in this cluster`);
    const cmd: SysCommand = { op: 'publish', id, httpAddr, respAddr };
    await this.proposeEnvelope('sys', pack(cmd));
  }

  /** True when the replicated directory already holds this node's own client addresses. */
  get addressesPublished(): boolean {
    const known = this.members.get(this.id);
    return (
      known !== undefined && known.httpAddr === this.self.httpAddr && known.respAddr === this.self.respAddr
    );
  }

  /** A new leader writes its own client addresses into the log so followers can redirect to it. */
  private publishSelf(): void {
    const known = this.members.get(this.id);
    if (!known) return;
    if (known.httpAddr === this.self.httpAddr && known.respAddr === this.self.respAddr) return;
    const cmd: SysCommand = {
      op: 'publish',
      id: this.id,
      httpAddr: this.self.httpAddr,
      respAddr: this.self.respAddr,
    };
    this.proposeEnvelope('sys', pack(cmd)).catch((err) =>
      this.log.warn({ err: String(err) }, 'could not publish this node’s addresses'),
    );
  }

  private syncTransportPeers(): void {
    const ids = new Set([...this.conf.voters, ...this.conf.learners]);
    for (const m of this.members.all()) {
      if (m.id === this.id) continue;
      if (ids.has(m.id)) this.transport.addPeer(m.id, m.peerAddr);
    }
    for (const m of this.members.all())
      if (!ids.has(m.id) && m.id !== this.id) this.transport.removePeer(m.id);
  }

  private restoreSnapshotData(data: Uint8Array): void {
    if (data.length === 0) return;
    const [sys, app] = unpack<[Uint8Array, Uint8Array]>(data);
    this.members = MemberDirectory.decode(sys);
    this.sm.restore(app);
  }

  private async takeSnapshot(): Promise<void> {
    this.snapshotting = true;
    try {
      const index = this.applied;
      const data = pack([this.members.encode(), this.sm.snapshot()]);
      await this.storage.createSnapshot(index, this.conf, data);
      this.snapshotIndex = index;
      this.stats.snapshots++;
      this.log.info({ index, bytes: data.length }, 'snapshot taken');
    } catch (err) {
      this.log.error({ err: String(err) }, 'snapshot failed');
    } finally {
      this.snapshotting = false;
    }
  }
}
