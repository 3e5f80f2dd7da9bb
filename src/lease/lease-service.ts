import { randomUUID } from 'node:crypto';
import type { Layout } from '../id/index.js';
import { checkApp, checkInt, encodeLeaseCommand, leaseError } from '../state/leases/codec.js';
import type { LeaseStateMachine } from '../state/leases/lease-state-machine.js';
import {
  type AcquireOk,
  type ConfigurePoolOk,
  type ExpireOk,
  type LeaseError,
  type LeaseEvent,
  type LeaseGrant,
  type LeaseResult,
  MAX_BOUND_AHEAD_MS,
  MAX_EXPIRE_BATCH,
  MAX_POOL_BITS,
  MAX_TTL_MS,
  MIN_TTL_MS,
  type ReleaseOk,
  type RenewOk,
  type WorkerInfo,
} from '../state/leases/types.js';
import { bugOn } from '../testing/bug-switches.js';
import { DeadlineHeap, type HeapEntry } from './deadline-heap.js';
import { checkHealthUrl, HealthProber, type HealthProberOptions } from './health-prober.js';
import { ReadCoalescer } from './read-coalescer.js';
import { type WhoisAnswer, whois } from './whois.js';

/**
 * What the lease service needs from the Raft node (FloeNode fits through `leaseNodeOf`).
 * - `propose` resolves with the LeaseStateMachine's result once the command is applied here;
 *   it rejects (e.g. NotLeaderError, ProposalTimeoutError) when the outcome is not known.
 * - `linearizableRead` resolves once this node is confirmed leader (ReadIndex) and has applied
 *   everything committed before the call.
 * - `onRoleChange` calls back with `true` when this node becomes leader and `false` when it stops;
 *   returns an unsubscribe function.
 * - `notLeaderError` builds the error thrown when a leader-only call reaches a follower (so a
 *   server can answer MOVED with the leader's address). Default: a LeaseNotLeaderError.
 */
export interface LeaseNode {
  propose(command: Uint8Array): Promise<unknown>;
  linearizableRead(): Promise<void>;
  isLeader(): boolean;
  onRoleChange(cb: (isLeader: boolean) => void): () => void;
  notLeaderError?(): Error;
}

/** Monotonic time decides deadlines; wall time only fills the informational `expiresAtMs`. */
export interface LeaseClock {
  monotonicMs(): number;
  wallMs(): number;
}

export interface LeaseTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/**
 * Options (defaults in brackets; out-of-range values throw a RangeError naming the option):
 * - `defaultTtlMs` [10,000]: TTL when an acquire names none; 1,000..3,600,000.
 * - `maxExpireBatch` [256]: leases expired by one `expire` command; 1..1,024. One such proposal is
 *   in flight at a time, so a mass expiry (e.g. a whole fleet behind a partition) is paced.
 * - `expireRetryMs` [1,000]: when an `expire` proposal fails, its leases are tried again this much later.
 * - `seedRetryMs` [500]: when the new leader's first linearizable read fails, it is retried this much later.
 */
export interface LeaseServiceOptions {
  node: LeaseNode;
  state: LeaseStateMachine;
  clock?: LeaseClock;
  timers?: LeaseTimers;
  defaultTtlMs?: number;
  maxExpireBatch?: number;
  expireRetryMs?: number;
  seedRetryMs?: number;
  /** Generates the requestId of an acquire that brings none. Default: crypto.randomUUID. */
  newRequestId?: () => string;
  /** Told about failures the service handles itself (expire proposals, seeding). Default: silent. */
  onError?: (what: string, err: unknown) => void;
  /** Holder health probes (src/lease/health-prober.ts): probe function, interval, timeout, failures in a row. */
  health?: Omit<HealthProberOptions, 'timers' | 'isLive'>;
}

export interface AcquireRequest {
  app: string;
  nodeId: string;
  ttlMs?: number;
  /** Idempotency key: the same requestId retried (by the same incarnation) gets the same lease. Send one from SDKs. */
  requestId?: string;
  /** The calling process's incarnation id: a retry is answered with the live grant only to the same incarnation. */
  incarnation?: string;
  /** First promise: highest timestamp the holder will use before its first renewal. */
  boundMs?: number;
  /** The ID layout fingerprint the holder generates with: pinned per app by the first acquire that names one. */
  layout?: string;
  /** A URL the leader GETs to check the holder's health (issue 13); renewals are refused after failed probes. */
  healthUrl?: string;
}

export interface RenewRequest {
  app: string;
  workerId: number;
  token: number;
  /** Highest timestamp the holder will use before its next renewal. Raises the high-water mark. */
  boundMs?: number;
  /** The holder's health URL again (so that a new leader learns it). */
  healthUrl?: string;
}

/** What is wrong with a renewal's fields, if anything (both lease stores check it before anything else). */
export function checkRenewRequest(req: RenewRequest): LeaseError | undefined {
  return (
    checkApp(req.app) ??
    checkInt('workerId', req.workerId, 0, 2 ** MAX_POOL_BITS - 1) ??
    checkInt('token', req.token, 1, Number.MAX_SAFE_INTEGER) ??
    (req.boundMs === undefined ? undefined : checkInt('boundMs', req.boundMs, 0, Number.MAX_SAFE_INTEGER))
  );
}

export interface ReleaseRequest {
  app: string;
  workerId: number;
  token: number;
  /** Highest timestamp the holder used. Default 0 (its promised bounds already cover it). */
  lastTimestampMs?: number;
}

export interface ServiceRenewOk extends RenewOk {
  /** True when the renewal raised the high-water mark and went through the log. */
  logged: boolean;
}

export interface LeaseListing extends LeaseGrant {
  /** Time left on the leader's monotonic deadline; undefined while the leader has not tracked it yet. */
  remainingMs: number | undefined;
}

/**
 * The node resolved a proposal with a result that is not this command's (another op, app, nodeId,
 * requestId, incarnation, worker ID or token). Never handed to a caller as a grant: servers answer
 * it as an internal error (HTTP 500, RESP `-ERR internal: ...`); the caller may retry.
 */
export class LeaseReplyMismatchError extends Error {
  constructor(
    readonly field: string,
    readonly expected: unknown,
    readonly got: unknown,
  ) {
    super(
      `internal: reply does not match request: ${field} is ${JSON.stringify(got)}, the request's is ${JSON.stringify(expected)}`,
    );
    this.name = 'LeaseReplyMismatchError';
  }
}

/**
 * Throws LeaseReplyMismatchError unless `r` is a refusal or a result of the same op whose fields
 * equal `expect`'s. A refusal cannot be attributed to a request, but it is never a grant.
 */
function matchResult(r: unknown, op: string, expect: Record<string, unknown>): void {
  if (typeof r !== 'object' || r === null) throw new LeaseReplyMismatchError('result', 'an object', r);
  const o = r as Record<string, unknown>;
  if (o.ok === false || bugOn('no-reply-check')) return;
  if (o.ok !== true) throw new LeaseReplyMismatchError('ok', true, o.ok);
  if (o.op !== op) throw new LeaseReplyMismatchError('op', op, o.op);
  for (const [k, v] of Object.entries(expect)) {
    if (o[k] !== v) throw new LeaseReplyMismatchError(k, v, o[k]);
  }
}

/** A leader-only call reached a node that is not (or is no longer) the leader. */
export class LeaseNotLeaderError extends Error {
  constructor() {
    super('this node is not the leader; lease operations must go to the leader');
    this.name = 'LeaseNotLeaderError';
  }
}

export const DEFAULT_TTL_MS = 10_000;
export const DEFAULT_MAX_EXPIRE_BATCH = 256;
export const DEFAULT_EXPIRE_RETRY_MS = 1_000;
export const DEFAULT_SEED_RETRY_MS = 500;

/** The leader's live deadline for one lease: leader memory only, never replicated. */
class TrackedLease implements HeapEntry {
  key = 0;
  heapIndex = -1;
  /** Monotonic ms after which the lease may be expired. Only moves forward while tracked. */
  deadline: number;
  /** Set once the leader decided to expire it: no renewal is acknowledged any more. */
  expiring = false;

  constructor(
    readonly app: string,
    readonly workerId: number,
    readonly token: number,
    readonly ttlMs: number,
    deadline: number,
  ) {
    this.deadline = deadline;
  }
}

const systemLeaseClock: LeaseClock = { monotonicMs: () => performance.now(), wallMs: () => Date.now() };
const systemTimers: LeaseTimers = {
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref?.();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

/**
 * The leader side of worker-ID leases.
 *
 * - Grants, releases, expiries and renewals that raise the high-water mark go through the log.
 * - A renewal that raises nothing is answered after a ReadIndex round (`linearizableRead`) by
 *   extending the lease's deadline in leader memory: no log entry, no disk write.
 * - Deadlines live on the leader's monotonic clock, in an indexed min-heap. A renewal only moves
 *   `deadline` forward; the heap key is fixed lazily when the entry reaches the top, so a renewal
 *   costs O(1) and allocates nothing in the heap.
 * - A new leader gives every live lease a full TTL from the moment it is confirmed leader before
 *   expiring any; a node that stops leading forgets all deadlines.
 * - Expiry: a timer at the earliest deadline proposes one `expire` command for up to
 *   `maxExpireBatch` leases; only one such proposal is in flight at a time.
 */
export class LeaseService {
  private readonly node: LeaseNode;
  private readonly state: LeaseStateMachine;
  private readonly clock: LeaseClock;
  private readonly timers: LeaseTimers;
  private readonly defaultTtlMs: number;
  private readonly maxExpireBatch: number;
  private readonly expireRetryMs: number;
  private readonly seedRetryMs: number;
  private readonly newRequestId: () => string;
  private readonly onError: (what: string, err: unknown) => void;

  private readonly heap = new DeadlineHeap<TrackedLease>();
  private readonly tracked = new Map<string, Map<number, TrackedLease>>();
  private leading = false;
  /** Bumped on every role change: work started under an older epoch must not act. */
  private epoch = 0;
  private seeded = false;
  private timer: unknown;
  private armedAt = Number.POSITIVE_INFINITY;
  private expireInFlight = false;
  private trackedTotal = 0;
  private closed = false;
  private readonly unsubscribe: Array<() => void> = [];
  private readyWaiters: Array<() => void> = [];
  /** ReadIndex rounds shared by concurrent renewals (each still waits for a round started after it). */
  private readonly reads: ReadCoalescer;
  /** The leader's probes of holders' health URLs. */
  readonly health: HealthProber;

  /** Counters for metrics and tests. */
  readonly stats = {
    /** Renewals answered from leader memory after a ReadIndex round (no log entry). */
    localRenewals: 0,
    /** Renewals that raised the high-water mark (one log entry each). */
    loggedRenewals: 0,
    expireProposals: 0,
    expiredLeases: 0,
    pumpRuns: 0,
    /** Heap entries whose deadline had moved on when they reached the top (lazy re-keying). */
    reschedules: 0,
    /** Times this node finished taking over deadlines as a new leader. */
    seeds: 0,
  };

  /** ReadIndex rounds started for renewals, and renewals that waited on one. */
  get readStats(): { rounds: number; waits: number } {
    return this.reads.stats;
  }

  constructor(opts: LeaseServiceOptions) {
    this.node = opts.node;
    this.state = opts.state;
    this.clock = opts.clock ?? systemLeaseClock;
    this.timers = opts.timers ?? systemTimers;
    this.defaultTtlMs = option('defaultTtlMs', opts.defaultTtlMs, DEFAULT_TTL_MS, MIN_TTL_MS, MAX_TTL_MS);
    this.maxExpireBatch = option(
      'maxExpireBatch',
      opts.maxExpireBatch,
      DEFAULT_MAX_EXPIRE_BATCH,
      1,
      MAX_EXPIRE_BATCH,
    );
    this.expireRetryMs = option('expireRetryMs', opts.expireRetryMs, DEFAULT_EXPIRE_RETRY_MS, 1, 3_600_000);
    this.seedRetryMs = option('seedRetryMs', opts.seedRetryMs, DEFAULT_SEED_RETRY_MS, 1, 3_600_000);
    this.newRequestId = opts.newRequestId ?? randomUUID;
    this.onError = opts.onError ?? (() => {});
    this.reads = new ReadCoalescer(() => this.node.linearizableRead());
    this.health = new HealthProber({
      ...opts.health,
      timers: this.timers,
      isLive: (app, workerId, token) => this.state.lease(app, workerId)?.token === token,
    });
    this.unsubscribe.push(this.state.subscribe((e) => this.onEvent(e)));
    this.unsubscribe.push(this.node.onRoleChange((isLeader) => this.onRole(isLeader)));
    if (this.node.isLeader()) this.onRole(true);
  }

  /** Stops the timer and listeners. The service must not be used afterwards. */
  close(): void {
    this.closed = true;
    for (const u of this.unsubscribe.splice(0)) u();
    this.onRole(false);
  }

  /** Whether this node is leading and has taken over every lease's deadline. */
  get ready(): boolean {
    return this.leading && this.seeded;
  }

  /** Resolves once this node leads and has taken over every lease's deadline (at once if it has). */
  whenReady(): Promise<void> {
    if (this.ready) return Promise.resolve();
    return new Promise((resolve) => this.readyWaiters.push(resolve));
  }

  /** Leases whose deadline this leader tracks (including those being expired). */
  get trackedCount(): number {
    return this.trackedTotal;
  }

  // ---- client operations ---------------------------------------------------------------------

  async acquire(req: AcquireRequest): Promise<AcquireOk | LeaseError> {
    if (req.healthUrl !== undefined) {
      const bad = checkHealthUrl(req.healthUrl);
      if (bad) return leaseError('invalid_argument', bad);
    }
    this.requireLeader();
    const ttlMs = req.ttlMs ?? this.defaultTtlMs;
    const requestId = req.requestId ?? this.newRequestId();
    const cmd = encodeLeaseCommand({
      op: 'acquire',
      app: req.app,
      nodeId: req.nodeId,
      ttlMs,
      requestId,
      ...(req.boundMs === undefined ? {} : { boundMs: req.boundMs }),
      ...(req.incarnation === undefined ? {} : { incarnation: req.incarnation }),
      ...(req.layout === undefined ? {} : { layout: req.layout }),
    });
    const epoch = this.epoch;
    const r = (await this.node.propose(cmd)) as LeaseResult;
    this.checkResult(r, 'acquire', {
      app: req.app,
      nodeId: req.nodeId,
      requestId,
      incarnation: req.incarnation ?? '',
      ...(req.layout === undefined ? {} : { layout: req.layout }),
    });
    if (!r.ok || r.op !== 'acquire') return r as LeaseError;
    // This answer is read after the whole batch its entry was applied in: an expiry (or release) applied after it in
    // that batch leaves a worker ID that is free again, which a retry's caller would hold for a fresh TTL (found by
    // the full simulator, swarm seed 400777: the lease was granted to another holder while the caller used it).
    if (this.state.liveToken(r.app, r.workerId) !== r.token) return this.expiredError(r);
    // A retry re-answers a lease whose expiry this node may have proposed while it led, behind the retry in the log,
    // for the next leader to commit: once it has lost its term nobody here can vouch for a fresh TTL (review of
    // FS-13). Not the leader: the caller retries the same requestId at the leader, which extends or grants afresh.
    if (r.retried && (epoch !== this.epoch || !this.leading)) throw this.notLeader();
    if (this.leading) {
      // New grants were tracked when applied. A retried acquire re-answers a live lease, and the
      // caller will count its TTL from this request: the leader's deadline must cover that.
      const t = this.find(r.app, r.workerId);
      if (t && t.token === r.token) {
        if (t.expiring || (r.retried && this.clock.monotonicMs() >= t.deadline)) return this.expiredError(r);
        this.extend(t);
      } else {
        this.trackLive(r.app, r.workerId, r.token, r.ttlMs);
      }
      if (req.healthUrl !== undefined) this.health.register(r.app, r.workerId, r.token, req.healthUrl);
    }
    return r;
  }

  async renew(req: RenewRequest): Promise<ServiceRenewOk | LeaseError> {
    const bad = checkRenewRequest(req);
    if (bad) return bad;
    if (req.healthUrl !== undefined) {
      const badUrl = checkHealthUrl(req.healthUrl);
      if (badUrl) return leaseError('invalid_argument', badUrl);
    }
    this.requireLeader();
    const epoch = this.epoch;
    const { app, workerId, token } = req;
    // A holder whose health URL failed its probes keeps nothing: it is not renewed, so it stops at its own deadline
    // and the lease expires after it, as for a holder that crashed (never earlier).
    const sick = this.health.unhealthy(app, workerId, token);
    if (sick) {
      this.health.stats.refusedRenewals++;
      return leaseError('lease_unhealthy', `${sick}; the lease is not renewed and expires at its deadline`);
    }
    // The high-water mark only grows, so reading it here (maybe slightly behind the log) can only
    // make us log a renewal that turns out not to raise anything: harmless.
    const raises = req.boundMs !== undefined && req.boundMs > this.state.highWaterMs(app, workerId);
    if (raises) {
      // Once this leader has applied everything from before its term, every grant it has not
      // applied yet is still in flight, so no holder can know its token: refuse bad tokens here
      // instead of logging a renewal that will be refused anyway.
      if (this.seeded) {
        const error = this.tokenError(app, workerId, token);
        if (error) return error;
      }
      // The committed entry itself proves leadership (as a ReadIndex round would).
      const r = (await this.node.propose(
        encodeLeaseCommand({ op: 'renew', app, workerId, token, boundMs: req.boundMs as number }),
      )) as LeaseResult;
      this.checkResult(r, 'renew', { app, workerId, token });
      if (!r.ok || r.op !== 'renew') return r as LeaseError;
      if (epoch !== this.epoch || !this.leading) throw this.notLeader();
      const t = this.trackedForRenewal(app, workerId, token);
      if (!t.ok) return t.error;
      this.extend(t.lease);
      this.stats.loggedRenewals++;
      // Only the live token's holder may (re)register its health URL (round 4: a wrong token reset a sick holder).
      if (req.healthUrl !== undefined) this.health.register(app, workerId, token, req.healthUrl);
      return { ...r, expiresAtMs: this.clock.wallMs() + r.ttlMs, logged: true };
    }
    // Without the ReadIndex round a deposed leader could acknowledge this renewal after a new
    // leader's grace period began; the holder would then trust a deadline nobody enforces.
    await this.reads.confirm();
    if (epoch !== this.epoch || !this.leading) throw this.notLeader();
    const t = this.trackedForRenewal(app, workerId, token);
    if (!t.ok) return t.error;
    this.extend(t.lease);
    this.stats.localRenewals++;
    if (req.healthUrl !== undefined) this.health.register(app, workerId, token, req.healthUrl);
    return {
      ok: true,
      op: 'renew',
      app,
      workerId,
      token,
      ttlMs: t.lease.ttlMs,
      boundMs: this.state.highWaterMs(app, workerId),
      expiresAtMs: this.clock.wallMs() + t.lease.ttlMs,
      logged: false,
    };
  }

  async release(req: ReleaseRequest): Promise<ReleaseOk | LeaseError> {
    this.requireLeader();
    if (this.seeded) {
      // Propose only what can change state: the live lease's release, or a retry of a release of this very token
      // (it may still raise the mark). Anything else is refused here as apply would refuse it, with no log entry
      // (issue 15 item 2: nothing the state would refuse reaches the log).
      const w = this.state.worker(req.app, req.workerId);
      const pool = this.state.pool(req.app);
      // Only where apply would answer the same: a mark too far ahead, or a worker ID outside the pool, is apply's
      // to refuse (invalid_argument); a pool that does not exist or an unused worker ID is not_held, as apply says.
      const plausible =
        (req.lastTimestampMs ?? 0) <= this.clock.wallMs() + MAX_BOUND_AHEAD_MS &&
        (pool === undefined || req.workerId < pool.size);
      if (plausible && (!w || w.token !== req.token)) {
        const error = this.tokenError(req.app, req.workerId, req.token);
        if (error) return error;
      }
    }
    const r = (await this.node.propose(
      encodeLeaseCommand({
        op: 'release',
        app: req.app,
        workerId: req.workerId,
        token: req.token,
        lastTimestampMs: req.lastTimestampMs ?? 0,
      }),
    )) as LeaseResult;
    this.checkResult(r, 'release', { app: req.app, workerId: req.workerId });
    return r as ReleaseOk | LeaseError;
  }

  async configurePool(app: string, bits: number, datacenterBits = 0): Promise<ConfigurePoolOk | LeaseError> {
    this.requireLeader();
    const r = (await this.node.propose(
      encodeLeaseCommand({ op: 'configurePool', app, bits, datacenterBits }),
    )) as LeaseResult;
    this.checkResult(r, 'configurePool', { app, bits, datacenterBits });
    return r as ConfigurePoolOk | LeaseError;
  }

  /** Live leases of an app with the leader's remaining time. Linearizable unless told otherwise. */
  /** Who issued `id` (decoded with `layout`), from this node's applied lease state after a linearizable read. */
  async whois(id: bigint, layout: Layout, app?: string): Promise<WhoisAnswer> {
    await this.node.linearizableRead();
    return whois(this.state, id, layout, app);
  }

  async list(app: string, opts: { linearizable?: boolean } = {}): Promise<LeaseListing[]> {
    if (opts.linearizable !== false) await this.node.linearizableRead();
    const now = this.clock.monotonicMs();
    return this.state
      .leases(app)
      .map((l) => ({ ...l, remainingMs: this.remaining(l.app, l.workerId, l.token, now) }));
  }

  /** A worker ID's record (live or free, with its high-water mark); undefined when never used. */
  async get(
    app: string,
    workerId: number,
    opts: { linearizable?: boolean } = {},
  ): Promise<(WorkerInfo & { remainingMs: number | undefined }) | undefined> {
    if (opts.linearizable !== false) await this.node.linearizableRead();
    const w = this.state.worker(app, workerId);
    if (!w) return undefined;
    const remainingMs = w.live ? this.remaining(app, workerId, w.token, this.clock.monotonicMs()) : undefined;
    return { ...w, remainingMs };
  }

  // ---- leadership ----------------------------------------------------------------------------

  private onRole(isLeader: boolean): void {
    if (this.closed && isLeader) return;
    if (isLeader === this.leading) return;
    this.epoch++;
    this.expireInFlight = false;
    this.cancelTimer();
    this.clearTracking();
    this.seeded = false;
    this.leading = isLeader;
    // Health is the leader's own judgement: a new leader starts with every holder healthy.
    this.health.stop();
    if (isLeader) {
      this.health.start();
      this.seed(this.epoch);
    }
  }

  /**
   * Takes over every live lease's deadline. The ReadIndex round makes sure this node applied
   * everything committed before it became leader; each lease then gets a full TTL from now, which
   * is after this node's election, so no lease the previous leader renewed is cut short.
   */
  private seed(epoch: number): void {
    this.node.linearizableRead().then(
      () => {
        if (epoch !== this.epoch) return;
        const now = this.clock.monotonicMs();
        for (const l of this.state.liveLeases()) {
          const t = this.find(l.app, l.workerId);
          if (t && t.token === l.token) continue; // tracked since this node became leader
          this.track(l.app, l.workerId, l.token, l.ttlMs, now + l.ttlMs);
        }
        this.seeded = true;
        this.stats.seeds++;
        this.schedule();
        const waiters = this.readyWaiters;
        this.readyWaiters = [];
        for (const w of waiters) w();
      },
      (err: unknown) => {
        if (epoch !== this.epoch) return;
        this.onError('lease deadlines not taken over yet (linearizable read failed); retrying', err);
        this.timers.setTimeout(() => {
          if (epoch === this.epoch) this.seed(epoch);
        }, this.seedRetryMs);
      },
    );
  }

  private onEvent(e: LeaseEvent): void {
    if (!this.leading) return;
    switch (e.type) {
      case 'granted':
        this.trackLive(e.app, e.workerId, e.token, e.ttlMs);
        return;
      case 'released':
      case 'expired': {
        const t = this.find(e.app, e.workerId);
        if (t && t.token === e.token) this.untrack(t);
        if (e.type === 'expired') this.stats.expiredLeases++;
        return;
      }
      case 'restored':
        // Not expected on a leader; start over as a new leader would.
        this.onRole(false);
        if (this.node.isLeader()) this.onRole(true);
        return;
      case 'renewed':
        return;
    }
  }

  // ---- deadlines -----------------------------------------------------------------------------

  private trackLive(app: string, workerId: number, token: number, ttlMs: number): void {
    const old = this.find(app, workerId);
    if (old && old.token === token) return;
    if (old) this.untrack(old);
    this.track(app, workerId, token, ttlMs, this.clock.monotonicMs() + ttlMs);
  }

  private track(app: string, workerId: number, token: number, ttlMs: number, deadline: number): void {
    const old = this.find(app, workerId);
    if (old) this.untrack(old);
    const t = new TrackedLease(app, workerId, token, ttlMs, deadline);
    let byWorker = this.tracked.get(app);
    if (!byWorker) {
      byWorker = new Map();
      this.tracked.set(app, byWorker);
    }
    byWorker.set(workerId, t);
    this.trackedTotal++;
    this.heap.push(t, deadline);
    if (deadline < this.armedAt) this.schedule();
  }

  private untrack(t: TrackedLease): void {
    this.heap.remove(t);
    const byWorker = this.tracked.get(t.app);
    if (byWorker?.get(t.workerId) === t) {
      byWorker.delete(t.workerId);
      this.trackedTotal--;
      if (byWorker.size === 0) this.tracked.delete(t.app);
    }
  }

  private find(app: string, workerId: number): TrackedLease | undefined {
    return this.tracked.get(app)?.get(workerId);
  }

  private clearTracking(): void {
    this.heap.clear();
    this.tracked.clear();
    this.trackedTotal = 0;
  }

  /** Moves the deadline to now + ttl (never backwards). The heap is fixed lazily by the pump. */
  private extend(t: TrackedLease): void {
    const d = this.clock.monotonicMs() + t.ttlMs;
    if (d > t.deadline) t.deadline = d;
  }

  private trackedForRenewal(
    app: string,
    workerId: number,
    token: number,
  ): { ok: true; lease: TrackedLease } | { ok: false; error: LeaseError } {
    const error = this.tokenError(app, workerId, token);
    if (error) return { ok: false, error };
    let t = this.find(app, workerId);
    if (!t || t.token !== token) {
      // Granted before this leader finished taking over: it gets its full TTL from now.
      this.trackLive(app, workerId, token, this.state.liveTtlMs(app, workerId));
      t = this.find(app, workerId)!;
    }
    if (t.expiring || this.clock.monotonicMs() >= t.deadline) {
      return { ok: false, error: this.expiredError({ app, workerId }) };
    }
    return { ok: true, lease: t };
  }

  /** Why `token` is not the live lease's token (per this node's applied state), or undefined. */
  private tokenError(app: string, workerId: number, token: number): LeaseError | undefined {
    const live = this.state.liveToken(app, workerId);
    if (live === 0) {
      return leaseError(
        'not_held',
        `worker ID ${workerId} of app ${app} is not leased (released, expired or never granted); acquire again`,
      );
    }
    if (live !== token) {
      return leaseError(
        'stale_token',
        `token ${token} is not the live lease's token for worker ID ${workerId} of app ${app} ` +
          `(the lease was released, expired or granted again); stop using this worker ID and acquire again`,
      );
    }
    return undefined;
  }

  private expiredError(l: { app: string; workerId: number }): LeaseError {
    return leaseError(
      'lease_expired',
      `the lease on worker ID ${l.workerId} of app ${l.app} passed its deadline on the leader and is being ` +
        `expired; stop using this worker ID and acquire again`,
    );
  }

  private remaining(app: string, workerId: number, token: number, now: number): number | undefined {
    const t = this.find(app, workerId);
    if (!t || t.token !== token) return undefined;
    return Math.max(0, t.deadline - now);
  }

  // ---- the expiry pump -----------------------------------------------------------------------

  private schedule(): void {
    if (!this.leading || this.expireInFlight || this.closed) return;
    const top = this.heap.peek();
    if (!top) {
      this.cancelTimer();
      return;
    }
    if (this.timer !== undefined && this.armedAt <= top.key) return;
    this.cancelTimer();
    this.armedAt = top.key;
    this.timer = this.timers.setTimeout(() => this.pump(), Math.max(0, top.key - this.clock.monotonicMs()));
  }

  private cancelTimer(): void {
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
    this.timer = undefined;
    this.armedAt = Number.POSITIVE_INFINITY;
  }

  private pump(): void {
    this.timer = undefined;
    this.armedAt = Number.POSITIVE_INFINITY;
    if (!this.leading || this.expireInFlight || this.closed) return;
    this.stats.pumpRuns++;
    const now = this.clock.monotonicMs();
    const batch: TrackedLease[] = [];
    while (batch.length < this.maxExpireBatch) {
      const top = this.heap.peek();
      if (!top || top.key > now) break;
      if (!top.expiring && top.deadline > now) {
        // Renewed since it was keyed: re-key once, now that it matters.
        this.heap.update(top, top.deadline);
        this.stats.reschedules++;
        continue;
      }
      this.heap.pop();
      top.expiring = true;
      batch.push(top);
    }
    if (batch.length > 0) this.proposeExpire(batch);
    else this.schedule();
  }

  private proposeExpire(batch: TrackedLease[]): void {
    const epoch = this.epoch;
    this.expireInFlight = true;
    this.stats.expireProposals++;
    const cmd = encodeLeaseCommand({ op: 'expire', items: batch.map((t) => [t.app, t.workerId, t.token]) });
    let proposal: Promise<unknown>;
    try {
      proposal = this.node.propose(cmd);
    } catch (err) {
      proposal = Promise.reject(err);
    }
    proposal
      .then((res) => {
        if (epoch !== this.epoch) return;
        const r = res as LeaseResult;
        this.checkResult(r, 'expire', {});
        if (!r.ok) throw new Error(`expire refused: ${r.code}: ${r.message}`);
        const items = (r as ExpireOk).items;
        if (
          !Array.isArray(items) ||
          items.length !== batch.length ||
          items.some(
            (it, i) =>
              it.app !== batch[i]!.app || it.workerId !== batch[i]!.workerId || it.token !== batch[i]!.token,
          )
        ) {
          const err = new LeaseReplyMismatchError('items', 'the proposed expire items', items);
          this.onError(`lease expire: ${err.message}`, err);
          throw err;
        }
        // Expired leases were untracked when applied; the rest were no longer live with that
        // token (released or re-granted meanwhile): nothing left to watch.
        for (const t of batch) if (this.find(t.app, t.workerId) === t) this.untrack(t);
      })
      .catch((err: unknown) => {
        if (epoch !== this.epoch) return;
        this.onError(`expire proposal for ${batch.length} lease(s) failed; retrying`, err);
        const retryAt = this.clock.monotonicMs() + this.expireRetryMs;
        for (const t of batch)
          if (this.find(t.app, t.workerId) === t && t.heapIndex === -1) this.heap.push(t, retryAt);
      })
      .finally(() => {
        if (epoch !== this.epoch) return;
        this.expireInFlight = false;
        this.schedule();
      });
  }

  // ---- helpers -------------------------------------------------------------------------------

  /** matchResult, and a mismatch is reported through onError (the node's log) before it is thrown. */
  private checkResult(r: unknown, op: string, expect: Record<string, unknown>): void {
    try {
      matchResult(r, op, expect);
    } catch (err) {
      this.onError(`lease ${op}: ${(err as Error).message}`, err);
      throw err;
    }
  }

  private requireLeader(): void {
    if (!this.leading || !this.node.isLeader()) throw this.notLeader();
  }

  private notLeader(): Error {
    return this.node.notLeaderError?.() ?? new LeaseNotLeaderError();
  }
}

function option(name: string, v: number | undefined, def: number, min: number, max: number): number {
  if (v === undefined) return def;
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new RangeError(`LeaseService option ${name} must be an integer in ${min}..${max}, got ${v}`);
  }
  return v;
}
