import { randomUUID } from 'node:crypto';
import { Etcd3, type IKeyValue, type IRangeResponse, type ITxnResponse, type Lease } from 'etcd3';
import type { Layout } from '../../id/index.js';
import { checkHealthUrl, HealthProber, type HealthProberOptions } from '../../lease/health-prober.js';
import { checkRenewRequest, type LeaseClock } from '../../lease/lease-service.js';
import { type WhoisAnswer, whois } from '../../lease/whois.js';
import { type LeaderHint, NotLeaderError, ProposalOutcomeUnknownError } from '../../node/errors.js';
import { checkApp, checkInt, encodeLeaseCommand, leaseError } from '../../state/leases/codec.js';
import type { LeaseStateMachine } from '../../state/leases/lease-state-machine.js';
import {
  type AcquireOk,
  type ConfigurePoolOk,
  type LeaseCommand,
  type LeaseError,
  type LeaseResult,
  MAX_TTL_MS,
  MIN_TTL_MS,
  type PoolInfo,
  type ReleaseOk,
} from '../../state/leases/types.js';
import { StoreUnavailableError } from '../errors.js';
import type {
  AcquireRequest,
  LeaseListing,
  LeaseStore,
  ReleaseRequest,
  RenewRequest,
  ServiceRenewOk,
  StoreRouting,
  WorkerRecordReply,
} from '../lease-store.js';
import { type EtcdSecurity, etcd3SecurityOptions } from './etcd-security.js';
import {
  changesOf,
  EtcdKeys,
  type LoadedApp,
  machineOf,
  type PoolMeta,
  parseMeta,
  parseRecord,
  type StoredRecord,
} from './records.js';

/** A transaction was sent to etcd but its answer was lost: it may or may not have been applied. */
export class EtcdOutcomeUnknownError extends ProposalOutcomeUnknownError {
  constructor(endpoints: readonly string[], cause: unknown) {
    super(
      'timeout',
      `etcd at ${endpoints.join(',')} did not answer a write (${cause instanceof Error ? cause.message : String(cause)})`,
    );
    this.name = 'ProposalOutcomeUnknownError';
  }
}

export interface EtcdLeaseStoreOptions {
  endpoints: string[];
  /** Key prefix of this installation (default `/floe`). */
  prefix?: string;
  /** This node as other nodes redirect to it. */
  self: { id: number; httpAddr?: string; respAddr?: string };
  /** TTL of this node's etcd lease in seconds (default 6, at least 2): how long a dead active node blocks failover. */
  sessionTtlS?: number;
  /** Deadline of every etcd call (default 2,000 ms). */
  callTimeoutMs?: number;
  /** How often a standby tries to become active, and the expiry scan period (default 250 ms). */
  campaignIntervalMs?: number;
  /** TTL when an acquire names none (default 10,000 ms). */
  defaultTtlMs?: number;
  clock?: LeaseClock;
  newRequestId?: () => string;
  onError?: (what: string, err: unknown) => void;
  onInfo?: (what: string) => void;
  /** TLS and authentication towards etcd (`--etcd-ca/-cert/-key/-user/-password`); none: plain http, no user. */
  security?: EtcdSecurity;
  /** Holder health probes (src/lease/health-prober.ts), run by the active node as the built-in leader runs them. */
  health?: Omit<HealthProberOptions, 'timers' | 'isLive'>;
}

interface Tracked {
  app: string;
  workerId: number;
  token: number;
  ttlMs: number;
  /** Monotonic ms after which the lease is expired by this active node. */
  deadline: number;
  expiring: boolean;
}

const systemClock: LeaseClock = { monotonicMs: () => performance.now(), wallMs: () => Date.now() };
/** Attempts of one compare-and-swap before the store gives up (only other writers make one fail). */
const MAX_CAS_ATTEMPTS = 32;

/**
 * Worker-ID leases kept in etcd (issue 14, docs/etcd-store.md, decision 0005).
 *
 * - Decisions: every command is applied to a LeaseStateMachine restored from the records this node
 *   loaded from etcd (the same code the built-in store's replicas run), and the records it changed are
 *   written back in one transaction guarded by the mod revision of every key written and of the app's
 *   pool key, and by this node's election key. A failed guard re-reads and decides again; nothing is
 *   ever a blind put.
 * - High availability: every node keeps an etcd lease alive and campaigns by creating `<prefix>/active`
 *   bound to it (create-if-absent). Only the node whose key that is serves lease calls; others throw
 *   NotLeaderError naming it (RESP MOVED, HTTP 307). A node stops serving at
 *   `last successful keep-alive's send time + TTL - margin`, which comes before etcd can expire its lease.
 * - Expiry: on the active node's monotonic clock, as the built-in store does: a new active node gives
 *   every live lease a full TTL from its election before expiring any.
 */
export class EtcdLeaseStore implements LeaseStore {
  readonly kind = 'etcd' as const;
  readonly client: Etcd3;
  readonly keys: EtcdKeys;
  readonly endpoints: string[];
  private readonly sessionTtlMs: number;
  private readonly callTimeoutMs: number;
  private readonly intervalMs: number;
  private readonly defaultTtlMs: number;
  private readonly clock: LeaseClock;
  private readonly newRequestId: () => string;
  private readonly onError: (what: string, err: unknown) => void;
  private readonly onInfo: (what: string) => void;
  private readonly selfValue: string;

  private session: Lease | undefined;
  private sessionId: string | undefined;
  /** Monotonic send time of the last keep-alive (or grant) etcd acknowledged. */
  private lastKeepaliveOk = Number.NEGATIVE_INFINITY;
  private lastKeepaliveSent = Number.NEGATIVE_INFINITY;
  /** Create revision of our `active` key while we hold it. */
  private activeRev: string | undefined;
  private seeded = false;
  private activeHint: LeaderHint | undefined;
  private readonly tracked = new Map<string, Tracked>();
  private readonly listeners = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;
  private closed = false;
  private epoch = 0;
  private lastErrorReport = Number.NEGATIVE_INFINITY;
  /** Whole-pool commands of one app run one at a time here: they would only lose each other's compares. */
  /**
   * The active node's probes of holders' health URLs (docs/leases.md, "Holder health"): the same prober and rules as
   * the built-in leader's. Its judgement is this node's own: a newly active node starts with every holder healthy
   * and learns the URLs from renewals. It never expires anything: a sick holder's renewals are refused
   * (`lease_unhealthy`) and its lease expires at its deadline, as a crashed holder's does.
   */
  readonly health: HealthProber;
  private readonly poolQueues = new Map<string, Promise<unknown>>();
  /** The last session/election failure while etcd cannot be reached; undefined once a step succeeds. */
  private etcdDown: unknown;

  readonly stats = {
    elections: 0,
    depositions: 0,
    casRetries: 0,
    expired: 0,
    localRenewals: 0,
    loggedRenewals: 0,
  };

  readonly routing: StoreRouting = {
    isActive: () => this.isActive(),
    active: () => (this.isActive() ? this.selfHint() : this.activeHint),
    onChange: (cb) => {
      this.listeners.add(cb);
      return () => this.listeners.delete(cb);
    },
  };

  constructor(private readonly opts: EtcdLeaseStoreOptions) {
    if (opts.endpoints.length === 0) throw new RangeError('the etcd store needs at least one endpoint');
    for (const e of opts.endpoints) {
      let u: URL;
      try {
        u = new URL(e);
      } catch {
        throw new RangeError(`etcd endpoint ${JSON.stringify(e)} is not a URL such as http://127.0.0.1:2379`);
      }
      if (u.protocol !== 'http:' && u.protocol !== 'https:')
        throw new RangeError(`etcd endpoint ${JSON.stringify(e)} must be http:// or https://`);
    }
    this.endpoints = opts.endpoints;
    this.keys = new EtcdKeys(opts.prefix ?? '/floe');
    const ttlS = opts.sessionTtlS ?? 6;
    if (!Number.isInteger(ttlS) || ttlS < 2 || ttlS > 3600)
      throw new RangeError(`etcd session TTL must be an integer number of seconds in 2..3600, got ${ttlS}`);
    this.sessionTtlMs = ttlS * 1000;
    this.callTimeoutMs = opts.callTimeoutMs ?? 2000;
    this.intervalMs = opts.campaignIntervalMs ?? 250;
    this.defaultTtlMs = opts.defaultTtlMs ?? 10_000;
    this.clock = opts.clock ?? systemClock;
    this.newRequestId = opts.newRequestId ?? randomUUID;
    this.onError = opts.onError ?? (() => {});
    this.onInfo = opts.onInfo ?? (() => {});
    this.health = new HealthProber({
      ...opts.health,
      timers: {
        setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
        clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
      },
      isLive: (app, workerId, token) => this.find(app, workerId)?.token === token,
    });
    this.selfValue = JSON.stringify({
      id: opts.self.id,
      httpAddr: opts.self.httpAddr,
      respAddr: opts.self.respAddr,
    });
    // Without call deadlines a call hangs while etcd has no leader: every call gets one.
    this.client = new Etcd3({
      hosts: opts.endpoints,
      ...etcd3SecurityOptions(opts.security),
      dialTimeout: this.callTimeoutMs,
      defaultCallOptions: () => ({ deadline: Date.now() + this.callTimeoutMs }),
    });
  }

  /**
   * Starts keeping the session alive and campaigning. Never waits for etcd: while it cannot be reached,
   * lease calls are answered with StoreUnavailableError / NotLeaderError and failures are reported
   * through `onError` (at most every 5 s).
   */
  start(): void {
    this.timer = setInterval(() => void this.tick(), this.intervalMs);
    this.timer.unref();
    void this.tick();
  }

  /** Resolves once this node is active (tests, the benchmark). */
  async whenActive(timeoutMs = 30_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (!this.isActive()) {
      if (this.closed || Date.now() > until) throw new Error('not active in time');
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    // Hand over at once: revoking the session deletes our `active` key. Taken before depose(), which forgets the
    // session (its own revoke is not awaited, and closing the client would cancel it).
    const session = this.session;
    this.depose('closing');
    this.health.stop();
    await session
      ?.revoke()
      .catch((err: unknown) => this.onError('etcd store: revoking the session at close failed', err));
    this.client.close();
  }

  // ---- session and election ----------------------------------------------------------------

  private isActive(): boolean {
    return this.activeRev !== undefined && this.seeded && this.clock.monotonicMs() < this.servingUntil();
  }

  /**
   * The last moment this node may act as active: the send time of its last acknowledged keep-alive
   * plus the TTL, less a margin for clock-rate differences (etcd counts the TTL from when it received
   * that keep-alive, which is later).
   */
  private servingUntil(): number {
    return this.lastKeepaliveOk + this.sessionTtlMs - Math.max(1000, this.sessionTtlMs / 5);
  }

  private selfHint(): LeaderHint {
    return { id: this.opts.self.id, httpAddr: this.opts.self.httpAddr, respAddr: this.opts.self.respAddr };
  }

  private notify(): void {
    for (const l of this.listeners) {
      try {
        l();
      } catch {}
    }
  }

  private depose(why: string): void {
    if (this.activeRev === undefined) return;
    this.activeRev = undefined;
    this.activeHint = undefined;
    this.seeded = false;
    this.tracked.clear();
    this.health.stop();
    this.epoch++;
    this.stats.depositions++;
    this.onInfo(`no longer the active Floe node on etcd: ${why}`);
    // A new session: the old one may still be alive in etcd, but this node no longer trusts it.
    const old = this.session;
    this.session = undefined;
    this.sessionId = undefined;
    this.lastKeepaliveOk = Number.NEGATIVE_INFINITY;
    void old?.revoke().catch(() => {});
    this.notify();
  }

  private async tick(): Promise<void> {
    if (this.ticking || this.closed) return;
    this.ticking = true;
    try {
      if (this.activeRev !== undefined && this.clock.monotonicMs() >= this.servingUntil())
        this.depose('keep-alive not acknowledged in time (etcd lease may expire)');
      await this.keepAlive();
      if (this.activeRev === undefined) await this.campaign();
      else if (!this.seeded)
        await this.seed(this.epoch); // the load after the election failed: again
      else await this.expireDue();
      this.etcdDown = undefined;
    } catch (err) {
      this.etcdDown = err;
      if (this.activeRev === undefined && this.activeHint !== undefined) {
        // What etcd said last may be stale now: redirect nobody to it.
        this.activeHint = undefined;
        this.notify();
      }
      const now = this.clock.monotonicMs();
      if (!this.closed && now - this.lastErrorReport >= 5000) {
        this.lastErrorReport = now;
        this.onError(`etcd store: cannot reach etcd at ${this.endpoints.join(',')} (session/election)`, err);
      }
    } finally {
      this.ticking = false;
    }
  }

  private async keepAlive(): Promise<void> {
    const now = this.clock.monotonicMs();
    if (!this.session) {
      const lease = this.client.lease(this.sessionTtlMs / 1000, { autoKeepAlive: false });
      lease.on('lost', () => {});
      this.session = lease;
      this.lastKeepaliveSent = now;
      this.sessionId = await withTimeout(lease.grant(), this.callTimeoutMs, 'etcd lease grant');
      this.lastKeepaliveOk = now;
      return;
    }
    if (now - this.lastKeepaliveSent < this.sessionTtlMs / 6) return;
    this.lastKeepaliveSent = now;
    const session = this.session;
    try {
      await withTimeout(session.keepaliveOnce(), this.callTimeoutMs, 'etcd lease keep-alive');
      if (session === this.session) this.lastKeepaliveOk = now;
    } catch (err) {
      if (session !== this.session) return;
      if ((err as Error).name === 'EtcdLeaseInvalidError') {
        this.depose('etcd lease expired');
        this.session = undefined;
      }
      throw err;
    }
  }

  private async campaign(): Promise<void> {
    if (!this.sessionId || this.clock.monotonicMs() >= this.servingUntil()) return;
    const epoch = this.epoch;
    const res = await this.client
      .if(this.keys.active, 'Create', '==', 0)
      .then(this.client.put(this.keys.active).value(this.selfValue).lease(this.sessionId))
      .else(this.client.get(this.keys.active))
      .commit();
    if (epoch !== this.epoch || this.closed) return;
    if (!res.succeeded) {
      const kv = rangeOf(res, 0)?.kvs[0];
      const hint = kv ? hintOf(kv.value.toString()) : undefined;
      if (JSON.stringify(hint) !== JSON.stringify(this.activeHint)) {
        this.activeHint = hint;
        this.notify();
      }
      return;
    }
    this.activeRev = String(res.header.revision);
    this.activeHint = this.selfHint();
    this.stats.elections++;
    this.onInfo(`elected the active Floe node on etcd (revision ${this.activeRev})`);
    await this.seed(epoch);
  }

  /** Every live lease gets a full TTL from now (after this node's election) before any is expired. */
  private async seed(epoch: number): Promise<void> {
    const res = await this.client.getAll().prefix(this.keys.apps).exec();
    if (epoch !== this.epoch) return;
    const now = this.clock.monotonicMs();
    this.tracked.clear();
    for (const kv of res.kvs) {
      const key = kv.key.toString();
      const p = this.keys.parse(key);
      if (p?.workerId === undefined) continue;
      const r = parseRecord(kv.value.toString(), key);
      if (r.live) this.track(p.app, r.workerId, r.token, r.ttlMs, now + r.ttlMs);
    }
    this.seeded = true;
    // A new active node's judgement of health starts afresh (every holder healthy), as a new Raft leader's does.
    this.health.stop();
    this.health.start();
    this.notify();
  }

  // ---- deadlines ---------------------------------------------------------------------------

  private track(app: string, workerId: number, token: number, ttlMs: number, deadline: number): Tracked {
    const t: Tracked = { app, workerId, token, ttlMs, deadline, expiring: false };
    this.tracked.set(`${app}\u0000${workerId}`, t);
    return t;
  }

  private find(app: string, workerId: number): Tracked | undefined {
    return this.tracked.get(`${app}\u0000${workerId}`);
  }

  private untrack(app: string, workerId: number, token: number): void {
    const t = this.find(app, workerId);
    if (t && t.token === token) this.tracked.delete(`${app}\u0000${workerId}`);
  }

  private extend(t: Tracked): void {
    const d = this.clock.monotonicMs() + t.ttlMs;
    if (d > t.deadline) t.deadline = d;
  }

  private async expireDue(): Promise<void> {
    const now = this.clock.monotonicMs();
    const due = [...this.tracked.values()].filter((t) => t.deadline <= now);
    for (const t of due) {
      if (!this.isActive()) return;
      t.expiring = true;
      try {
        const r = await this.run(t.app, 'one', t.workerId, () => ({
          op: 'expire',
          items: [[t.app, t.workerId, t.token]],
        }));
        if (r.ok && r.op === 'expire' && r.expired > 0) this.stats.expired++;
        this.untrack(t.app, t.workerId, t.token);
      } catch (err) {
        // Tried again on the next scan: the lease stays refused (`expiring`) meanwhile.
        this.onError(`etcd store: expiring worker ID ${t.workerId} of app ${t.app} failed; retrying`, err);
        return;
      }
    }
  }

  // ---- reads and the compare-and-swap loop -------------------------------------------------

  private requireActive(): void {
    if (!this.isActive()) throw this.notActiveError();
  }

  /** Why this node may not serve now (never a guess: while etcd cannot be reached, the caller is told so). */
  notActiveError(): Error {
    if (this.etcdDown !== undefined)
      return new StoreUnavailableError(this.endpoints, 'finding the active Floe node', this.etcdDown);
    return new NotLeaderError(this.opts.self.id, this.activeHint);
  }

  /**
   * The create revision of this node's `active` key while it is active (the etcd store's "term": every
   * election gives a larger one); undefined otherwise. State kept beside the leases guards its writes with it.
   */
  activeRevision(): string | undefined {
    return this.isActive() ? this.activeRev : undefined;
  }

  /** Called when etcd shows that this node no longer holds the `active` key (a failed guard). */
  lostActive(res: ITxnResponse): void {
    this.deposed(res);
  }

  /** Runs an etcd call; a failure becomes StoreUnavailableError (nothing was written). */
  private async guard<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof NotLeaderError) throw err;
      throw new StoreUnavailableError(this.endpoints, what, err);
    }
  }

  /**
   * Loads an app (all of it, or its pool and one worker ID) at one revision, in a transaction that
   * also proves this node still holds the `active` key.
   */
  private async load(
    app: string,
    scope: 'all' | 'one',
    workerId = 0,
  ): Promise<{ loaded: LoadedApp; rev: number }> {
    const rev = this.activeRev;
    if (rev === undefined) throw new NotLeaderError(this.opts.self.id, this.activeHint);
    const reads =
      scope === 'all'
        ? [this.client.getAll().prefix(this.keys.app(app))]
        : [this.client.get(this.keys.meta(app)), this.client.get(this.keys.worker(app, workerId))];
    const res = await this.guard(`reading app ${app}`, () =>
      this.client
        .if(this.keys.active, 'Create', '==', rev)
        .then(...reads)
        .else(this.client.get(this.keys.active))
        .commit(),
    );
    if (!res.succeeded) {
      this.deposed(res);
      throw new NotLeaderError(this.opts.self.id, this.activeHint);
    }
    const loaded: LoadedApp = { app, meta: undefined, metaMod: '0', seqMod: '0', records: new Map() };
    for (let i = 0; i < reads.length; i++) {
      for (const kv of rangeOf(res, i)?.kvs ?? []) this.absorb(loaded, kv);
    }
    return { loaded, rev: Number(res.header.revision) };
  }

  private absorb(loaded: LoadedApp, kv: IKeyValue): void {
    const key = kv.key.toString();
    const p = this.keys.parse(key);
    if (!p || p.app !== loaded.app) return;
    if (p.kind === 'seq') loaded.seqMod = kv.mod_revision;
    else if (p.workerId === undefined) {
      loaded.meta = { value: parseMeta(kv.value.toString(), key), mod: kv.mod_revision };
      loaded.metaMod = kv.mod_revision;
    } else {
      loaded.records.set(p.workerId, { value: parseRecord(kv.value.toString(), key), mod: kv.mod_revision });
    }
  }

  private deposed(res: ITxnResponse): void {
    const kv = rangeOf(res, 0)?.kvs[0];
    this.activeHint = kv ? hintOf(kv.value.toString()) : undefined;
    this.depose('another node holds the active key (or it expired)');
  }

  /**
   * Decides `cmd` with the lease state machine over the app as loaded, writes what changed in one
   * guarded transaction, and retries on a lost compare. `write: false` answers without writing
   * (renewals that raise nothing, as the built-in store answers them without a log entry).
   */
  private async run(
    app: string,
    scope: 'all' | 'one',
    workerId: number,
    command: () => LeaseCommand,
    opts: { write?: (r: LeaseResult, loaded: LoadedApp) => boolean } = {},
  ): Promise<LeaseResult> {
    const cmd = command();
    if (cmd.op !== 'acquire' && cmd.op !== 'configurePool') return this.cas(app, scope, workerId, cmd, opts);
    const prev = this.poolQueues.get(app) ?? Promise.resolve();
    const mine = prev.then(
      () => this.cas(app, scope, workerId, cmd, opts),
      () => this.cas(app, scope, workerId, cmd, opts),
    );
    this.poolQueues.set(app, mine);
    try {
      return await mine;
    } finally {
      if (this.poolQueues.get(app) === mine) this.poolQueues.delete(app);
    }
  }

  private async cas(
    app: string,
    scope: 'all' | 'one',
    workerId: number,
    cmd: LeaseCommand,
    opts: { write?: (r: LeaseResult, loaded: LoadedApp) => boolean },
  ): Promise<LeaseResult> {
    for (let attempt = 1; attempt <= MAX_CAS_ATTEMPTS; attempt++) {
      const { loaded, rev } = await this.load(app, scope, workerId);
      // The revision this decision is made at, plus one: greater than any token or free mark in etcd (and
      // than any token imported from the built-in store, whose tokens are its log indexes).
      let index = rev + 1;
      for (const { value } of loaded.records.values()) if (value.token >= index) index = value.token + 1;
      const sm = machineOf([loaded], rev);
      const r = sm.apply(encodeLeaseCommand(cmd), { index, term: 0, leaderTimeMs: this.clock.wallMs() });
      if (!r.ok || (opts.write && !opts.write(r, loaded))) return r;
      const ch = changesOf(sm, loaded);
      // Acquires and pool changes read the whole pool: they serialise on the app's seq key.
      const wholePool = cmd.op === 'acquire' || cmd.op === 'configurePool';
      if (!wholePool && ch.meta === undefined && ch.records.length === 0) return r;
      const activeRev = this.activeRev;
      if (activeRev === undefined) throw new NotLeaderError(this.opts.self.id, this.activeHint);
      let txn = this.client
        .if(this.keys.active, 'Create', '==', activeRev)
        .and(this.keys.meta(app), 'Mod', '==', loaded.metaMod);
      const puts = [];
      if (wholePool) {
        txn = txn.and(this.keys.seq(app), 'Mod', '==', loaded.seqMod);
        puts.push(this.client.put(this.keys.seq(app)).value(String(index)));
      }
      if (ch.meta !== undefined)
        puts.push(this.client.put(this.keys.meta(app)).value(JSON.stringify(ch.meta satisfies PoolMeta)));
      for (const rec of ch.records) {
        const key = this.keys.worker(app, rec.workerId);
        txn = txn.and(key, 'Mod', '==', loaded.records.get(rec.workerId)?.mod ?? '0');
        puts.push(this.client.put(key).value(JSON.stringify(rec satisfies StoredRecord)));
      }
      let res: ITxnResponse;
      try {
        res = await txn
          .then(...puts)
          .else(this.client.get(this.keys.active))
          .commit();
      } catch (err) {
        throw new EtcdOutcomeUnknownError(this.endpoints, err);
      }
      if (res.succeeded) return r;
      const kv = rangeOf(res, 0)?.kvs[0];
      if (!kv || kv.create_revision !== activeRev) {
        this.deposed(res);
        throw new NotLeaderError(this.opts.self.id, this.activeHint);
      }
      this.stats.casRetries++;
    }
    throw new StoreUnavailableError(
      this.endpoints,
      `writing app ${app}`,
      new Error(`${MAX_CAS_ATTEMPTS} compare-and-swap attempts lost to other writers`),
    );
  }

  // ---- client operations -------------------------------------------------------------------

  async acquire(req: AcquireRequest): Promise<AcquireOk | LeaseError> {
    if (req.healthUrl !== undefined) {
      const badUrl = checkHealthUrl(req.healthUrl);
      if (badUrl) return leaseError('invalid_argument', badUrl);
    }
    this.requireActive();
    const epoch = this.epoch;
    const ttlMs = req.ttlMs ?? this.defaultTtlMs;
    const requestId = req.requestId ?? this.newRequestId();
    const bad = checkApp(req.app) ?? checkInt('ttlMs', ttlMs, MIN_TTL_MS, MAX_TTL_MS);
    if (bad) return bad;
    const r = await this.run(req.app, 'all', 0, () => ({
      op: 'acquire',
      app: req.app,
      nodeId: req.nodeId,
      ttlMs,
      requestId,
      ...(req.boundMs === undefined ? {} : { boundMs: req.boundMs }),
      ...(req.incarnation === undefined ? {} : { incarnation: req.incarnation }),
      ...(req.layout === undefined ? {} : { layout: req.layout }),
    }));
    if (!r.ok || r.op !== 'acquire') return r as LeaseError;
    if (epoch !== this.epoch) throw new NotLeaderError(this.opts.self.id, this.activeHint);
    const t = this.find(r.app, r.workerId);
    if (t && t.token === r.token) {
      if (t.expiring || (r.retried && this.clock.monotonicMs() >= t.deadline)) return expiredError(r);
      this.extend(t);
    } else {
      this.track(r.app, r.workerId, r.token, r.ttlMs, this.clock.monotonicMs() + r.ttlMs);
    }
    if (req.healthUrl !== undefined) this.health.register(r.app, r.workerId, r.token, req.healthUrl);
    return r;
  }

  async renew(req: RenewRequest): Promise<ServiceRenewOk | LeaseError> {
    const bad = checkRenewRequest(req);
    if (bad) return bad;
    if (req.healthUrl !== undefined) {
      const badUrl = checkHealthUrl(req.healthUrl);
      if (badUrl) return leaseError('invalid_argument', badUrl);
    }
    this.requireActive();
    const epoch = this.epoch;
    const { app, workerId, token } = req;
    // A holder whose health URL failed its probes is not renewed: it stops at its own deadline and the lease expires
    // after it, never earlier (as on the built-in store).
    const sick = this.health.unhealthy(app, workerId, token);
    if (sick) {
      this.health.stats.refusedRenewals++;
      return leaseError('lease_unhealthy', `${sick}; the lease is not renewed and expires at its deadline`);
    }
    let logged = false;
    const r = await this.run(
      app,
      'one',
      workerId,
      () => ({ op: 'renew', app, workerId, token, boundMs: req.boundMs ?? 0 }),
      {
        // Only a renewal that raises the high-water mark is written; the others are answered from this read.
        write: (_res, loaded) => {
          logged =
            req.boundMs !== undefined && req.boundMs > (loaded.records.get(workerId)?.value.highWaterMs ?? 0);
          return logged;
        },
      },
    );
    if (!r.ok || r.op !== 'renew') return r as LeaseError;
    if (epoch !== this.epoch || !this.isActive())
      throw new NotLeaderError(this.opts.self.id, this.activeHint);
    let t = this.find(app, workerId);
    if (!t || t.token !== token)
      t = this.track(app, workerId, token, r.ttlMs, this.clock.monotonicMs() + r.ttlMs);
    if (t.expiring || this.clock.monotonicMs() >= t.deadline) return expiredError({ app, workerId });
    this.extend(t);
    if (logged) this.stats.loggedRenewals++;
    else this.stats.localRenewals++;
    // Only the live token's holder (re)registers its URL: a wrong token was refused above.
    if (req.healthUrl !== undefined) this.health.register(app, workerId, token, req.healthUrl);
    return { ...r, expiresAtMs: this.clock.wallMs() + r.ttlMs, logged };
  }

  async release(req: ReleaseRequest): Promise<ReleaseOk | LeaseError> {
    this.requireActive();
    const r = await this.run(req.app, 'one', req.workerId, () => ({
      op: 'release',
      app: req.app,
      workerId: req.workerId,
      token: req.token,
      lastTimestampMs: req.lastTimestampMs ?? 0,
    }));
    if (r.ok && r.op === 'release') this.untrack(req.app, req.workerId, req.token);
    return r as ReleaseOk | LeaseError;
  }

  async configurePool(app: string, bits: number, datacenterBits = 0): Promise<ConfigurePoolOk | LeaseError> {
    this.requireActive();
    const r = await this.run(app, 'all', 0, () => ({ op: 'configurePool', app, bits, datacenterBits }));
    return r as ConfigurePoolOk | LeaseError;
  }

  private async machine(app: string): Promise<LeaseStateMachine> {
    this.requireActive();
    const { loaded, rev } = await this.load(app, 'all');
    return machineOf([loaded], rev);
  }

  async list(app: string): Promise<LeaseListing[]> {
    const sm = await this.machine(app);
    const now = this.clock.monotonicMs();
    return sm
      .leases(app)
      .map((l) => ({ ...l, remainingMs: this.remaining(l.app, l.workerId, l.token, now) }));
  }

  async get(app: string, workerId: number): Promise<WorkerRecordReply | undefined> {
    this.requireActive();
    const { loaded, rev } = await this.load(app, 'one', workerId);
    const w = machineOf([loaded], rev).worker(app, workerId);
    if (!w) return undefined;
    const remainingMs = w.live ? this.remaining(app, workerId, w.token, this.clock.monotonicMs()) : undefined;
    return { ...w, remainingMs };
  }

  async pool(app: string): Promise<PoolInfo | undefined> {
    return (await this.machine(app)).pool(app);
  }

  async whois(id: bigint, layout: Layout, app?: string): Promise<WhoisAnswer> {
    this.requireActive();
    if (app !== undefined) return whois(await this.machine(app), id, layout, app);
    const res: IRangeResponse = await this.guard('reading every app', () =>
      this.client.getAll().prefix(this.keys.apps).exec(),
    );
    const apps = new Map<string, LoadedApp>();
    for (const kv of res.kvs) {
      const p = this.keys.parse(kv.key.toString());
      if (!p) continue;
      let a = apps.get(p.app);
      if (!a)
        apps.set(p.app, (a = { app: p.app, meta: undefined, metaMod: '0', seqMod: '0', records: new Map() }));
      this.absorb(a, kv);
    }
    return whois(machineOf([...apps.values()], Number(res.header.revision)), id, layout);
  }

  private remaining(app: string, workerId: number, token: number, now: number): number | undefined {
    const t = this.find(app, workerId);
    return t && t.token === token ? Math.max(0, t.deadline - now) : undefined;
  }
}

function expiredError(l: { app: string; workerId: number }): LeaseError {
  return leaseError(
    'lease_expired',
    `the lease on worker ID ${l.workerId} of app ${l.app} passed its deadline on the active node and is being ` +
      `expired; stop using this worker ID and acquire again`,
  );
}

function rangeOf(res: ITxnResponse, i: number): IRangeResponse | undefined {
  return res.responses[i]?.response_range ?? undefined;
}

function hintOf(raw: string): LeaderHint | undefined {
  try {
    const v = JSON.parse(raw) as { id?: unknown; httpAddr?: unknown; respAddr?: unknown };
    if (typeof v.id !== 'number') return undefined;
    return {
      id: v.id,
      ...(typeof v.httpAddr === 'string' ? { httpAddr: v.httpAddr } : {}),
      ...(typeof v.respAddr === 'string' ? { respAddr: v.respAddr } : {}),
    };
  } catch {
    return undefined;
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} not answered within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
