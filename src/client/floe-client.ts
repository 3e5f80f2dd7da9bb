import { randomUUID } from 'node:crypto';
import { type Clock, systemClock } from '../id/index.js';
import { hrtimeMonotonic, type MonotonicClock, readBootId } from './clocks.js';
import { ClientOptionError, FloeRequestError, FloeUnavailableError } from './errors.js';
import { type FetchLike, HttpTransport } from './http-transport.js';
import { readLeaseCache } from './lease-cache.js';
import { type GrantInfo, type LeaseContext, WorkerLease } from './worker-lease.js';

export interface FloeClientOptions {
  /** Any nodes of the cluster, `host:port` of their HTTP listener (or `http://host:port`). At least one. */
  endpoints: readonly string[];
  /** Basic auth, when the cluster has users. */
  user?: string;
  password?: string;
  /** Timeout of one HTTP attempt (ms). Default 2,000; allowed [50, 60,000]. */
  requestTimeoutMs?: number;
  /** Wall clock for IDs and bounds. Default `systemClock` (Date.now). */
  clock?: Clock;
  /** Monotonic clock (ms) for deadlines. Default CLOCK_MONOTONIC via `process.hrtime`. */
  monotonic?: MonotonicClock;
  /** Boot ID that makes cached monotonic deadlines comparable; default `/proc/sys/kernel/random/boot_id`. */
  bootId?: string;
  /** Default global `fetch`. */
  fetch?: FetchLike;
  /** Default `setTimeout`-based, unref'd. */
  setTimer?: (fn: () => void, ms: number) => { cancel(): void };
  /** Default `setTimeout` promise. */
  sleep?: (ms: number) => Promise<void>;
  /** Default Math.random. */
  random?: () => number;
}

export interface LeaseWorkerOptions {
  app: string;
  /** Who this instance is (e.g. `10.0.0.7:8080`): it gets its previous worker ID back when that is free. */
  nodeId: string;
  /** Lease TTL (ms). Default 10,000; the cluster allows [1,000, 3,600,000]. */
  ttlMs?: number;
  /**
   * File to cache the lease in (seed 001). A restarted instance asks for the cached lease back (same requestId), and
   * may resume from the cache alone while the cluster is unreachable, until the cached safe deadline.
   */
  cachePath?: string;
  /** Stop this long before sent-time + TTL (ms). Default TTL/10 + 100; allowed [0, TTL/2]. */
  safetyMarginMs?: number;
  /**
   * How far ahead of the clock bounds are promised (ms); a new bound is promised when less than half is left.
   * Default max(30,000, 3 x TTL), at most 3,000,000 (the cluster refuses bounds over 1 h ahead); allowed [1,000,
   * 3,000,000]. Below 2 x TTL a long outage can stop generation with `CeilingReachedError` before the deadline.
   */
  boundWindowMs?: number;
  /** Renewal period (ms). Default TTL/3; allowed [10, TTL/2]. */
  renewEveryMs?: number;
  /** How long to keep trying to acquire (unreachable cluster, or our own previous lease still held). Default TTL + 2,000. */
  acquireTimeoutMs?: number;
  /** With a cache: how much earlier than the cached wall-clock deadline to give up when the boot changed. Default TTL/10. */
  cacheWallMarginMs?: number;
  /** Idempotency key of the acquire (default: the cached one, else a random UUID). */
  requestId?: string;
}

interface AcquireReply extends GrantInfo {
  retried: boolean;
}

/**
 * The Floe client SDK: leases worker IDs from a Floe cluster over its HTTP API and binds Snowflake generators to them.
 *
 * ```ts
 * const client = new FloeClient({ endpoints: ['127.0.0.1:7380'] });
 * const lease = await client.leaseWorker({ app: 'orders', nodeId: 'orders-1', ttlMs: 10_000 });
 * const ids = lease.snowflake('floe');
 * ids.next();
 * await lease.release();
 * ```
 */
export class FloeClient {
  readonly transport: HttpTransport;
  private readonly ctx: LeaseContext;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly leases = new Set<WorkerLease>();

  constructor(options: FloeClientOptions) {
    if (!Array.isArray(options?.endpoints) || options.endpoints.length === 0) {
      throw new ClientOptionError('endpoints', 'a non-empty list of host:port', options?.endpoints);
    }
    const requestTimeoutMs = inRange('requestTimeoutMs', options.requestTimeoutMs ?? 2000, 50, 60_000);
    const mono = options.monotonic ?? hrtimeMonotonic;
    this.sleep = options.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
    this.transport = new HttpTransport({
      endpoints: options.endpoints,
      user: options.user,
      password: options.password,
      requestTimeoutMs,
      fetch: options.fetch ?? (globalThis.fetch as unknown as FetchLike),
      monotonic: mono,
      sleep: this.sleep,
      random: options.random ?? Math.random,
    });
    this.ctx = {
      transport: this.transport,
      wall: options.clock ?? systemClock,
      mono,
      bootId: options.bootId ?? readBootId(),
      requestTimeoutMs,
      setTimer:
        options.setTimer ??
        ((fn, ms) => {
          const t = setTimeout(fn, ms);
          t.unref();
          return { cancel: () => clearTimeout(t) };
        }),
    };
  }

  /**
   * Leases a worker ID of `app` for this instance and keeps renewing it. Rejects with `FloeRequestError`
   * (e.g. `pool_exhausted`, `unauthorized`) or `FloeUnavailableError` (no cached lease to fall back on).
   */
  async leaseWorker(o: LeaseWorkerOptions): Promise<WorkerLease> {
    const ttlMs = inRange('ttlMs', o.ttlMs ?? 10_000, 1000, 3_600_000);
    const tuning = {
      nodeId: o.nodeId,
      safetyMarginMs: inRange(
        'safetyMarginMs',
        o.safetyMarginMs ?? Math.floor(ttlMs / 10) + 100,
        0,
        ttlMs / 2,
      ),
      boundWindowMs: inRange(
        'boundWindowMs',
        o.boundWindowMs ?? Math.min(3_000_000, Math.max(30_000, 3 * ttlMs)),
        1000,
        3_000_000,
      ),
      renewEveryMs: inRange('renewEveryMs', o.renewEveryMs ?? Math.floor(ttlMs / 3), 10, ttlMs / 2),
      cachePath: o.cachePath,
    };
    const acquireTimeoutMs = inRange('acquireTimeoutMs', o.acquireTimeoutMs ?? ttlMs + 2000, 0, 3_600_000);
    const { wall, mono } = this.ctx;
    const cached = o.cachePath ? readLeaseCache(o.cachePath, o.app, o.nodeId) : undefined;
    const requestId = o.requestId ?? cached?.requestId ?? randomUUID();
    const started = mono();
    for (;;) {
      try {
        const r = await this.transport.post<AcquireReply>(
          `/v1/apps/${encodeURIComponent(o.app)}/workers/acquire`,
          { nodeId: o.nodeId, ttlMs, requestId, boundMs: Math.ceil(wall.now() + tuning.boundWindowMs) },
          { budgetMs: Math.max(0, acquireTimeoutMs - (mono() - started)) },
        );
        // The same worker ID as the cache: the previous incarnation may have used timestamps up to usedUpToMs.
        const sameWorker = cached !== undefined && cached.workerId === r.body.workerId;
        const floorMs = Math.max(r.body.highWaterMs, sameWorker ? cached.usedUpToMs : 0);
        const lease = this.track(
          new WorkerLease(this.ctx, { ...tuning, requestId }, r.body, { sentAtMono: r.sentAtMono, floorMs }),
        );
        // Headroom below half the window (the mark was ahead of our clock): promise a new bound before returning.
        if (lease.boundMs - (wall.now() + lease.leadMs) < tuning.boundWindowMs / 2) await lease.renewNow();
        return lease;
      } catch (e) {
        const left = acquireTimeoutMs - (mono() - started);
        if (e instanceof FloeRequestError && e.serverCode === 'lease_held' && left > 0) {
          await this.sleep(Math.min(250, left)); // our previous incarnation's lease: it ends within one TTL
          continue;
        }
        if (e instanceof FloeUnavailableError && cached !== undefined) {
          const resumed = this.resume(cached, tuning);
          if (resumed) return resumed;
        }
        throw e;
      }
    }
  }

  /** Releases every lease this client holds (graceful shutdown). */
  async close(): Promise<void> {
    await Promise.allSettled([...this.leases].map((l) => l.release()));
  }

  private track(lease: WorkerLease): WorkerLease {
    this.leases.add(lease);
    lease.once('released', () => this.leases.delete(lease));
    lease.once('lost', () => this.leases.delete(lease));
    return lease;
  }

  /** A lease from the cache alone, if its safe deadline has not passed (else undefined). */
  private resume(
    c: NonNullable<ReturnType<typeof readLeaseCache>>,
    tuning: {
      nodeId: string;
      safetyMarginMs: number;
      boundWindowMs: number;
      renewEveryMs: number;
      cachePath: string | undefined;
    },
  ): WorkerLease | undefined {
    const { mono, wall, bootId } = this.ctx;
    const sameBoot = bootId !== undefined && c.bootId === bootId;
    const margin = Math.floor(c.ttlMs / 10);
    // Same boot: CLOCK_MONOTONIC survived the restart. Otherwise fall back on the wall clock, with a margin.
    const deadlineMono = sameBoot ? c.deadlineMono : mono() + (c.deadlineWallMs - wall.now() - margin);
    if (!(deadlineMono > mono())) return undefined;
    const grant: GrantInfo = { ...c, app: c.app, boundMs: c.boundMs };
    return this.track(
      new WorkerLease(this.ctx, { ...tuning, requestId: c.requestId }, grant, {
        sentAtMono: deadlineMono - c.ttlMs + tuning.safetyMarginMs,
        deadlineMono,
        floorMs: c.usedUpToMs,
        usedUpToMs: c.usedUpToMs,
        resumed: true,
      }),
    );
  }
}

function inRange(field: string, v: number, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) {
    throw new ClientOptionError(field, `a number in [${min}, ${max}]`, v);
  }
  return v;
}
