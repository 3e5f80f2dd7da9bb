/**
 * What the RESP server needs from a Floe node. The server owns the protocol (parsing, limits, replies, auth
 * handshake, cluster/sentinel presentation, MOVED); everything about state is delegated here. The node runtime
 * implements it (see docs/resp.md, "Wiring"); `fake-backend.ts` is an in-memory twin for tests.
 *
 * Calls the server makes, and when:
 * - `role()`, `leader()`, `members()`: on every keyed command (to decide MOVED) and on CLUSTER/SENTINEL/INFO/ROLE.
 *   They must be cheap and synchronous (read the node's current view).
 * - `authRequired()` on every command of a client that has not authenticated; `authenticate` on AUTH / HELLO AUTH.
 * - `authorize` (if present) before every WORKER.* call, with the authenticated user (undefined when auth is off).
 * - `workerAcquire` / `workerRenew` / `workerRelease` only on the leader (the server answers MOVED elsewhere);
 *   `workerList` on the leader, or on a follower for a client that sent READONLY.
 *
 * Errors: reject with `BackendError` to choose the reply's code; any other error becomes `-ERR <message>`, except
 * errors named like the node runtime's: `NotLeaderError` → `-MOVED <slot> <leader>` (or `-CLUSTERDOWN` with no
 * leader address), `OverloadedError` and `ReadTimeoutError` → `-TRYAGAIN`, `NodeStoppedError` → `-CLUSTERDOWN`,
 * `ProposalOutcomeUnknownError` / `ProposalTimeoutError` → `-TRYAGAIN outcome unknown: <reason>` (the write may or
 * may not have been applied), `ProposalNotCommittedError` → `-TRYAGAIN not committed, retry` (it was not applied).
 */
export interface RespBackend {
  /** This Floe member's id (Raft node id, > 0). */
  readonly nodeId: number;
  /** This member's Raft role right now. Anything but `leader` is presented as a replica. */
  role(): RaftRole;
  /** The leader as far as this member knows, with its advertised RESP address `host:port`; undefined during an election. */
  leader(): { id: number; respAddr?: string } | undefined;
  /** Every voting member and learner, this one included, with its advertised RESP address when known. */
  members(): RespMember[];
  /** Current Raft term: shown as the config epoch in CLUSTER NODES / INFO and SENTINEL MASTER. Default 0. */
  term?(): number;
  /** Last applied log index: shown as the replication offset in ROLE / INFO / CLUSTER SHARDS. Default 0. */
  appliedIndex?(): number;
  /** When true, every command but AUTH, HELLO and QUIT needs a successful AUTH first (`-NOAUTH`). */
  authRequired(): boolean;
  /** Check a user's password (AUTH pass → user `default`). */
  authenticate(user: string, pass: string, clientAddr?: string): boolean | Promise<boolean>;
  /** Per-app permission check. Absent = every authenticated user may do everything. */
  authorize?(user: string | undefined, app: string, perm: LeasePermission): boolean;
  /** Lease a worker ID of `app` to the instance `nodeId` (its previous ID when free). */
  workerAcquire(req: WorkerAcquireRequest): Promise<LeaseReply>;
  /** Extend a lease; fails if `token` is not the current holder's fencing token. */
  workerRenew(req: WorkerRenewRequest): Promise<LeaseReply>;
  /** Give a lease back; fails if `token` is not the current holder's fencing token. */
  workerRelease(req: WorkerReleaseRequest): Promise<void>;
  /** Every current lease of `app`, ordered by worker ID. */
  workerList(req: WorkerListRequest): Promise<LeaseReply[]>;
  /**
   * The cluster's UUID once this member knows it (docs/cluster-identity.md): checked against a command's `CLUSTER`
   * option, named in lease records (`cluster`) and in INFO (`floe_cluster_uid`). Absent or undefined: a command that
   * names a cluster is refused `-TRYAGAIN not_ready`.
   */
  clusterUid?(): string | undefined;
  /** Sequences (SEQ.*, INCR, INCRBY, GET). Absent: those commands answer that sequences are not served here. */
  sequences?: SequenceBackend;
  /** Server-side Snowflake (SNOWFLAKE.NEXT/CREATE/INFO). */
  snowflakes?: SnowflakeBackend;
  /**
   * Optional: call `listener` whenever the leader or membership may have changed; returns an unsubscribe function.
   * With it the server publishes `+switch-master` to Sentinel subscribers when the leader moves.
   */
  onTopologyChange?(listener: () => void): () => void;
}

/**
 * Sequences, called on the leader only (keyed commands are MOVED elsewhere; SEQ.INFO / SEQ.LIST may
 * run on a follower for a READONLY client, `stale` then). Values are bigint (64-bit).
 * Refusals: reject with `BackendError('ERR', ...)`; the server checks permissions first (`issue` for
 * INCR/INCRBY/SEQ.ALLOC, `read` for GET/SEQ.INFO/SEQ.LIST, `admin` for SEQ.CREATE/SEQ.DELETE).
 */
export interface SequenceBackend {
  /** True when this member answers `key` itself in any role (a `node`-mode sequence). */
  servesLocally(key: string): boolean;
  create(req: SeqCreateRequest): Promise<{ created: boolean; info: SequenceInfoReply }>;
  info(key: string, stale: boolean): Promise<SequenceInfoReply | undefined>;
  list(stale: boolean): Promise<SequenceInfoReply[]>;
  /** False when no such sequence existed. */
  delete(key: string): Promise<boolean>;
  /** Reserves `count` consecutive values and returns the last (INCR = incrBy(key, 1n)). */
  incrBy(key: string, count: bigint, opts?: { arrivedAt?: number }): Promise<bigint>;
  /**
   * Optional: `incrBy` answered synchronously when the backend can (a strict key whose leadership check already
   * confirmed after `arrivedAt`), else undefined and the server calls `incrBy`. Never throws.
   */
  incrByNow?(key: string, count: bigint, arrivedAt: number): bigint | undefined;
  /**
   * Optional: `times` identical `incrBy(key, count)` that arrived together (a pipeline), answered synchronously as
   * `incrByNow` answers one: the results of the first k ≤ times, in order (none: all go through `incrBy`). Never throws.
   */
  incrRepeatedNow?(key: string, count: bigint, times: number, arrivedAt: number): bigint[];
  /** The last value issued (see docs/sequences.md); undefined when no such sequence exists. */
  get(key: string): Promise<bigint | undefined>;
  /** A segment [start, end) of exactly `count` values for a client. */
  alloc(key: string, count: number): Promise<{ start: bigint; end: bigint }>;
}

/** Server-side Snowflake: NEXT is served by every member from its own leased worker ID. */
export interface SnowflakeBackend {
  create(
    key: string,
    layout?: string,
    ttlMs?: number,
  ): Promise<{ created: boolean; info: SnowflakeKeyReply }>;
  info(key: string): SnowflakeKeyReply | undefined;
  next(key: string, count: number): Promise<bigint[]>;
}

export interface SnowflakeKeyReply {
  key: string;
  layout: string;
  ttlMs: number;
}

export interface SeqCreateRequest {
  key: string;
  start?: bigint;
  max?: bigint;
  step?: number;
  minStep?: number;
  maxStep?: number;
  mode?: 'strict' | 'node';
}

export interface SequenceInfoReply {
  key: string;
  start: bigint;
  max: bigint;
  step: number;
  minStep: number;
  maxStep: number;
  mode: 'strict' | 'node';
  /** High-water mark: the first value not allocated to any segment. */
  next: bigint;
}

export type RaftRole = 'leader' | 'follower' | 'candidate' | 'learner';

export interface RespMember {
  id: number;
  /** Advertised RESP `host:port` (what clients must dial); members without one are shown as `noaddr`. */
  respAddr?: string;
  /** Raft role as this member knows it (`leader`, `follower`, `learner`, ...). */
  role: string;
}

export type LeasePermission = 'acquire' | 'renew' | 'release' | 'read' | 'admin' | 'issue';

/** A worker-ID lease as the client sees it. Shown as a field/value list (RESP2) or map (RESP3), in this order. */
export interface LeaseReply {
  app: string;
  workerId: number;
  /** 0 when the app's pool has no datacenter bits. */
  datacenterId: number;
  /** The holder instance's identity (the `nodeId` given to WORKER.ACQUIRE). */
  nodeId: string;
  /** Fencing token: increases every time the worker ID changes hands; RENEW/RELEASE must present it. */
  token: number | bigint;
  /** When the lease expires, leader time, ms since the Unix epoch. */
  expiresAtMs: number;
  /** No ID issued by this worker may have a timestamp at or below this (ms since the Unix epoch). */
  highWaterMs: number;
  /** The lease's time to live, ms. */
  ttlMs: number;
  /** Extra fields, appended after the standard ones in insertion order (e.g. `bound_ms`, `pool_bits`). */
  extra?: Readonly<Record<string, string | number | bigint>>;
}

export interface WorkerAcquireRequest {
  app: string;
  nodeId: string;
  /** TTL option; undefined = the app's default. Positive integer ms. */
  ttlMs?: number;
  /** REQID option: idempotency key; the same nodeId, REQID and INCARNATION retried get the same lease. */
  requestId?: string;
  /** INCARNATION option: the calling process's id; a REQID retry is answered only to the same incarnation. */
  incarnation?: string;
  /**
   * LAYOUT option: the fingerprint of the ID layout the holder generates with (a preset name is turned into its
   * fingerprint): pinned per app by the first acquire naming one, `layout_mismatch` for another (docs/leases.md).
   */
  layout?: string;
  /** BOUND option: the highest timestamp (ms) the holder will use before its first renewal (raises the mark). */
  boundMs?: number;
  /** The authenticated user (undefined when auth is off). */
  user?: string;
}

export interface WorkerRenewRequest {
  app: string;
  workerId: number;
  token: number | bigint;
  /** BOUND option: the highest timestamp (ms) the holder promises not to exceed before its next renewal. */
  boundMs?: number;
  user?: string;
}

export interface WorkerReleaseRequest {
  app: string;
  workerId: number;
  token: number | bigint;
  /** LAST option: the last timestamp (ms) the holder used, carried to the next holder as high water. */
  lastMs?: number;
  user?: string;
}

export interface WorkerListRequest {
  app: string;
  user?: string;
}

/**
 * Reply codes a backend may choose. `NOTLEADER` is turned into `-MOVED <slot> <leader>` (or `-CLUSTERDOWN`).
 * - `ERR`: bad request or refused (pool exhausted, stale token, unknown app...).
 * - `NOPERM`: the user may not do this.
 * - `TRYAGAIN`: transient (overloaded, no quorum yet); retrying is safe.
 * - `CLUSTERDOWN`: no leader / node stopping.
 */
export type BackendErrorCode = 'ERR' | 'NOPERM' | 'TRYAGAIN' | 'CLUSTERDOWN' | 'NOTLEADER';

export class BackendError extends Error {
  constructor(
    readonly code: BackendErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'BackendError';
  }
}
