import {
  BackendError,
  type LeasePermission,
  type LeaseReply,
  type RaftRole,
  type RespBackend,
  type RespMember,
  type WorkerAcquireRequest,
  type WorkerListRequest,
  type WorkerReleaseRequest,
  type WorkerRenewRequest,
} from './backend.js';

interface FakeLease {
  workerId: number;
  nodeId: string;
  token: number;
  expiresAtMs: number;
  highWaterMs: number;
  ttlMs: number;
  boundMs?: number;
}

interface FakeUser {
  password: string;
  /** Per app, the permissions granted; `*` matches every app. Undefined = everything. */
  grants?: Map<string, Set<LeasePermission>>;
}

export interface FakeClusterOptions {
  /** Worker IDs per app. Default 1024 (10 bits). */
  poolSize?: number;
  /** Lease TTL when WORKER.ACQUIRE has no TTL. Default 10,000 ms. */
  defaultTtlMs?: number;
  /** Clock (ms since the Unix epoch). Default `Date.now`. */
  now?: () => number;
  /**
   * Delay before each backend operation completes, in ms (a function so tests can randomise it and check that
   * replies still come back in request order). Default: complete on the next microtask.
   */
  delayMs?: () => number;
}

/**
 * An in-memory stand-in for a Floe cluster, shared by several `FakeBackend`s (one per RESP server instance):
 * one membership, one leader, one lease table. Tests flip the leader with `setLeader` and watch clients follow.
 * Lease rules are simplified but keep the ones clients can observe: a worker ID is held by at most one
 * instance, an instance gets its previous ID back when free, tokens increase on every grant, renew/release
 * need the current token, expired leases are reclaimed on the next acquire.
 */
export class FakeCluster {
  private readonly memberList = new Map<number, { id: number; respAddr?: string }>();
  private leaderId: number | undefined;
  private readonly leases = new Map<string, Map<number, FakeLease>>();
  /** Per app and worker id: the high water a new holder must start above. */
  private readonly highWater = new Map<string, Map<number, number>>();
  /** Per app and instance: its last worker id (stable IDs). */
  private readonly lastWorker = new Map<string, Map<string, number>>();
  private readonly users = new Map<string, FakeUser>();
  private readonly listeners = new Set<() => void>();
  private nextToken = 1;
  term = 1;
  appliedIndex = 0;
  authRequired = false;
  /** The cluster's UUID as its members know it (undefined: not minted yet). */
  clusterUid: string | undefined;
  readonly poolSize: number;
  readonly defaultTtlMs: number;
  readonly now: () => number;
  delayMs: (() => number) | undefined;
  /** Every backend call, in the order the backend received them (for ordering tests). */
  readonly calls: string[] = [];

  constructor(opts: FakeClusterOptions = {}) {
    this.poolSize = opts.poolSize ?? 1024;
    this.defaultTtlMs = opts.defaultTtlMs ?? 10_000;
    this.now = opts.now ?? Date.now;
    this.delayMs = opts.delayMs;
  }

  /** Add (or update) a member and its advertised RESP address. */
  setMember(id: number, respAddr?: string): void {
    this.memberList.set(id, { id, respAddr });
    this.notify();
  }

  /** Make `id` the leader (undefined = election in progress); bumps the term and notifies every backend. */
  setLeader(id: number | undefined): void {
    this.leaderId = id;
    this.term++;
    this.notify();
  }

  get leader(): number | undefined {
    return this.leaderId;
  }

  /** Enable auth and add a user. `grants`: app (or `*`) → permissions; omitted = all permissions. */
  addUser(name: string, password: string, grants?: Record<string, LeasePermission[]>): void {
    this.authRequired = true;
    this.users.set(name, {
      password,
      grants: grants ? new Map(Object.entries(grants).map(([k, v]) => [k, new Set(v)])) : undefined,
    });
  }

  backend(nodeId: number): FakeBackend {
    return new FakeBackend(this, nodeId);
  }

  members(): RespMember[] {
    return [...this.memberList.values()].map((m) => ({
      id: m.id,
      respAddr: m.respAddr,
      role: m.id === this.leaderId ? 'leader' : 'follower',
    }));
  }

  leaderInfo(): { id: number; respAddr?: string } | undefined {
    if (this.leaderId === undefined) return undefined;
    return { id: this.leaderId, respAddr: this.memberList.get(this.leaderId)?.respAddr };
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private notify(): void {
    for (const l of [...this.listeners]) l();
  }

  checkPassword(user: string, pass: string): boolean {
    return this.users.get(user)?.password === pass;
  }

  allowed(user: string | undefined, app: string, perm: LeasePermission): boolean {
    if (!this.authRequired) return true;
    const u = user === undefined ? undefined : this.users.get(user);
    if (!u) return false;
    if (!u.grants) return true;
    return (u.grants.get(app)?.has(perm) ?? false) || (u.grants.get('*')?.has(perm) ?? false);
  }

  async run<T>(label: string, f: () => T): Promise<T> {
    this.calls.push(label);
    const d = this.delayMs?.() ?? 0;
    if (d > 0) await new Promise((r) => setTimeout(r, d));
    else await Promise.resolve();
    this.appliedIndex++;
    return f();
  }

  private table(app: string): Map<number, FakeLease> {
    let t = this.leases.get(app);
    if (!t) this.leases.set(app, (t = new Map()));
    return t;
  }

  private reclaimExpired(app: string, now: number): void {
    const t = this.table(app);
    for (const [id, l] of t) {
      if (l.expiresAtMs <= now) {
        // The expired holder may have issued IDs up to its bound (or its expiry): the next holder starts above.
        this.raiseHighWater(app, id, Math.max(l.boundMs ?? 0, l.expiresAtMs));
        t.delete(id);
      }
    }
  }

  private raiseHighWater(app: string, id: number, ms: number): void {
    let m = this.highWater.get(app);
    if (!m) this.highWater.set(app, (m = new Map()));
    m.set(id, Math.max(m.get(id) ?? 0, ms));
  }

  acquire(req: WorkerAcquireRequest): LeaseReply {
    const now = this.now();
    this.reclaimExpired(req.app, now);
    const t = this.table(req.app);
    const prev = this.lastWorker.get(req.app)?.get(req.nodeId);
    let id: number | undefined;
    if (prev !== undefined && (!t.has(prev) || t.get(prev)!.nodeId === req.nodeId)) id = prev;
    for (let i = 0; id === undefined && i < this.poolSize; i++) if (!t.has(i)) id = i;
    if (id === undefined) {
      throw new BackendError(
        'ERR',
        `no free worker id in app '${req.app}' (all ${this.poolSize} are leased)`,
      );
    }
    const ttlMs = req.ttlMs ?? this.defaultTtlMs;
    const lease: FakeLease = {
      workerId: id,
      nodeId: req.nodeId,
      token: this.nextToken++,
      expiresAtMs: now + ttlMs,
      highWaterMs: this.highWater.get(req.app)?.get(id) ?? 0,
      ttlMs,
    };
    t.set(id, lease);
    let lw = this.lastWorker.get(req.app);
    if (!lw) this.lastWorker.set(req.app, (lw = new Map()));
    lw.set(req.nodeId, id);
    return this.reply(req.app, lease);
  }

  private held(app: string, workerId: number, token: number | bigint): FakeLease {
    const l = this.table(app).get(workerId);
    if (!l || BigInt(l.token) !== BigInt(token) || l.expiresAtMs <= this.now()) {
      throw new BackendError(
        'ERR',
        `worker ${workerId} of app '${app}' is not leased with token ${token} (expired, released or taken over)`,
      );
    }
    return l;
  }

  renew(req: WorkerRenewRequest): LeaseReply {
    const l = this.held(req.app, req.workerId, req.token);
    l.expiresAtMs = this.now() + l.ttlMs;
    if (req.boundMs !== undefined) l.boundMs = Math.max(l.boundMs ?? 0, req.boundMs);
    return this.reply(req.app, l);
  }

  release(req: WorkerReleaseRequest): void {
    const l = this.held(req.app, req.workerId, req.token);
    this.raiseHighWater(req.app, req.workerId, req.lastMs ?? Math.max(l.boundMs ?? 0, this.now()));
    this.table(req.app).delete(req.workerId);
  }

  list(req: WorkerListRequest): LeaseReply[] {
    const now = this.now();
    return [...this.table(req.app).values()]
      .filter((l) => l.expiresAtMs > now)
      .sort((a, b) => a.workerId - b.workerId)
      .map((l) => this.reply(req.app, l));
  }

  private reply(app: string, l: FakeLease): LeaseReply {
    return {
      app,
      workerId: l.workerId,
      datacenterId: 0,
      nodeId: l.nodeId,
      token: l.token,
      expiresAtMs: l.expiresAtMs,
      highWaterMs: l.highWaterMs,
      ttlMs: l.ttlMs,
      extra: l.boundMs !== undefined ? { bound_ms: l.boundMs } : undefined,
    };
  }
}

/** One member's view of a `FakeCluster`, implementing `RespBackend`. */
export class FakeBackend implements RespBackend {
  constructor(
    readonly cluster: FakeCluster,
    readonly nodeId: number,
  ) {}

  role(): RaftRole {
    const l = this.cluster.leader;
    return l === this.nodeId ? 'leader' : l === undefined ? 'candidate' : 'follower';
  }

  leader(): { id: number; respAddr?: string } | undefined {
    return this.cluster.leaderInfo();
  }

  members(): RespMember[] {
    return this.cluster.members();
  }

  term(): number {
    return this.cluster.term;
  }

  appliedIndex(): number {
    return this.cluster.appliedIndex;
  }

  authRequired(): boolean {
    return this.cluster.authRequired;
  }

  authenticate(user: string, pass: string): boolean {
    return this.cluster.checkPassword(user, pass);
  }

  authorize(user: string | undefined, app: string, perm: LeasePermission): boolean {
    return this.cluster.allowed(user, app, perm);
  }

  clusterUid(): string | undefined {
    return this.cluster.clusterUid;
  }

  private leaderOnly(): void {
    if (this.role() !== 'leader')
      throw new BackendError('NOTLEADER', `node ${this.nodeId} is not the leader`);
  }

  workerAcquire(req: WorkerAcquireRequest): Promise<LeaseReply> {
    return this.cluster.run(`acquire ${req.app} ${req.nodeId}`, () => {
      this.leaderOnly();
      return this.cluster.acquire(req);
    });
  }

  workerRenew(req: WorkerRenewRequest): Promise<LeaseReply> {
    return this.cluster.run(`renew ${req.app} ${req.workerId}`, () => {
      this.leaderOnly();
      return this.cluster.renew(req);
    });
  }

  workerRelease(req: WorkerReleaseRequest): Promise<void> {
    return this.cluster.run(`release ${req.app} ${req.workerId}`, () => {
      this.leaderOnly();
      this.cluster.release(req);
    });
  }

  workerList(req: WorkerListRequest): Promise<LeaseReply[]> {
    return this.cluster.run(`list ${req.app}`, () => this.cluster.list(req));
  }

  onTopologyChange(listener: () => void): () => void {
    return this.cluster.onChange(listener);
  }
}
