import { EventEmitter } from 'node:events';
import {
  type Clock,
  type Layout,
  type LayoutSpec,
  resolveLayout,
  Snowflake,
  type SnowflakeOptions,
} from '../id/index.js';
import type { MonotonicClock } from './clocks.js';
import {
  ClientOptionError,
  FloeRequestError,
  FloeUnavailableError,
  LeaseLostError,
  type LeaseLostReason,
} from './errors.js';
import { GuardedClock } from './guarded-clock.js';
import type { HttpTransport } from './http-transport.js';
import { type LeaseCacheRecord, removeLeaseCache, writeLeaseCache } from './lease-cache.js';
import { LeaseSnowflake, SLOW_PATH_HOOK_AVAILABLE } from './lease-snowflake.js';

/** The acquire reply's fields the SDK uses. */
export interface GrantInfo {
  app: string;
  workerId: number;
  datacenterId: number;
  localWorkerId: number;
  datacenterBits: number;
  workerBits: number;
  token: number;
  ttlMs: number;
  highWaterMs: number;
  boundMs: number;
}

/** Everything a lease needs from its client. */
export interface LeaseContext {
  transport: HttpTransport;
  wall: Clock;
  mono: MonotonicClock;
  bootId: string | undefined;
  requestTimeoutMs: number;
  setTimer: (fn: () => void, ms: number) => { cancel(): void };
}

export interface LeaseTuning {
  nodeId: string;
  requestId: string;
  safetyMarginMs: number;
  boundWindowMs: number;
  renewEveryMs: number;
  cachePath: string | undefined;
}

/** Payload of `renewed`. */
export interface RenewedEvent {
  token: number;
  boundMs: number;
  logged: boolean;
  /** Monotonic ms at which generation stops unless renewed again. */
  deadlineMono: number;
}

/** Payload of `released`. */
export interface ReleasedEvent {
  highWaterMs: number;
  lastTimestampMs: number | undefined;
  alreadyReleased: boolean;
}

/** Generator options a lease lets callers choose (worker, datacenter, clock and bounds come from the lease). */
export type LeaseSnowflakeOptions = Omit<
  SnowflakeOptions,
  'layout' | 'worker' | 'datacenter' | 'clock' | 'floor' | 'ceiling'
>;

interface BoundGenerator {
  gen: Snowflake;
  /** What to invalidate when the lease ends: the generator (slow-path hook) or, on the fallback path, its clock. */
  stop: { invalidate(): void };
}

/**
 * A worker ID leased from a Floe cluster, renewed in the background (about every TTL/3).
 *
 * Events: `renewed` (RenewedEvent), `lost` (LeaseLostError: deadline passed or the cluster fenced the token),
 * `released` (ReleasedEvent), `renewFailed` (Error: one renewal attempt failed; the lease goes on until its deadline).
 *
 * Safety (docs/decisions/0002-lease-safety.md): generators issue timestamps only in (floor, ceiling] and stop at a
 * deadline measured on the monotonic clock from the send time of the last acknowledged acquire/renewal, plus TTL,
 * minus `safetyMarginMs`.
 */
export class WorkerLease extends EventEmitter {
  readonly app: string;
  readonly nodeId: string;
  readonly requestId: string;
  readonly workerId: number;
  readonly datacenterId: number;
  readonly localWorkerId: number;
  readonly datacenterBits: number;
  readonly workerBits: number;
  readonly token: number;
  readonly ttlMs: number;
  /** Generators issue only timestamps strictly above this (the worker's high-water mark, or the cached use). */
  readonly floorMs: number;
  /** Added to the wall clock by this lease's generators: > 0 only when the floor was ahead of this machine's clock. */
  readonly leadMs: number;
  /** True when this lease was resumed from the on-disk cache while the cluster was unreachable. */
  readonly resumedFromCache: boolean;

  private committedBoundMs: number;
  private usedUpToMs: number;
  private deadline: number;
  private lostReason: LeaseLostReason | undefined;
  private lostDetail = '';
  private readonly generators: BoundGenerator[] = [];
  private renewTimer: { cancel(): void } | undefined;
  private deadlineTimer: { cancel(): void } | undefined;
  private releasing: Promise<ReleasedEvent> | undefined;
  private renewing = false;

  /** @internal Use `FloeClient.leaseWorker`. */
  constructor(
    private readonly ctx: LeaseContext,
    private readonly tuning: LeaseTuning,
    grant: GrantInfo,
    init: {
      sentAtMono: number;
      floorMs: number;
      deadlineMono?: number;
      usedUpToMs?: number;
      resumed?: boolean;
    },
  ) {
    super();
    this.app = grant.app;
    this.nodeId = tuning.nodeId;
    this.requestId = tuning.requestId;
    this.workerId = grant.workerId;
    this.datacenterId = grant.datacenterId;
    this.localWorkerId = grant.localWorkerId;
    this.datacenterBits = grant.datacenterBits;
    this.workerBits = grant.workerBits;
    this.token = grant.token;
    this.ttlMs = grant.ttlMs;
    this.floorMs = init.floorMs;
    this.leadMs = Math.max(0, Math.ceil(init.floorMs + 1 - ctx.wall.now()));
    this.resumedFromCache = init.resumed ?? false;
    this.committedBoundMs = Math.max(grant.boundMs, init.floorMs);
    this.usedUpToMs = init.usedUpToMs ?? init.floorMs;
    this.deadline = init.deadlineMono ?? init.sentAtMono + grant.ttlMs - tuning.safetyMarginMs;
    this.raiseUse(init.sentAtMono);
    this.armDeadlineTimer();
    this.scheduleRenewal(Math.max(0, init.sentAtMono + tuning.renewEveryMs - ctx.mono()));
  }

  /** Monotonic ms at which generation stops unless a renewal succeeds first; -Infinity once lost or released. */
  get deadlineMono(): number {
    return this.deadline;
  }

  /** The bound the cluster has committed for this lease (its high-water mark). */
  get boundMs(): number {
    return this.committedBoundMs;
  }

  /** The highest timestamp generators may use right now (the committed bound, or less with a cache). */
  get ceilingMs(): number {
    return this.usedUpToMs;
  }

  /** Whether generation is allowed right now (not lost, not released, deadline not passed). */
  get valid(): boolean {
    return this.ctx.mono() < this.deadline;
  }

  /** Why the lease ended, if it has. */
  get endedBecause(): LeaseLostReason | undefined {
    return this.lostReason;
  }

  /**
   * A Snowflake generator bound to this lease: worker (and datacenter, when the pool is split) from the lease, floor
   * at the lease's floor, ceiling at what the cluster committed; it throws `LeaseLostError` once the lease's deadline
   * passes or the lease is lost or released. Errors of the ID core (e.g. `CeilingReachedError` when renewals keep
   * failing, `ClockMovedBackwardsError`) pass through.
   */
  snowflake(layout: Layout | LayoutSpec | string = 'floe', options: LeaseSnowflakeOptions = {}): Snowflake {
    if (!this.valid) throw this.lostError();
    const l = resolveLayout(layout);
    const split = l.datacenterBits > 0;
    const tolerance = options.backwardsToleranceMs;
    if (tolerance !== undefined && !(tolerance <= this.tuning.safetyMarginMs / 2)) {
      // The generator may wait this long after its deadline check: it must fit well inside the margin.
      throw new ClientOptionError(
        'backwardsToleranceMs',
        `a number in [0, ${this.tuning.safetyMarginMs / 2}] (half the safety margin)`,
        tolerance,
      );
    }
    const common = {
      ...options,
      layout: l,
      worker: split ? this.localWorkerId : this.workerId,
      datacenter: split ? this.datacenterId : 0,
      ceiling: this.usedUpToMs,
      floor: this.floorMs,
    };
    let gen: Snowflake;
    let stop: { invalidate(): void };
    if (SLOW_PATH_HOOK_AVAILABLE) {
      const wall = this.ctx.wall;
      const lead = this.leadMs;
      const c: Clock =
        lead === 0
          ? wall
          : { now: () => wall.now() + lead, waitUntil: (ms: number) => wall.waitUntil?.(ms - lead) };
      const g = new LeaseSnowflake({ ...common, clock: c }, this, this.ctx.mono);
      gen = g;
      stop = g;
    } else {
      const clock = new GuardedClock(this.ctx.wall, this.ctx.mono, this, this.leadMs);
      gen = new Snowflake({ ...common, clock });
      stop = clock;
    }
    this.generators.push({ gen, stop });
    return gen;
  }

  /** The error generators throw now (reason `deadline` unless the lease was fenced or released). */
  lostError(): LeaseLostError {
    const reason = this.lostReason ?? 'deadline';
    const detail =
      this.lostReason === undefined
        ? `no renewal acknowledged in time; the safe deadline (TTL ${this.ttlMs} ms minus ${this.tuning.safetyMarginMs} ms from the last acknowledged send) passed`
        : this.lostDetail;
    return new LeaseLostError(reason, this.app, this.workerId, this.token, detail);
  }

  /**
   * Stops every generator of this lease, then releases the worker ID, reporting the highest timestamp used (the next
   * holder starts above it). Safe to call more than once. Rejects only if the cluster stayed unreachable (the lease
   * then simply expires).
   */
  release(): Promise<ReleasedEvent> {
    if (this.releasing) return this.releasing;
    const fenced = this.lostReason !== undefined && this.lostReason !== 'deadline';
    this.end('released', 'release() was called', false);
    const last = this.lastTimestampMs();
    this.releasing = (async () => {
      if (fenced) return { highWaterMs: this.committedBoundMs, lastTimestampMs: last, alreadyReleased: true };
      try {
        const r = await this.ctx.transport.post<{ highWaterMs: number; alreadyReleased: boolean }>(
          `/v1/apps/${encodeURIComponent(this.app)}/workers/${this.workerId}/release`,
          { token: this.token, ...(last === undefined ? {} : { lastTimestampMs: last }) },
          { budgetMs: Math.max(this.ctx.requestTimeoutMs, this.ttlMs) },
        );
        const ev = {
          highWaterMs: r.body.highWaterMs,
          lastTimestampMs: last,
          alreadyReleased: r.body.alreadyReleased,
        };
        if (this.tuning.cachePath) removeLeaseCache(this.tuning.cachePath);
        this.emit('released', ev);
        return ev;
      } catch (e) {
        if (
          e instanceof FloeRequestError &&
          ['stale_token', 'not_held', 'lease_expired'].includes(e.serverCode)
        ) {
          // Already expired and possibly re-granted: nothing to release; our generators stopped before that.
          const ev = { highWaterMs: this.committedBoundMs, lastTimestampMs: last, alreadyReleased: true };
          if (this.tuning.cachePath) removeLeaseCache(this.tuning.cachePath);
          this.emit('released', ev);
          return ev;
        }
        throw e;
      }
    })();
    return this.releasing;
  }

  /** Highest timestamp issued by this lease's generators, if any. */
  lastTimestampMs(): number | undefined {
    let max: number | undefined;
    for (const { gen } of this.generators) {
      const t = gen.lastTimestamp;
      if (t !== undefined && (max === undefined || t > max)) max = t;
    }
    return max;
  }

  // ---- renewal ------------------------------------------------------------------------------

  private scheduleRenewal(ms: number): void {
    this.renewTimer?.cancel();
    if (this.lostReason !== undefined) return;
    this.renewTimer = this.ctx.setTimer(() => void this.renewNow(), ms);
  }

  /** One renewal (with retries until the deadline). Exposed for tests and for callers that want to renew early. */
  async renewNow(): Promise<void> {
    if (this.lostReason !== undefined || this.renewing) return;
    this.renewing = true;
    try {
      const now = this.ctx.wall.now() + this.leadMs;
      // Promise a new bound only when the headroom runs low, so most renewals are not logged.
      const want =
        this.committedBoundMs - now < this.tuning.boundWindowMs / 2
          ? Math.ceil(now + this.tuning.boundWindowMs)
          : undefined;
      const budgetMs = Math.max(0, this.deadline - this.ctx.mono());
      const r = await this.ctx.transport.post<{ boundMs: number; logged: boolean; token: number }>(
        `/v1/apps/${encodeURIComponent(this.app)}/workers/${this.workerId}/renew`,
        { token: this.token, ...(want === undefined ? {} : { boundMs: want }) },
        { budgetMs: Math.min(budgetMs, Math.max(this.tuning.renewEveryMs, this.ctx.requestTimeoutMs)) },
      );
      if (this.lostReason !== undefined) return;
      if (typeof r.body.boundMs === 'number' && r.body.boundMs > this.committedBoundMs) {
        this.committedBoundMs = r.body.boundMs;
      }
      const next = r.sentAtMono + this.ttlMs - this.tuning.safetyMarginMs;
      if (next > this.deadline) this.deadline = next;
      this.raiseUse(r.sentAtMono);
      this.armDeadlineTimer();
      this.scheduleRenewal(Math.max(0, r.sentAtMono + this.tuning.renewEveryMs - this.ctx.mono()));
      this.emit('renewed', {
        token: this.token,
        boundMs: this.committedBoundMs,
        logged: r.body.logged === true,
        deadlineMono: this.deadline,
      } satisfies RenewedEvent);
    } catch (e) {
      if (this.lostReason !== undefined) return;
      if (
        e instanceof FloeRequestError &&
        ['stale_token', 'not_held', 'lease_expired'].includes(e.serverCode)
      ) {
        this.end(e.serverCode as LeaseLostReason, e.message, true);
        if (this.tuning.cachePath) removeLeaseCache(this.tuning.cachePath);
        return;
      }
      if (this.ctx.mono() >= this.deadline) {
        this.end('deadline', this.lostError().message, true);
        return;
      }
      if (this.listenerCount('renewFailed') > 0) this.emit('renewFailed', e);
      // Unavailable or refused for another reason: try again soon, until the deadline.
      this.scheduleRenewal(e instanceof FloeUnavailableError ? 0 : Math.min(250, this.tuning.renewEveryMs));
    } finally {
      this.renewing = false;
    }
  }

  /**
   * After an acknowledged send at `sentAtMono`: let generators use timestamps up to the committed bound (or, with a
   * cache, only up to about one TTL past the send, written to disk before the generators may use it).
   */
  private raiseUse(sentAtMono: number): void {
    let use = this.committedBoundMs;
    if (this.tuning.cachePath !== undefined) {
      const wallAtSend = this.ctx.wall.now() + this.leadMs - (this.ctx.mono() - sentAtMono);
      use = Math.min(this.committedBoundMs, Math.ceil(wallAtSend + this.ttlMs));
    }
    if (use < this.usedUpToMs) use = this.usedUpToMs;
    if (this.tuning.cachePath !== undefined) this.writeCache(use);
    this.usedUpToMs = use;
    for (const { gen } of this.generators) if ((gen.ceiling ?? -1) < use) gen.setCeiling(use);
  }

  private writeCache(usedUpToMs: number): void {
    const path = this.tuning.cachePath as string;
    const monoNow = this.ctx.mono();
    const record: LeaseCacheRecord = {
      version: 1,
      app: this.app,
      nodeId: this.nodeId,
      requestId: this.requestId,
      workerId: this.workerId,
      datacenterId: this.datacenterId,
      localWorkerId: this.localWorkerId,
      datacenterBits: this.datacenterBits,
      workerBits: this.workerBits,
      token: this.token,
      ttlMs: this.ttlMs,
      highWaterMs: this.floorMs,
      boundMs: this.committedBoundMs,
      usedUpToMs,
      deadlineMono: this.deadline,
      bootId: this.ctx.bootId ?? null,
      deadlineWallMs: this.ctx.wall.now() + (this.deadline - monoNow),
      savedAtWallMs: this.ctx.wall.now(),
    };
    writeLeaseCache(path, record);
  }

  private armDeadlineTimer(): void {
    this.deadlineTimer?.cancel();
    if (this.lostReason !== undefined) return;
    const ms = Math.max(0, this.deadline - this.ctx.mono());
    this.deadlineTimer = this.ctx.setTimer(() => {
      if (this.lostReason !== undefined) return;
      if (this.ctx.mono() >= this.deadline) this.end('deadline', this.lostError().message, true);
      else this.armDeadlineTimer();
    }, ms);
  }

  private end(reason: LeaseLostReason, detail: string, emitLost: boolean): void {
    if (this.lostReason !== undefined && this.lostReason !== 'deadline') return;
    const first = this.lostReason === undefined;
    this.lostReason = reason;
    this.lostDetail = detail;
    this.deadline = Number.NEGATIVE_INFINITY;
    for (const { stop } of this.generators) stop.invalidate();
    this.renewTimer?.cancel();
    this.deadlineTimer?.cancel();
    if (emitLost && first) this.emit('lost', this.lostError());
  }
}
