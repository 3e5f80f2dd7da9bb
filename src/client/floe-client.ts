import { randomBytes, randomUUID } from 'node:crypto';
import { dirname } from 'node:path';
import type { Registry } from 'prom-client';
import {
  type Clock,
  type Layout,
  type LayoutSpec,
  layoutFingerprint,
  resolveLayout,
  systemClock,
} from '../id/index.js';
import { bugOn } from '../testing/bug-switches.js';
import { type TlsClientOptions, tlsFetch } from '../tls/fetch.js';
import { type CacheFs, type CacheHost, nodeCacheFs, nodeCacheHost } from './cache-fs.js';
import { CacheLock } from './cache-lock.js';
import { hrtimeMonotonic, type MonotonicClock, readBootId } from './clocks.js';
import { ClusterPin, isClusterUid } from './cluster-pin.js';
import { ClientOptionError, FloeRequestError, FloeUnavailableError, ReplyMismatchError } from './errors.js';
import { type FetchLike, HttpTransport } from './http-transport.js';
import { type LeaseCacheRecord, readLeaseCache, releaseMarkFailed, writeLeaseCache } from './lease-cache.js';
import { ClientMetrics } from './metrics.js';
import { FloeSequence, type SequenceOptions } from './sequence.js';
import {
  checkReply,
  type GrantInfo,
  type LeaseContext,
  type LeaseTuning,
  num,
  REQUEST_FIELDS,
  vouch,
  WorkerLease,
} from './worker-lease.js';

/**
 * This process's incarnation: 128 random bits, fixed for the life of the process. The cluster answers a retried
 * acquire (same requestId) with the live grant only when it comes from the same incarnation.
 */
export const PROCESS_INCARNATION: string = randomBytes(16).toString('hex');

export interface FloeClientOptions {
  /** Any nodes of the cluster, `host:port` of their HTTP listener (or `http://host:port`). At least one. */
  endpoints: readonly string[];
  /** Basic auth, when the cluster has users. */
  user?: string;
  password?: string;
  /** Timeout of one HTTP attempt (ms). Default 2,000; allowed [50, 60,000]. */
  requestTimeoutMs?: number;
  /**
   * The cluster's UUID (`floe cluster uid`, or `cluster` in `GET /v1/cluster`). Every answer names its cluster; one
   * of another cluster is refused, so a client whose endpoints, balancer or a redirect reach another Floe cluster is
   * never granted a worker ID there. Recommended in production. Without it the client pins the cluster its lease
   * cache was written against, else the first successful answer's (docs/cluster-identity.md). A function: the
   * cluster a node's own client belongs to (the node's UUID, once it knows it); until it names one, no result is taken.
   */
  clusterUid?: string | (() => string | undefined);
  /** Wall clock for IDs and bounds. Default `systemClock` (Date.now). */
  clock?: Clock;
  /**
   * Monotonic clock (ms) for deadlines. Default CLOCK_MONOTONIC via `process.hrtime`. Only the default is trusted to
   * be shared by every process of a boot: with any other clock, a cached lease is resumed on the wall clock alone.
   */
  monotonic?: MonotonicClock;
  /**
   * A testing and embedding seam: declares that the `monotonic` you supply is the machine's own clock (shared by every
   * process of one boot, stopped while the machine is suspended, restarted at boot: what CLOCK_MONOTONIC is), so a
   * cached monotonic deadline written with it is trusted on the same boot ID, as with the built-in one. Default: true
   * for the built-in clock, false for a supplied one. Declaring a per-process clock (e.g. `performance.now`) system-wide
   * lets a restarted process resume a cached lease past its deadline: only a simulator or a host binding of the real
   * CLOCK_MONOTONIC should set it.
   */
  monotonicIsSystemWide?: boolean;
  /** Boot ID that makes cached monotonic deadlines comparable; default `/proc/sys/kernel/random/boot_id`. */
  bootId?: string;
  /**
   * The file system the lease cache and its lock are written to, and what the lock knows of this machine's processes.
   * Default: the real ones. A simulation passes twins (docs/simulator-full.md).
   */
  cacheFs?: CacheFs;
  cacheHost?: CacheHost;
  /** Default global `fetch` (or, with `tls`, a node:https one). */
  fetch?: FetchLike;
  /**
   * For `https://` endpoints whose certificate is not signed by a public CA, or that ask for a client
   * certificate: `{ ca }` (PEM) and optionally `{ cert, key }`. Ignored when `fetch` is given. docs/tls.md.
   */
  tls?: TlsClientOptions;
  /**
   * A prom-client Registry to register the SDK's metrics on (`floe_client_*`: calls, latency, leases held, renewals,
   * losses, time left; docs/metrics.md). Several clients may share one. Default: no metrics.
   */
  metrics?: Registry;
  /** Default `setTimeout`-based, unref'd. */
  setTimer?: (fn: () => void, ms: number) => { cancel(): void };
  /** Default `setTimeout` promise. */
  sleep?: (ms: number) => Promise<void>;
  /** Default Math.random. */
  random?: () => number;
  /**
   * This process's incarnation id (1..128 characters), sent with every acquire. Default: `PROCESS_INCARNATION`, 128
   * random bits per process. Two processes must never share one.
   */
  incarnation?: string;
  /** Makes the requestId of an acquire that brings none. Default `crypto.randomUUID` (a seam for seeded tests). */
  newRequestId?: () => string;
}

export interface LeaseWorkerOptions {
  app: string;
  /** Who this instance is (e.g. `10.0.0.7:8080`): it gets its previous worker ID back when that is free. */
  nodeId: string;
  /** Lease TTL (ms). Default 10,000; the cluster allows [1,000, 3,600,000]. */
  ttlMs?: number;
  /**
   * The ID layout this lease's generator will use (a preset name, a spec or a Layout; default `floe`). The acquire
   * names it, and the cluster pins one layout per app: an acquire naming another is refused (`layout_mismatch`),
   * since IDs of two layouts on one worker ID can collide. `lease.snowflake()` uses it and refuses any other.
   */
  layout?: Layout | LayoutSpec | string;
  /**
   * File to cache the lease in (seed 001). One process at a time uses it (an exclusive lock, `<cachePath>.lock`). A
   * restarted instance ends the cached lease (release with its token) and acquires again (usually the same worker
   * ID, with a new token above everything the previous process may have used); while the cluster is unreachable it
   * may resume from the cache alone, until the cached safe deadline.
   */
  cachePath?: string;
  /** With a cache: how long to wait for another live process to let go of the cache's lock. Default TTL + 2,000. */
  cacheLockWaitMs?: number;
  /** Stop this long before sent-time + TTL (ms). Default TTL/10 + 100; allowed [TTL/100 + 50, TTL/2]. */
  safetyMarginMs?: number;
  /**
   * How far ahead of the clock bounds are promised (ms); a new bound is promised when less than half is left.
   * Default max(30,000, 3 x TTL), at most 3,000,000 (the cluster refuses bounds over 1 h ahead); allowed [1,000,
   * 3,000,000]. Below 2 x TTL a long outage can stop generation with `CeilingReachedError` before the deadline.
   */
  boundWindowMs?: number;
  /**
   * Renewal period (ms). Default TTL/3; allowed [10, (TTL - safetyMarginMs)/2], so that a failed renewal can be
   * retried before the deadline (a margin of TTL/2 with renewals every TTL/2 would make the lease flap).
   */
  renewEveryMs?: number;
  /**
   * Run before every renewal: a holder that is alive but broken (its database gone, its disk full) must not keep its
   * worker ID. When it returns false, throws, or takes longer than `healthCheckTimeoutMs`, the lease ends at once
   * (`lost` with reason `unhealthy`; generators throw `LeaseLostError`) and is released. Default: none.
   */
  healthCheck?: () => boolean | Promise<boolean>;
  /** How long a health check may take. Default min(1,000, renewEveryMs). */
  healthCheckTimeoutMs?: number;
  /**
   * A URL of this instance that answers 2xx while it is healthy. Sent with the acquire and every renewal; the leader
   * GETs it every second and, after 3 failed probes in a row, refuses the lease's renewals (`lease_unhealthy`): the
   * lease then ends (`lost` with reason `unhealthy`) and is released. Default: none.
   */
  healthUrl?: string;
  /** How long to keep trying to acquire (unreachable cluster, or our own previous lease still held). Default TTL + 2,000. */
  acquireTimeoutMs?: number;
  /** With a cache: how much earlier than the cached wall-clock deadline to give up when the boot changed. Default TTL/10. */
  cacheWallMarginMs?: number;
  /**
   * Idempotency key of the acquire. Repeat it only to retry a call that failed: while a call or a lease of this
   * process uses a requestId, another call with it is refused (`ClientOptionError`). Default: the requestId of this
   * process's last acquire for the same app, nodeId, TTL and layout if that call ended with its outcome unknown
   * (`FloeUnavailableError`, or `ReplyMismatchError` for another request's reply: the cluster may hold a lease under
   * it), else a fresh `newRequestId()`.
   * A caller that names its own requestIds should retry such a call with the same one: under a fresh one, the lease
   * the failed call may have left answers `lease_held` until it expires, one TTL later.
   */
  requestId?: string;
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
/** `requestTimeoutMs` when a client names none (one HTTP attempt). */
export const DEFAULT_REQUEST_TIMEOUT_MS = 2000;

export class FloeClient {
  readonly transport: HttpTransport;
  /** Sent with every acquire: a retried requestId is answered with the live grant only to this incarnation. */
  readonly incarnation: string;
  private readonly ctx: LeaseContext;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;
  private readonly newRequestId: () => string;
  private readonly leases = new Set<WorkerLease>();
  private readonly metrics: ClientMetrics | undefined;

  constructor(options: FloeClientOptions) {
    if (!Array.isArray(options?.endpoints) || options.endpoints.length === 0) {
      throw new ClientOptionError('endpoints', 'a non-empty list of host:port', options?.endpoints);
    }
    const requestTimeoutMs = inRange(
      'requestTimeoutMs',
      options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
      50,
      60_000,
    );
    const incarnation = options.incarnation ?? PROCESS_INCARNATION;
    if (typeof incarnation !== 'string' || incarnation.length < 1 || incarnation.length > 128) {
      throw new ClientOptionError('incarnation', 'a string of 1..128 characters', incarnation);
    }
    this.incarnation = incarnation;
    const mono = options.monotonic ?? hrtimeMonotonic;
    const systemWide = options.monotonicIsSystemWide;
    if (systemWide !== undefined && typeof systemWide !== 'boolean') {
      throw new ClientOptionError('monotonicIsSystemWide', 'true or false', systemWide);
    }
    if (systemWide === true && mono !== hrtimeMonotonic) checkSystemWideClock(mono, options.bootId);
    const wall = options.clock ?? systemClock;
    this.sleep = options.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
    this.random = options.random ?? Math.random;
    this.newRequestId = options.newRequestId ?? randomUUID;
    this.transport = new HttpTransport({
      endpoints: options.endpoints,
      user: options.user,
      password: options.password,
      requestTimeoutMs,
      fetch:
        options.fetch ?? (options.tls ? tlsFetch(options.tls) : (globalThis.fetch as unknown as FetchLike)),
      monotonic: mono,
      wall: () => wall.now(),
      sleep: this.sleep,
      random: this.random,
      cluster: new ClusterPin(options.clusterUid),
    });
    this.metrics = options.metrics ? ClientMetrics.of(options.metrics) : undefined;
    this.metrics?.instrumentTransport(this.transport);
    this.ctx = {
      transport: this.transport,
      wall,
      mono,
      systemMonotonic: systemWide ?? mono === hrtimeMonotonic,
      bootId: options.bootId ?? readBootId(),
      requestTimeoutMs,
      cacheFs: options.cacheFs ?? nodeCacheFs,
      cacheHost: options.cacheHost ?? nodeCacheHost,
      setTimer:
        options.setTimer ??
        ((fn, ms) => {
          const t = setTimeout(fn, ms);
          t.unref();
          return { cancel: () => clearTimeout(t) };
        }),
    };
  }

  /** The cluster this client is pinned to (its UUID), once known: the `clusterUid` option, a cache's or an answer's. */
  get clusterUid(): string | undefined {
    return this.transport.cluster.value;
  }

  /**
   * Values of the sequence `key` served in this process from segments the cluster allocates (no
   * network call per value; see FloeSequence and docs/sequences.md). The sequence must exist.
   */
  sequence(key: string, options: SequenceOptions = {}): FloeSequence {
    if (typeof key !== 'string' || key.length === 0)
      throw new ClientOptionError('key', 'a non-empty string', key);
    return new FloeSequence(this.transport, key, options, this.ctx.mono);
  }

  /**
   * Leases a worker ID of `app` for this instance and keeps renewing it. Rejects with `FloeRequestError`
   * (e.g. `pool_exhausted`, `unauthorized`, `lease_held` when another live process holds this nodeId's lease),
   * `FloeUnavailableError` (no cached lease to fall back on), `CacheLockedError` (another live process uses
   * `cachePath`), `ReplyMismatchError` (the cluster's reply did not answer this request) or `ClientOptionError`.
   */
  async leaseWorker(o: LeaseWorkerOptions): Promise<WorkerLease> {
    const ttlMs = inRange('ttlMs', o.ttlMs ?? 10_000, 1000, 3_600_000);
    // The margin covers clock-rate differences and timer delays: TTL/10 + 100 ms by default (a 10 % rate gap, see
    // decision 0002); never below TTL/100 + 50 ms (20 x the worst NTP slew, plus timer delay) nor above TTL/2.
    const safetyMarginMs = inRange(
      'safetyMarginMs',
      o.safetyMarginMs ?? Math.floor(ttlMs / 10) + 100,
      Math.ceil(ttlMs / 100) + 50,
      ttlMs / 2,
    );
    let layout: Layout;
    try {
      layout = resolveLayout(o.layout ?? 'floe');
    } catch (e) {
      throw new ClientOptionError(
        'layout',
        `a layout preset name or spec (${(e as Error).message})`,
        o.layout,
      );
    }
    const tuning = {
      nodeId: o.nodeId,
      layout,
      safetyMarginMs,
      boundWindowMs: inRange(
        'boundWindowMs',
        o.boundWindowMs ?? Math.min(3_000_000, Math.max(30_000, 3 * ttlMs)),
        1000,
        3_000_000,
      ),
      // At most half of what is left after the margin: a failed renewal gets another try before the deadline.
      renewEveryMs: inRange(
        'renewEveryMs',
        o.renewEveryMs ?? Math.floor(ttlMs / 3),
        10,
        Math.floor((ttlMs - safetyMarginMs) / 2),
      ),
      // One name per file, so that every spelling (symbolic links, `..`) takes the same lock (review finding R2).
      cachePath: o.cachePath === undefined ? undefined : this.ctx.cacheFs.canonical(o.cachePath),
      healthCheck: o.healthCheck,
      healthCheckTimeoutMs: 0,
      healthUrl: o.healthUrl,
    };
    if (o.healthUrl !== undefined) {
      let ok = typeof o.healthUrl === 'string' && o.healthUrl.length <= 512;
      try {
        ok &&= ['http:', 'https:'].includes(new URL(o.healthUrl).protocol);
      } catch {
        ok = false;
      }
      if (!ok)
        throw new ClientOptionError('healthUrl', 'an http(s) URL of at most 512 characters', o.healthUrl);
    }
    if (o.healthCheck !== undefined && typeof o.healthCheck !== 'function')
      throw new ClientOptionError(
        'healthCheck',
        'a function returning a boolean or a promise of one',
        o.healthCheck,
      );
    tuning.healthCheckTimeoutMs = inRange(
      'healthCheckTimeoutMs',
      o.healthCheckTimeoutMs ?? Math.min(1000, tuning.renewEveryMs),
      1,
      tuning.renewEveryMs,
    );
    const acquireTimeoutMs = inRange(
      'acquireTimeoutMs',
      o.acquireTimeoutMs ?? Math.min(3_600_000, ttlMs + 2000),
      0,
      3_600_000,
    );
    const cacheWallMarginMs = inRange(
      'cacheWallMarginMs',
      o.cacheWallMarginMs ?? Math.floor(ttlMs / 10),
      0,
      3_600_000,
    );
    const cacheLockWaitMs = inRange(
      'cacheLockWaitMs',
      o.cacheLockWaitMs ?? Math.min(3_600_000, ttlMs + 2000),
      0,
      3_600_000,
    );
    const { wall, mono } = this.ctx;
    // Only the holder of the cache's lock reads or writes the cache: two processes on one cache would share a lease.
    const cachePath = tuning.cachePath;
    const lockOptions = {
      waitMs: cacheLockWaitMs,
      ttlMs,
      bootId: this.ctx.bootId,
      mono,
      sleep: this.sleep,
      fs: this.ctx.cacheFs,
      host: this.ctx.cacheHost,
    };
    // The cache names the cluster its lease came from: pinned now, before this call or any other sends anything (the
    // lock below may take a while), so requests sent meanwhile name it too (review of 3775fb6, F2). Read without the
    // lock, but only the cluster is taken from it; the record itself is read below, under the lock.
    if (cachePath) this.pinCacheCluster(cachePath, o.app, o.nodeId);
    const lock = cachePath ? await CacheLock.acquire(cachePath, lockOptions) : undefined;
    // The requestId of this process's last acquire for this pair whose outcome is unknown (`CacheHost.
    // unansweredAcquires`): the cluster may hold a lease under it that nobody uses, and would answer every other
    // requestId `lease_held` until it expires (finding FS-17, swarm seed 702682). Nothing used that grant (its call
    // threw before a lease was made of it), so answering this call with it shares nothing: the same as a retry inside
    // one call, whose answer starts the lease's TTL from the retry (LeaseService.acquire extends it). Read, removed
    // and claimed below with no await between: two calls never both take it.
    const unanswered = this.ctx.cacheHost.unansweredAcquires;
    const pair = JSON.stringify([this.incarnation, o.app, o.nodeId]);
    const carried = o.requestId === undefined ? unanswered.get(pair) : undefined;
    if (carried !== undefined) unanswered.delete(pair);
    const requestId =
      o.requestId ??
      (carried !== undefined && carried.ttlMs === ttlMs && carried.layout === layoutFingerprint(layout)
        ? carried.requestId
        : this.newRequestId());
    // The requestIds this process has in use (`CacheHost.requestIds`), per (incarnation, app, nodeId): by a call in
    // progress, or by a lease the cluster may still hold under it. The cluster answers the same requestId from the
    // same incarnation with the live grant, unchanged (a retry whose reply was lost), so a second lease of this
    // process under one requestId would share a worker ID and token with the first, from the first grant's floor.
    // A claim ends when the call fails without a lease, or when the cluster has confirmed the lease is gone
    // (released, stale token, not held, expired); a lease lost at its deadline keeps it for the life of the process.
    const claims: string[] = [];
    /** Claims rid for this call; false (resuming only) when a lease of this process already holds the claim. */
    const claim = (rid: string, resuming = false): boolean => {
      const key = JSON.stringify([this.incarnation, o.app, o.nodeId, rid]);
      // The cache's lock (held) rules out a live lease of this process on it, so a claim held already is an ended
      // lease's that the cluster never confirmed gone: one lost at its deadline, which may be granted to another
      // holder now. Never resumed, whatever its record says (its past deadline may not have reached the disk, and
      // a wall clock stepped back would make the old one look live: review of 47f2aac, hole A).
      if (resuming && this.ctx.cacheHost.requestIds.has(key)) return false;
      if (this.ctx.cacheHost.requestIds.has(key)) {
        throw new ClientOptionError(
          'requestId',
          `a requestId no other call or live lease of this process uses for app ${JSON.stringify(o.app)} and ` +
            `nodeId ${JSON.stringify(o.nodeId)} (the cluster would answer it with that lease's worker ID and token)`,
          rid,
        );
      }
      this.ctx.cacheHost.requestIds.add(key);
      claims.push(key);
      return true;
    };
    const unclaim = (): void => {
      for (const k of claims.splice(0)) this.ctx.cacheHost.requestIds.delete(k);
    };
    /** Set once a grant under requestId became a lease here: never carried to another call then. */
    let answered = false;
    try {
      claim(requestId);
    } catch (e) {
      lock?.release();
      throw e;
    }
    try {
      // Holding the lock, we know the process that wrote this cache is gone.
      const cached = cachePath ? readLeaseCache(cachePath, o.app, o.nodeId, this.ctx.cacheFs) : undefined;
      // A record written under another name whose directory is gone (a moved cache, or a copy whose original was
      // deleted while its writer may still run) gives only a floor: it is neither resumed nor released (round 3).
      // So is a record written against another cluster (its lease and worker ID are that cluster's); a record of no
      // pinned cluster yet pins its own, so a restarted client never takes another cluster's answers (FS-19 review).
      // A record that names no cluster (an older SDK, or a grant whose answer named none) is not known to be the
      // pinned cluster's: once a cluster is pinned it is neither resumed nor released either (review of the cluster
      // identity, finding 1: a pinned client resumed, or released at its own cluster, a lease another cluster granted).
      const foreign =
        (cached?.cachePath !== undefined && cachePath !== undefined
          ? !this.checkWrittenHere(cached.cachePath, cachePath)
          : false) ||
        (cached?.cluster !== undefined && !this.adoptCacheCluster(cached.cluster, cachePath as string));
      /** Whether the cached lease is known to be the pinned cluster's (checked again when used: a pin may come later). */
      const cachedHere = (): boolean =>
        cached !== undefined &&
        (cached.cluster === undefined
          ? this.transport.cluster.value === undefined
          : cached.cluster === this.transport.cluster.value);
      const path = `/v1/apps/${encodeURIComponent(o.app)}/workers/acquire`;
      const started = mono();
      // Once a release of the cached lease was sent it may have freed the worker ID: never resume that lease then.
      let releasedCached = foreign;
      for (;;) {
        try {
          const r = await this.transport.post<unknown>(
            path,
            {
              nodeId: o.nodeId,
              ttlMs,
              requestId,
              incarnation: this.incarnation,
              boundMs: Math.ceil(wall.now() + tuning.boundWindowMs),
              layout: layoutFingerprint(layout),
              ...(o.healthUrl === undefined ? {} : { healthUrl: o.healthUrl }),
            },
            { budgetMs: Math.max(0, acquireTimeoutMs - (mono() - started)) },
          );
          const grant = vouch(this.transport, r.endpoint, () =>
            checkGrant(path, r.body, {
              app: o.app,
              nodeId: o.nodeId,
              requestId,
              incarnation: this.incarnation,
              ttlMs,
              layout: layoutFingerprint(layout),
            }),
          );
          // The same worker ID as the cache: the previous process may have used timestamps up to usedUpToMs.
          const sameWorker = cached !== undefined && cached.workerId === grant.workerId;
          const floorMs = Math.max(grant.highWaterMs, sameWorker ? cached.usedUpToMs : 0);
          answered = true;
          const lease = this.track(
            new WorkerLease(this.ctx, { ...tuning, requestId, lock }, grant, {
              sentAtMono: r.sentAtMono,
              sentAtWall: r.sentAtWall,
              floorMs,
            }),
            claims.splice(0),
          );
          const misfit = layoutMisfit(layout, grant);
          if (misfit !== undefined) {
            // Found at the first acquire rather than by the holder that first gets a worker ID the layout cannot
            // encode (review finding C2). Not a lease this instance can use: hand it back.
            await lease.release().catch(() => {});
            throw new ClientOptionError('layout', misfit, layout.name);
          }
          // Headroom below half the window (the mark was ahead of our clock): promise a new bound before returning.
          if (lease.boundMs - (wall.now() + lease.leadMs) < tuning.boundWindowMs / 2) await lease.renewNow();
          return lease;
        } catch (e) {
          const left = acquireTimeoutMs - (mono() - started);
          // Our requestId's lease expired on the leader just as a retry of it applied: no lease under it is live now,
          // so the next attempt gets a fresh grant (a new TTL from its own proposal).
          // A short pause, as for lease_held: the expiry may still be on its way to the log (review of FS-13).
          if (e instanceof FloeRequestError && e.serverCode === 'lease_expired' && left > 0) {
            await this.sleep(Math.min(50 + 100 * this.random(), left));
            continue;
          }
          if (e instanceof FloeRequestError && e.serverCode === 'lease_held' && left > 0) {
            if (cached !== undefined && !releasedCached && cachedHere()) {
              // Most likely our dead predecessor's lease: end it with its token, then acquire a fresh one.
              releasedCached = true;
              await this.releaseCached(cached, cachePath as string, left);
              continue;
            }
            await this.sleep(Math.min(250, left)); // a lease this process cannot end: it expires within one TTL
            continue;
          }
          if (
            e instanceof FloeUnavailableError &&
            cached !== undefined &&
            !releasedCached &&
            cachedHere() &&
            (cached.requestId === requestId || claim(cached.requestId, true))
          ) {
            const resumed = this.resume(
              cached,
              { ...tuning, requestId: cached.requestId, lock },
              cacheWallMarginMs,
            );
            if (resumed) {
              this.track(resumed, claims.splice(0));
              return resumed;
            }
          }
          throw e;
        }
      }
    } catch (e) {
      unclaim();
      lock?.release();
      if (o.requestId === undefined && !answered && outcomeUnknown(e))
        unanswered.set(pair, { requestId, ttlMs, layout: layoutFingerprint(layout) });
      throw e;
    }
  }

  /** Releases every lease this client holds (graceful shutdown). */
  async close(): Promise<void> {
    await Promise.allSettled([...this.leases].map((l) => l.release()));
  }

  /**
   * Pins the cluster a lease cache was written against, if nothing is pinned yet, as `leaseWorker` starts: before this
   * call or any other sends anything (review of 3775fb6, F2). Read without the lock; only the cluster is taken.
   */
  private pinCacheCluster(cachePath: string, app: string, nodeId: string): void {
    const recorded = readLeaseCache(cachePath, app, nodeId, this.ctx.cacheFs)?.cluster;
    if (recorded !== undefined) this.adoptCacheCluster(recorded, cachePath);
  }

  /**
   * Whether the pinned cluster is the one a cache names (pinning it if none is). A cache of another cluster than one
   * this client only learned (from an answer or another cache) is refused: one of the two is the wrong cluster, and
   * nothing tells which (review of 3775fb6, F2: a first answer from a wrong endpoint pinned it, and the cached app was
   * then leased there). Checked again under the lock, since the cache may be written meanwhile (its review, F2a).
   * `clusterUid` given by the operator overrides the cache (a cache from before a migration): false. A value that is
   * no UUID proves nothing: false, a floor only.
   */
  private adoptCacheCluster(recorded: string, cachePath: string): boolean {
    const pin = this.transport.cluster;
    if (!isClusterUid(recorded)) return false;
    if (pin.adopt(recorded)) return true;
    if (pin.configured) return false;
    throw new ClientOptionError(
      'clusterUid',
      `the cluster the lease cache ${cachePath} was written against (${recorded}); this client pinned ` +
        `${pin.value} from an earlier answer or cache, so one of its endpoints reaches another cluster: set clusterUid`,
      pin.value,
    );
  }

  /**
   * A cache record names the (canonical) path its writer locked. Found under another name that still exists, it is a
   * hard link or a copy of another cache, which another process may use under that name's lock: two processes would
   * then resume, release or use one lease (review findings R2, F1). Refused. A name whose directory is gone may be a
   * cache that was moved, or a copy whose original directory was deleted while its writer still runs: false, and the
   * record then serves only as a floor (never resumed, never released).
   */
  private checkWrittenHere(recorded: string, cachePath: string): boolean {
    const fs = this.ctx.cacheFs;
    const writer = fs.canonical(recorded);
    if (writer === cachePath) return true;
    if (!fs.exists(dirname(writer))) return false;
    throw new ClientOptionError(
      'cachePath',
      `a cache file of its own: ${cachePath} holds a lease record written by a process that used ${writer} ` +
        `(a hard link or a copy of that cache). Two names for one lease would let two processes use it; give each ` +
        `process its own cache file (delete ${cachePath} to start this one afresh)`,
      cachePath,
    );
  }

  /** Tracks a lease until it ends; its requestId claims end when the cluster has confirmed it no longer holds it. */
  private track(lease: WorkerLease, claims: string[]): WorkerLease {
    this.leases.add(lease);
    this.metrics?.trackLease(lease, this.ctx.mono);
    const unclaim = () => {
      for (const k of claims) this.ctx.cacheHost.requestIds.delete(k);
    };
    lease.once('released', () => {
      this.leases.delete(lease);
      unclaim();
    });
    lease.once('lost', () => {
      this.leases.delete(lease);
      const why = lease.endedBecause;
      if (why === 'stale_token' || why === 'not_held' || why === 'lease_expired') unclaim();
    });
    return lease;
  }

  /**
   * Releases the cached lease with its token, reporting its cached use as the last timestamp (the next grant starts
   * above it). Any failure is left to the acquire loop: a lease still held then simply expires.
   */
  private async releaseCached(c: LeaseCacheRecord, cachePath: string, budgetMs: number): Promise<void> {
    const path = `/v1/apps/${encodeURIComponent(c.app)}/workers/${c.workerId}/release`;
    // Durably before the release is sent: it may take effect with its answer lost, and the lease must never be
    // resumed from this cache afterwards, by this call or a later one (review finding F2). A failed write sends no
    // release: the lease then expires.
    try {
      writeLeaseCache(cachePath, { ...c, released: true }, this.ctx.cacheFs, this.ctx.cacheHost);
    } catch (e) {
      throw releaseMarkFailed(cachePath, c.workerId, e);
    }
    try {
      const r = await this.transport.post<unknown>(
        path,
        { token: c.token, lastTimestampMs: c.usedUpToMs },
        { budgetMs },
      );
      vouch(this.transport, r.endpoint, () =>
        checkReply(path, r.body, 'release', { app: c.app, workerId: c.workerId }),
      );
    } catch {
      // not_held / stale_token: it had ended already; other errors: wait for the expiry.
    }
  }

  /**
   * A lease from the cache alone, if its safe deadline has not passed (else undefined). The cached monotonic
   * deadline is trusted only when both processes used the machine's clock (the built-in CLOCK_MONOTONIC, or one declared
   * `monotonicIsSystemWide`) on the same boot; the cached
   * wall-clock deadline is always enforced too, and alone (less `cacheWallMarginMs`) otherwise.
   */
  private resume(
    c: LeaseCacheRecord,
    tuning: LeaseTuning,
    cacheWallMarginMs: number,
  ): WorkerLease | undefined {
    const { mono, wall, bootId, systemMonotonic } = this.ctx;
    const trustMono =
      (bugOn('cached-mono-deadline') || (systemMonotonic && c.systemMonotonic === true)) &&
      bootId !== undefined &&
      c.bootId === bootId;
    const deadlineWall = trustMono ? c.deadlineWallMs : c.deadlineWallMs - cacheWallMarginMs;
    const deadlineMono = trustMono ? c.deadlineMono : mono() + (deadlineWall - wall.now());
    if (!(deadlineMono > mono()) || !(deadlineWall > wall.now())) return undefined;
    // A release of it was sent (and may have taken effect): never again.
    if (c.released === true) return undefined;
    // Only for the layout it was used with (a cache without one predates layout pins: not resumed).
    if (c.layout !== layoutFingerprint(tuning.layout)) return undefined;
    const grant: GrantInfo = { ...c, app: c.app, boundMs: c.boundMs };
    const back = c.ttlMs - tuning.safetyMarginMs;
    return new WorkerLease(this.ctx, tuning, grant, {
      sentAtMono: deadlineMono - back,
      sentAtWall: deadlineWall - back,
      deadlineMono,
      deadlineWall,
      floorMs: c.usedUpToMs,
      usedUpToMs: c.usedUpToMs,
      resumed: true,
    });
  }
}

/**
 * Whether an acquire that threw `e` may have been granted: no answer came (`FloeUnavailableError`), or the answer was
 * another request's (a mismatch in the fields that name the request). A reply that names this request but fails a
 * later check is a node's fault, not a lost answer: resending that requestId would only renew an unusable lease.
 */
function outcomeUnknown(e: unknown): boolean {
  if (e instanceof FloeUnavailableError) return true;
  return e instanceof ReplyMismatchError && REQUEST_FIELDS.includes(e.field);
}

/** The acquire reply as a grant, if it answers this request; else ReplyMismatchError (never a lease). */
function checkGrant(
  path: string,
  body: unknown,
  want: {
    app: string;
    nodeId: string;
    requestId: string;
    incarnation: string;
    ttlMs: number;
    layout: string;
  },
): GrantInfo {
  const b = checkReply(path, body, 'acquire', want);
  return {
    app: want.app,
    workerId: num(path, b, 'workerId', true),
    datacenterId: num(path, b, 'datacenterId', true),
    localWorkerId: num(path, b, 'localWorkerId', true),
    datacenterBits: num(path, b, 'datacenterBits', true),
    workerBits: num(path, b, 'workerBits', true),
    token: num(path, b, 'token', true, 1),
    ttlMs: want.ttlMs,
    highWaterMs: num(path, b, 'highWaterMs'),
    boundMs: num(path, b, 'boundMs'),
  };
}

/** Why `layout` cannot encode every worker ID of the granting pool, or undefined when it can. */
function layoutMisfit(layout: Layout, g: GrantInfo): string | undefined {
  const split = layout.datacenterBits > 0;
  const fits = split
    ? layout.datacenterBits >= g.datacenterBits && layout.workerBits >= g.workerBits
    : layout.workerBits >= g.datacenterBits + g.workerBits;
  if (fits) return undefined;
  const pool = `${g.datacenterBits + g.workerBits} bits (${g.datacenterBits} datacenter bits)`;
  return (
    `a layout with room for every worker ID of app ${g.app}'s pool, ${pool}; ${layout.name} has ` +
    `${layout.datacenterBits} datacenter and ${layout.workerBits} worker bits: shrink the pool ` +
    `(PUT /v1/apps/${g.app}/pool) or choose a layout with more worker bits`
  );
}

function inRange(field: string, v: number, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) {
    throw new ClientOptionError(field, `a number in [${min}, ${max}]`, v);
  }
  return v;
}

/**
 * A supplied clock declared the machine's (`monotonicIsSystemWide`) makes cached deadlines trusted across processes,
 * so a wrong declaration lets a resumed lease outlive its grant. It needs an explicit `bootId` (the boot its readings
 * belong to); on this machine's own boot it must read as CLOCK_MONOTONIC does (within a second), which refuses
 * `performance.now`, `Date.now` and CLOCK_BOOTTIME.
 */
function checkSystemWideClock(mono: MonotonicClock, bootId: string | undefined): void {
  if (bootId === undefined) {
    throw new ClientOptionError(
      'monotonicIsSystemWide',
      'a supplied monotonic clock declared system-wide together with the bootId its readings belong to',
      true,
    );
  }
  if (bootId !== readBootId()) return;
  const gapMs = Math.abs(mono() - hrtimeMonotonic());
  if (gapMs > 1000) {
    throw new ClientOptionError(
      'monotonicIsSystemWide',
      `a clock that reads as this machine's CLOCK_MONOTONIC (process.hrtime); the supplied one is ${Math.round(gapMs)} ms away from it`,
      true,
    );
  }
}
