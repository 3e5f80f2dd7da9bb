import { EventEmitter } from 'node:events';
import {
  type Clock,
  DEFAULT_MAX_LEAD_MS,
  type Layout,
  type LayoutSpec,
  layoutFingerprint,
  resolveLayout,
  type Snowflake,
  type SnowflakeOptions,
} from '../id/index.js';
import { bugOn } from '../testing/bug-switches.js';
import type { CacheFs, CacheHost } from './cache-fs.js';
import type { CacheLock } from './cache-lock.js';
import type { MonotonicClock } from './clocks.js';
import {
  ClientOptionError,
  FloeRequestError,
  FloeUnavailableError,
  LeaseLostError,
  type LeaseLostReason,
  LeaseRenewalLateError,
  ReplyMismatchError,
} from './errors.js';
import type { HttpTransport } from './http-transport.js';
import {
  type LeaseCacheRecord,
  releaseMarkFailed,
  removeLeaseCache,
  writeLeaseCache,
} from './lease-cache.js';
import { LeaseSnowflake } from './lease-snowflake.js';

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
  /** True when `mono` is the machine's clock (built-in CLOCK_MONOTONIC or `monotonicIsSystemWide`), shared by a boot. */
  systemMonotonic: boolean;
  bootId: string | undefined;
  requestTimeoutMs: number;
  setTimer: (fn: () => void, ms: number) => { cancel(): void };
  /** The lease cache's file system and process seams. */
  cacheFs: CacheFs;
  cacheHost: CacheHost;
}

export interface LeaseTuning {
  nodeId: string;
  requestId: string;
  /** The ID layout the acquire named (pinned per app by the cluster): the only one `snowflake()` accepts. */
  layout: Layout;
  safetyMarginMs: number;
  boundWindowMs: number;
  renewEveryMs: number;
  cachePath: string | undefined;
  /** The cache's lock, held by this lease from its acquire until it ends (set whenever `cachePath` is). */
  lock?: CacheLock;
  /** The holder's health check, run before every renewal (see LeaseWorkerOptions.healthCheck). */
  healthCheck?: () => boolean | Promise<boolean>;
  healthCheckTimeoutMs?: number;
  /** Sent with every renewal, so that a new leader probes it too. */
  healthUrl?: string;
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

/** Generator options a lease lets callers choose (worker, datacenter, clock, bounds and guard come from the lease). */
export type LeaseSnowflakeOptions = Omit<
  SnowflakeOptions,
  'layout' | 'worker' | 'datacenter' | 'clock' | 'floor' | 'ceiling' | 'guard'
>;

/**
 * A worker ID leased from a Floe cluster, renewed in the background (about every TTL/3).
 *
 * Events: `renewed` (RenewedEvent), `lost` (LeaseLostError: deadline passed, the cluster fenced the token, or another
 * process took the cache lock over), `released` (ReleasedEvent), `renewFailed` (Error: one renewal attempt failed or
 * its reply did not match; the lease goes on until its deadline).
 *
 * Safety (docs/decisions/0002-lease-safety.md): the lease's generator issues timestamps only in (floor, ceiling] and
 * stops at a deadline counted from the send time of the last acknowledged acquire/renewal, plus TTL, minus
 * `safetyMarginMs`, on the monotonic clock AND on the wall clock (whichever comes first: the wall clock also counts
 * time the machine was suspended).
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
  /** Added to the wall clock by this lease's generator: > 0 only when the floor was ahead of this machine's clock. */
  readonly leadMs: number;
  /** True when this lease was resumed from the on-disk cache while the cluster was unreachable. */
  readonly resumedFromCache: boolean;
  /** The ID layout this lease was acquired for: its generator's layout. */
  readonly layout: Layout;

  private committedBoundMs: number;
  private usedUpToMs: number;
  private deadline: number;
  private deadlineWall: number;
  private lostReason: LeaseLostReason | undefined;
  private lostDetail = '';
  /** The one generator of this lease (two would issue the same IDs), and what it was made with. */
  private generator: { gen: LeaseSnowflake; key: string } | undefined;
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
      sentAtWall: number;
      floorMs: number;
      deadlineMono?: number;
      deadlineWall?: number;
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
    this.layout = tuning.layout;
    this.committedBoundMs = Math.max(grant.boundMs, init.floorMs);
    this.usedUpToMs = init.usedUpToMs ?? init.floorMs;
    this.deadline = Number.NEGATIVE_INFINITY;
    this.deadlineWall = Number.NEGATIVE_INFINITY;
    // Deadlines, use and cache together; a cache that cannot be written (or a lock taken over) fails the acquire.
    this.acknowledged(init.sentAtMono, init.sentAtWall, init.deadlineMono, init.deadlineWall);
    this.armDeadlineTimer();
    this.scheduleRenewal(Math.max(0, init.sentAtMono + tuning.renewEveryMs - ctx.mono()));
  }

  /** Monotonic ms at which generation stops unless a renewal succeeds first; -Infinity once lost or released. */
  get deadlineMono(): number {
    return this.deadline;
  }

  /** The same deadline on the wall clock (ms since the Unix epoch); generation stops at whichever comes first. */
  get deadlineWallMs(): number {
    return this.deadlineWall;
  }

  /** The bound the cluster has committed for this lease (its high-water mark). */
  get boundMs(): number {
    return this.committedBoundMs;
  }

  /** The highest timestamp the generator may use right now (the committed bound, or less with a cache). */
  get ceilingMs(): number {
    return this.usedUpToMs;
  }

  /** Whether generation is allowed right now (not lost, not released, neither deadline passed). */
  get valid(): boolean {
    return this.ctx.mono() < this.deadline && this.ctx.wall.now() < this.deadlineWall;
  }

  /** Why the lease ended, if it has. */
  get endedBecause(): LeaseLostReason | undefined {
    return this.lostReason;
  }

  /**
   * The Snowflake generator bound to this lease: worker (and datacenter, when the pool is split) from the lease, floor
   * at the lease's floor, ceiling at what the cluster committed; it throws `LeaseRenewalLateError` (transient) inside
   * the last tick before the deadline while the lease is still valid, and `LeaseLostError` once the deadline passes or
   * the lease is lost or released (the lease has ended by then). Errors of the ID core (e.g. `CeilingReachedError` when renewals keep
   * failing, `ClockMovedBackwardsError`) pass through.
   *
   * One generator per lease: two generators on one worker ID would issue the same IDs. Calling it again with the
   * same layout and options returns the same generator; another layout or other options throw `ClientOptionError`.
   * A layout whose tick (plus `maxLeadMs` in borrow mode) is not shorter than TTL - margin - renewal period is refused:
   * the generator stops one tick before the deadline, so such a tick would leave no time to renew.
   */
  snowflake(
    layout: Layout | LayoutSpec | string = this.layout,
    options: LeaseSnowflakeOptions = {},
  ): Snowflake {
    if (!this.valid) throw this.lostError();
    const l = resolveLayout(layout);
    if (layoutFingerprint(l) !== layoutFingerprint(this.layout)) {
      throw new ClientOptionError(
        'layout',
        `the layout this lease was acquired for (${this.layout.name}, ${layoutFingerprint(this.layout)}): the ` +
          `cluster pins one layout per app, since IDs of two layouts on one worker ID can collide; pass the layout ` +
          `to leaseWorker({ layout })`,
        `${l.name} (${layoutFingerprint(l)})`,
      );
    }
    const key = JSON.stringify([l, options]);
    if (this.generator !== undefined && !bugOn('client-two-generators')) {
      if (this.generator.key === key) return this.generator.gen;
      throw new ClientOptionError(
        'layout',
        `the layout and options of this lease's existing generator (layout ${this.generator.gen.layout.name}): ` +
          'one generator per lease, since two would issue the same IDs; reuse the first one, or lease another worker ID',
        l.name,
      );
    }
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
    // After a passed check the fast path goes on to the end of the tick (a borrowed tick starts up to maxLeadMs
    // ahead): the check must leave that much before the deadline.
    const borrow = options.onSequenceExhausted === 'borrow';
    const spanMs = l.unitMs + (borrow ? (options.maxLeadMs ?? DEFAULT_MAX_LEAD_MS) : 0);
    const room = this.ttlMs - this.tuning.safetyMarginMs - this.tuning.renewEveryMs;
    if (!(spanMs < room)) {
      throw new ClientOptionError(
        borrow ? 'unitMs + maxLeadMs' : 'unitMs',
        `less than ttlMs - safetyMarginMs - renewEveryMs = ${room} ms for layout ${l.name} (generation stops one tick ` +
          'before the deadline; a longer tick leaves no time to renew): use a finer layout or a longer TTL',
        spanMs,
      );
    }
    const wall = this.ctx.wall;
    const lead = this.leadMs;
    const clock: Clock =
      lead === 0
        ? wall
        : { now: () => wall.now() + lead, waitUntil: (ms: number) => wall.waitUntil?.(ms - lead) };
    const mono = this.ctx.mono;
    const gen = new LeaseSnowflake(
      {
        ...options,
        layout: l,
        worker: split ? this.localWorkerId : this.workerId,
        datacenter: split ? this.datacenterId : 0,
        ceiling: this.usedUpToMs,
        floor: this.floorMs,
        clock,
      },
      (g, now) => {
        const m = mono();
        // `now` is the generator's clock (wall + lead): the wall deadline is checked on the same reading.
        const span = bugOn('client-no-tick-margin') ? 0 : spanMs;
        if (!(m < this.deadline - span) || !(now - lead < this.deadlineWall - span)) {
          // Inside the last tick before a deadline that has not passed: the lease is valid and still renewing, so the
          // refusal is transient. A LeaseLostError here made callers lease again while this lease renewed on, and meet
          // it as lease_held for ever (FS-16, swarm seed 1030).
          if (this.lostReason === undefined && m < this.deadline && now - lead < this.deadlineWall) {
            throw new LeaseRenewalLateError(this.app, this.workerId, this.token, this.deadline - m);
          }
          // Past the deadline (its timer has not run yet: a busy caller): the lease ends now, before anyone is told.
          this.end('deadline', this.lostError().message, true);
          throw this.lostError();
        }
        g.lastCheckMono = m;
      },
    );
    this.generator = { gen, key };
    return gen;
  }

  /** The error generators throw now (reason `deadline` unless the lease was fenced or released). */
  lostError(): LeaseLostError {
    const reason = this.lostReason ?? 'deadline';
    const detail =
      this.lostReason === undefined
        ? `no renewal acknowledged in time; the safe deadline (TTL ${this.ttlMs} ms minus ${this.tuning.safetyMarginMs} ms ` +
          'from the last acknowledged send, on the monotonic and the wall clock, less one tick of the layout) passed'
        : this.lostDetail;
    return new LeaseLostError(reason, this.app, this.workerId, this.token, detail);
  }

  /**
   * Stops the generator of this lease, then releases the worker ID, reporting the highest timestamp used (the next
   * holder starts above it). Safe to call more than once. Rejects only if the cluster stayed unreachable (the lease
   * then simply expires), its reply did not match (`ReplyMismatchError`), or, with a cache, the release's mark could
   * not be made durable (`FloeClientError` `ERR_CACHE_WRITE`: nothing was sent, the lease expires).
   */
  release(): Promise<ReleasedEvent> {
    if (this.releasing) return this.releasing;
    const fenced =
      this.lostReason !== undefined && this.lostReason !== 'deadline' && this.lostReason !== 'unhealthy';
    this.end('released', 'release() was called', false);
    const last = this.lastTimestampMs();
    this.releasing = (async () => {
      try {
        if (fenced)
          return { highWaterMs: this.committedBoundMs, lastTimestampMs: last, alreadyReleased: true };
        const path = `/v1/apps/${encodeURIComponent(this.app)}/workers/${this.workerId}/release`;
        // The cache says "released" durably before the release is sent: if it takes effect and its answer is lost,
        // a restarted process must not resume this lease from the cache (review finding F2).
        // Unless another process holds the cache's lock now: a lock file removed behind our back is no reason to skip
        // the tombstone (review round 3).
        // A lease lost at its deadline let its lock go (its record was marked then): the cache may be another
        // lease's now, so it is left alone (review of 47f2aac, hole B).
        if (this.tuning.cachePath !== undefined && this.tuning.lock?.mayWrite !== false) {
          // Not durable (a failed write or directory fsync): no release is sent, the lease expires (finding F3).
          try {
            this.writeCache(this.usedUpToMs, 0, 0, true); // deadlines in the past, and marked released
          } catch (e) {
            throw releaseMarkFailed(this.tuning.cachePath, this.workerId, e);
          }
        }
        let r: { body: unknown; endpoint: string };
        try {
          r = await this.ctx.transport.post<unknown>(
            path,
            { token: this.token, ...(last === undefined ? {} : { lastTimestampMs: last }) },
            { budgetMs: Math.max(this.ctx.requestTimeoutMs, this.ttlMs) },
          );
        } catch (e) {
          if (
            e instanceof FloeRequestError &&
            ['stale_token', 'not_held', 'lease_expired'].includes(e.serverCode)
          ) {
            // Already expired and possibly re-granted: nothing to release; our generator stopped before that.
            const ev = { highWaterMs: this.committedBoundMs, lastTimestampMs: last, alreadyReleased: true };
            this.dropCache();
            this.emit('released', ev);
            return ev;
          }
          throw e;
        }
        const b = vouch(this.ctx.transport, r.endpoint, () =>
          checkReply(path, r.body, 'release', { app: this.app, workerId: this.workerId }),
        );
        const ev = {
          highWaterMs: num(path, b, 'highWaterMs'),
          lastTimestampMs: last,
          alreadyReleased: b.alreadyReleased === true,
        };
        this.dropCache();
        this.emit('released', ev);
        return ev;
      } finally {
        // No cache write follows: the next process on this cache path may go ahead.
        this.tuning.lock?.release();
      }
    })();
    return this.releasing;
  }

  /** Highest timestamp issued by this lease's generator, if any. */
  lastTimestampMs(): number | undefined {
    return this.generator?.gen.lastTimestamp;
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
    if (!this.valid) {
      // E.g. a machine that resumes from suspend: the wall-clock deadline passed while no timer could run.
      this.end('deadline', this.lostError().message, true);
      return;
    }
    this.renewing = true;
    try {
      if (this.tuning.healthCheck !== undefined) {
        const why = await this.checkHealth(this.tuning.healthCheck);
        if (this.lostReason !== undefined) return;
        if (why !== undefined) {
          // Stop generating first, then hand the worker ID back (reporting the last timestamp used), as release()
          // does: a broken holder keeps nothing. Were the release lost, the lease simply expires at its deadline.
          this.end('unhealthy', `the holder's health check failed: ${why}`, true);
          void this.release().catch(() => {});
          return;
        }
      }
      const now = this.ctx.wall.now() + this.leadMs;
      // Promise a new bound only when the headroom runs low, so most renewals are not logged.
      const want =
        this.committedBoundMs - now < this.tuning.boundWindowMs / 2
          ? Math.ceil(now + this.tuning.boundWindowMs)
          : undefined;
      const budgetMs = Math.max(0, this.deadline - this.ctx.mono());
      const path = `/v1/apps/${encodeURIComponent(this.app)}/workers/${this.workerId}/renew`;
      const r = await this.ctx.transport.post<unknown>(
        path,
        {
          token: this.token,
          ...(want === undefined ? {} : { boundMs: want }),
          ...(this.tuning.healthUrl === undefined ? {} : { healthUrl: this.tuning.healthUrl }),
        },
        { budgetMs: Math.min(budgetMs, Math.max(this.tuning.renewEveryMs, this.ctx.requestTimeoutMs)) },
      );
      if (this.lostReason !== undefined) return;
      // A reply for another worker, token or TTL is never used: the deadline does not move.
      const b = vouch(this.ctx.transport, r.endpoint, () =>
        checkReply(path, r.body, 'renew', {
          app: this.app,
          workerId: this.workerId,
          token: this.token,
          ttlMs: this.ttlMs,
        }),
      );
      const bound = num(path, b, 'boundMs');
      if (bound > this.committedBoundMs) this.committedBoundMs = bound;
      this.acknowledged(r.sentAtMono, r.sentAtWall);
      this.armDeadlineTimer();
      this.scheduleRenewal(Math.max(0, r.sentAtMono + this.tuning.renewEveryMs - this.ctx.mono()));
      this.emit('renewed', {
        token: this.token,
        boundMs: this.committedBoundMs,
        logged: b.logged === true,
        deadlineMono: this.deadline,
      } satisfies RenewedEvent);
    } catch (e) {
      if (this.lostReason !== undefined) return;
      if (
        e instanceof FloeRequestError &&
        ['stale_token', 'not_held', 'lease_expired'].includes(e.serverCode)
      ) {
        this.end(e.serverCode as LeaseLostReason, e.message, true);
        this.dropCache();
        this.tuning.lock?.release();
        return;
      }
      if (e instanceof FloeRequestError && e.serverCode === 'lease_unhealthy') {
        // The leader's probes of our health URL failed: stop now and hand the worker ID back.
        this.end('unhealthy', e.message, true);
        void this.release().catch(() => {});
        return;
      }
      if (e instanceof CacheLockLost) {
        // Another process runs on this cache now: it will release this lease's token; stop at once.
        this.end('cache_lock_lost', e.message, true);
        return;
      }
      if (!this.valid) {
        this.end('deadline', this.lostError().message, true);
        return;
      }
      if (this.listenerCount('renewFailed') > 0) this.emit('renewFailed', e);
      // Unavailable, refused for another reason, or a reply that did not match: try again soon, until the deadline.
      this.scheduleRenewal(e instanceof FloeUnavailableError ? 0 : Math.min(250, this.tuning.renewEveryMs));
    } finally {
      this.renewing = false;
    }
  }

  /** Undefined when healthy, else why not (false, an exception, or no answer in time). */
  private async checkHealth(check: () => boolean | Promise<boolean>): Promise<string | undefined> {
    let timer: { cancel(): void } | undefined;
    const ms = this.tuning.healthCheckTimeoutMs ?? 1000;
    try {
      const verdict = await Promise.race([
        Promise.resolve().then(check),
        new Promise<string>((resolve) => {
          timer = this.ctx.setTimer(() => resolve(`no answer within ${ms} ms`), ms);
        }),
      ]);
      if (verdict === true) return undefined;
      return typeof verdict === 'string' ? verdict : `it returned ${String(verdict)}`;
    } catch (e) {
      return `it threw: ${(e as Error)?.message ?? String(e)}`;
    } finally {
      timer?.cancel();
    }
  }

  /**
   * An acquire/renewal sent at (`sentAtMono`, `sentAtWall`) was acknowledged: move both deadlines to send + TTL -
   * margin (never backwards), and let the generator use timestamps up to the committed bound (with a cache: only up
   * to about one TTL past the send). With a cache, the lock is checked and the new state is on disk before any of it
   * takes effect, so a restarted process starts above whatever this one may have used.
   */
  private acknowledged(
    sentAtMono: number,
    sentAtWall: number,
    deadlineMono?: number,
    deadlineWall?: number,
  ): void {
    const margin = this.tuning.safetyMarginMs;
    const nextMono = Math.max(this.deadline, deadlineMono ?? sentAtMono + this.ttlMs - margin);
    const nextWall = Math.max(this.deadlineWall, deadlineWall ?? sentAtWall + this.ttlMs - margin);
    let use = this.committedBoundMs;
    if (this.tuning.cachePath !== undefined) {
      use = Math.min(this.committedBoundMs, Math.ceil(sentAtWall + this.leadMs + this.ttlMs));
    }
    if (use < this.usedUpToMs) use = this.usedUpToMs;
    if (this.tuning.cachePath !== undefined) {
      try {
        this.tuning.lock?.refresh();
      } catch (e) {
        throw new CacheLockLost((e as Error).message);
      }
      this.writeCache(use, nextMono, nextWall);
    }
    this.deadline = nextMono;
    this.deadlineWall = nextWall;
    this.usedUpToMs = use;
    const gen = this.generator?.gen;
    if (gen && (gen.ceiling ?? -1) < use) gen.setCeiling(use);
  }

  private writeCache(
    usedUpToMs: number,
    deadlineMono: number,
    deadlineWallMs: number,
    released = false,
  ): void {
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
      deadlineMono,
      bootId: this.ctx.bootId ?? null,
      systemMonotonic: this.ctx.systemMonotonic,
      deadlineWallMs,
      savedAtWallMs: this.ctx.wall.now(),
      cachePath: this.tuning.cachePath,
      layout: layoutFingerprint(this.layout),
      ...(this.ctx.transport.cluster.value === undefined
        ? {}
        : { cluster: this.ctx.transport.cluster.value }),
      ...(released ? { released: true as const } : {}),
    };
    writeLeaseCache(this.tuning.cachePath as string, record, this.ctx.cacheFs, this.ctx.cacheHost);
  }

  /** Removes the cache file, if this lease still holds the cache's lock (else it is another process's cache now). */
  private dropCache(): void {
    const path = this.tuning.cachePath;
    if (path === undefined) return;
    if (this.tuning.lock?.mayWrite === false) return;
    try {
      removeLeaseCache(path, this.ctx.cacheFs);
    } catch {
      // A cache left behind names a lease that has ended: the next process releases it (not_held) and acquires.
    }
  }

  private armDeadlineTimer(): void {
    this.deadlineTimer?.cancel();
    if (this.lostReason !== undefined) return;
    const ms = Math.max(
      0,
      Math.min(this.deadline - this.ctx.mono(), this.deadlineWall - this.ctx.wall.now()),
    );
    this.deadlineTimer = this.ctx.setTimer(() => {
      if (this.lostReason !== undefined) return;
      if (!this.valid) this.end('deadline', this.lostError().message, true);
      else this.armDeadlineTimer();
    }, ms);
  }

  private end(reason: LeaseLostReason, detail: string, emitLost: boolean): void {
    if (this.lostReason !== undefined && this.lostReason !== 'deadline') return;
    const first = this.lostReason === undefined;
    this.lostReason = reason;
    this.lostDetail = detail;
    this.deadline = Number.NEGATIVE_INFINITY;
    this.deadlineWall = Number.NEGATIVE_INFINITY;
    this.generator?.gen.recheck();
    this.renewTimer?.cancel();
    this.deadlineTimer?.cancel();
    // A lease lost at its deadline may be granted to another holder now: its record says so (deadlines in the past,
    // the floor kept) before the lock goes, so no call of this or a later process resumes it, even after the wall
    // clock stepped back past the old deadline (full simulation, swarm seed 144777). Best effort: if it cannot be
    // written, this process still never resumes it (its requestId stays claimed, FloeClient.leaseWorker), and a
    // later process finds the old wall-clock deadline, which has passed (docs/client.md, "Clocks").
    if (
      reason === 'deadline' &&
      first &&
      this.tuning.cachePath !== undefined &&
      this.tuning.lock?.mayWrite !== false
    ) {
      try {
        this.writeCache(this.usedUpToMs, 0, 0);
      } catch {
        // see above
      }
    }
    // A lease lost at its deadline writes no more cache: the lock can go. (Fenced: after the cache is dropped;
    // released: after the release's answer.)
    if (reason === 'deadline' || reason === 'cache_lock_lost') this.tuning.lock?.release();
    if (emitLost && first) this.emit('lost', this.lostError());
  }
}

/** The lock was taken over by another process: this lease must stop. */
class CacheLockLost extends Error {}

/**
 * The reply's body as an object of `op` whose fields equal `expect`'s, else ReplyMismatchError (never a grant).
 */
export function checkReply(
  path: string,
  body: unknown,
  op: string,
  expect: Record<string, unknown>,
): Record<string, unknown> {
  if (typeof body !== 'object' || body === null)
    throw new ReplyMismatchError(path, 'body', 'an object', body);
  const b = body as Record<string, unknown>;
  if (bugOn('no-reply-check')) return b;
  if (b.op !== op) throw new ReplyMismatchError(path, 'op', op, b.op);
  for (const [k, v] of Object.entries(expect)) {
    if (b[k] !== v) throw new ReplyMismatchError(path, k, v, b[k]);
  }
  return b;
}

/** A mismatch in one of these fields means the reply answered another request (not a node's fault in ours). */
export const REQUEST_FIELDS: readonly string[] = ['op', 'app', 'nodeId', 'requestId', 'incarnation'];

/**
 * Runs the reply `check` of an answer `endpoint` gave: when it passes, the transport may keep the endpoint (a learned
 * one becomes the leader); when the reply answered another request (REQUEST_FIELDS, or `also`), the transport forgets
 * the endpoint (no longer the leader, nor learned: review of FS-19, F5).
 */
export function vouch<T>(
  transport: Pick<HttpTransport, 'confirm' | 'forget'>,
  endpoint: string,
  check: () => T,
  also: readonly string[] = [],
): T {
  let v: T;
  try {
    v = check();
  } catch (e) {
    if (e instanceof ReplyMismatchError && (REQUEST_FIELDS.includes(e.field) || also.includes(e.field)))
      transport.forget(endpoint);
    throw e;
  }
  transport.confirm(endpoint);
  return v;
}

/** A finite number >= 0 from the reply, else ReplyMismatchError. */
export function num(
  path: string,
  b: Record<string, unknown>,
  field: string,
  integer = false,
  min = 0,
): number {
  const v = b[field];
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || (integer && !Number.isSafeInteger(v))) {
    throw new ReplyMismatchError(path, field, integer ? `an integer >= ${min}` : `a number >= ${min}`, v);
  }
  return v;
}
