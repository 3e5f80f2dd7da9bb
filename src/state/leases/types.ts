/**
 * Commands, results, limits and defaults of the replicated worker-ID lease state.
 *
 * Defaults and limits (every violation is an `invalid_argument` result naming the field and the
 * allowed range):
 * - app: 1..128 characters from `A-Z a-z 0-9 . _ : / -`, starting with a letter or digit
 *   (so it can never be the auth wildcard `*`).
 * - pool size: `bits` in 1..22 (2 .. 4,194,304 worker IDs), default 10 (0..1023);
 *   `datacenterBits` in 0..bits, default 0. Worker ID w splits into
 *   datacenterId = w >> (bits - datacenterBits) and localWorkerId = w & (2^(bits - datacenterBits) - 1).
 * - nodeId: 1..256 characters (the holder's stable instance name, e.g. `10.0.0.7:8080` or a pod name).
 * - requestId: 1..128 characters (the caller's idempotency key for one acquire).
 * - incarnation: optional, 1..128 characters (the calling process's random id: a retried requestId
 *   is answered with the live grant only when it comes from the same incarnation).
 * - ttlMs: integer in 1,000..3,600,000 (1 s .. 1 h).
 * - boundMs / lastTimestampMs: integer ms since the Unix epoch, >= 0 and at most
 *   MAX_BOUND_AHEAD_MS (1 h) ahead of the leader's clock stamped on the command (a holder with a
 *   wildly wrong clock must not poison the worker ID's high-water mark for every later holder).
 * - token: a positive integer (the log index of a grant).
 * - expire: 1..MAX_EXPIRE_BATCH (1,024) items per command.
 */

/** The namespace tag every lease command carries, so a composed state machine can route it. */
export const LEASE_NAMESPACE = 'lease';

export const DEFAULT_POOL_BITS = 10;
export const MIN_POOL_BITS = 1;
export const MAX_POOL_BITS = 22;
export const DEFAULT_DATACENTER_BITS = 0;
export const MIN_TTL_MS = 1_000;
export const MAX_TTL_MS = 3_600_000;
export const MAX_BOUND_AHEAD_MS = 3_600_000;
export const MAX_APP_LENGTH = 128;
export const MAX_NODE_ID_LENGTH = 256;
export const MAX_REQUEST_ID_LENGTH = 128;
export const MAX_INCARNATION_LENGTH = 128;
/** Longest layout fingerprint (`layoutFingerprint` of src/id: six numbers). */
export const MAX_LAYOUT_LENGTH = 128;
export const MAX_EXPIRE_BATCH = 1_024;

export const APP_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;

/** One lease to expire: [app, workerId, token]. */
export type ExpireItem = [app: string, workerId: number, token: number];

export type LeaseCommand =
  /** Creates a pool or changes its size; refused (`pool_busy`) while the pool has live leases. */
  | { op: 'configurePool'; app: string; bits: number; datacenterBits: number }
  /**
   * Grants a worker ID to `nodeId` (or returns the live lease it already holds, see `retried`).
   * `boundMs`, when given, is the first promise: the highest timestamp the holder will use before
   * its first renewal; it raises the worker's high-water mark. `incarnation` identifies the
   * calling process: a retry (same requestId) is answered only to the same incarnation.
   */
  | {
      op: 'acquire';
      app: string;
      nodeId: string;
      ttlMs: number;
      requestId: string;
      boundMs?: number;
      incarnation?: string;
      /**
       * The ID layout the holder will generate with (`layoutFingerprint`). The first acquire that names one pins it
       * for the app; an acquire naming another is refused (`layout_mismatch`): IDs of two layouts on one worker ID
       * can collide, because floors are in milliseconds and each layout maps them to its own ticks.
       */
      layout?: string;
    }
  /** Raises the high-water mark of a live lease. Renewals that raise nothing never reach the log. */
  | { op: 'renew'; app: string; workerId: number; token: number; boundMs: number }
  /** Raises the high-water mark to `lastTimestampMs` and frees the worker ID. */
  | { op: 'release'; app: string; workerId: number; token: number; lastTimestampMs: number }
  /** Proposed by the leader only, when a lease's deadline passed on its monotonic clock. */
  | { op: 'expire'; items: ExpireItem[] };

export type LeaseOp = LeaseCommand['op'];

export type LeaseErrorCode =
  /** The bytes are not a lease command (undecodable, unknown op, wrong field types). */
  | 'bad_command'
  /** A field is out of its allowed range; the message names the field and the range. */
  | 'invalid_argument'
  /** Every worker ID of the pool is leased. */
  | 'pool_exhausted'
  /**
   * The nodeId already holds a live lease in this app, granted for another requestId or to another
   * process incarnation.
   */
  | 'lease_held'
  /** The worker ID has no live lease (never granted, released or expired). */
  | 'not_held'
  /** The token is not the live lease's token (the lease was released, expired or re-granted). */
  | 'stale_token'
  /** configurePool would change the size or split of a pool that has live leases. */
  | 'pool_busy'
  /** The acquire names another ID layout than the one the app is pinned to. */
  | 'layout_mismatch'
  /** configurePool would change the datacenter split of a pool whose worker IDs were used. */
  | 'pool_split_fixed'
  /** (LeaseService only) the holder's health URL failed the leader's probes: the lease is not renewed. */
  | 'lease_unhealthy'
  /** (LeaseService only) the leader's deadline for this lease has passed; it is being expired. */
  | 'lease_expired';

export interface LeaseError {
  ok: false;
  code: LeaseErrorCode;
  message: string;
}

/** A live lease as every reply describes it. Times are wall-clock ms (informational, see docs). */
export interface LeaseGrant {
  app: string;
  /** The pool-wide worker ID (what renew/release name), 0 .. 2^bits - 1. */
  workerId: number;
  /** workerId >> workerBits: the datacenter field of a Snowflake layout (0 without a split). */
  datacenterId: number;
  /** workerId & (2^workerBits - 1): the worker field of a Snowflake layout. */
  localWorkerId: number;
  datacenterBits: number;
  workerBits: number;
  /** Fencing token: the log index of the grant. Strictly increasing per worker ID. */
  token: number;
  nodeId: string;
  ttlMs: number;
  /** Leader's wall clock when the grant was committed. */
  grantedAtMs: number;
  /** Leader's wall clock at the last logged grant/renewal + ttlMs. Informational only. */
  expiresAtMs: number;
  /**
   * The worker ID's high-water mark when it was granted: the highest timestamp any previous
   * holder may have used. The holder must issue only timestamps strictly above it.
   */
  highWaterMs: number;
  /** The highest timestamp this holder has promised so far (its ceiling until the next renewal). */
  boundMs: number;
}

export interface AcquireOk extends LeaseGrant {
  ok: true;
  op: 'acquire';
  /** The acquire's requestId (echoed so that the caller can check the reply is its own). */
  requestId: string;
  /** The incarnation the lease was granted to ('' when none was given); echoed for the same reason. */
  incarnation: string;
  /** The app's pinned layout fingerprint ('' while no acquire has named one). */
  layout: string;
  /** True when this was the lease the nodeId already held under the same requestId (a retry). */
  retried: boolean;
}

export interface RenewOk {
  ok: true;
  op: 'renew';
  app: string;
  workerId: number;
  token: number;
  ttlMs: number;
  /** The highest timestamp the holder has promised (the worker's high-water mark now). */
  boundMs: number;
  /** Leader's wall clock at this renewal + ttlMs. Informational only. */
  expiresAtMs: number;
}

export interface ReleaseOk {
  ok: true;
  op: 'release';
  app: string;
  workerId: number;
  /** The worker ID's high-water mark after the release (the next holder starts above it). */
  highWaterMs: number;
  /** True when the same token had already released the lease (a retried release). */
  alreadyReleased: boolean;
}

export interface ExpireItemResult {
  app: string;
  workerId: number;
  token: number;
  /** False when the lease was already gone or held under another token (nothing changed). */
  expired: boolean;
}

export interface ExpireOk {
  ok: true;
  op: 'expire';
  expired: number;
  items: ExpireItemResult[];
}

export interface ConfigurePoolOk {
  ok: true;
  op: 'configurePool';
  app: string;
  bits: number;
  datacenterBits: number;
  size: number;
  created: boolean;
  changed: boolean;
}

export type LeaseResult = AcquireOk | RenewOk | ReleaseOk | ExpireOk | ConfigurePoolOk | LeaseError;

/** What a pool looks like from outside. */
export interface PoolInfo {
  app: string;
  bits: number;
  datacenterBits: number;
  workerBits: number;
  size: number;
  /** Live leases. */
  leased: number;
  /** Worker IDs ever used (they carry a high-water mark). */
  known: number;
  /** The ID layout fingerprint the app is pinned to ('' while none). */
  layout: string;
}

/** A worker ID's replicated record, live or not. */
export interface WorkerInfo {
  app: string;
  workerId: number;
  datacenterId: number;
  localWorkerId: number;
  live: boolean;
  /** Live: the holder. Free: the last holder (who gets this ID back first), '' when none. */
  nodeId: string;
  /** Live: the current token. Free: the last token, 0 when never granted. */
  token: number;
  highWaterMs: number;
  /** The high-water mark when the current (or last) holder was granted it: its IDs lie in (floorMs, highWaterMs]. */
  floorMs: number;
  ttlMs: number;
  grantedAtMs: number;
  renewedAtMs: number;
  /** Log index at which it was last freed; 0 when never freed. */
  freedAtIndex: number;
}

/** Something that happened while applying a command; listeners see it on every replica. */
export type LeaseEvent =
  | {
      type: 'granted';
      app: string;
      workerId: number;
      token: number;
      nodeId: string;
      ttlMs: number;
      index: number;
      leaderTimeMs: number;
    }
  | {
      type: 'renewed';
      app: string;
      workerId: number;
      token: number;
      boundMs: number;
      index: number;
      leaderTimeMs: number;
    }
  | {
      type: 'released' | 'expired';
      app: string;
      workerId: number;
      token: number;
      nodeId: string;
      highWaterMs: number;
      index: number;
      leaderTimeMs: number;
    }
  /** The whole state was replaced from a snapshot. */
  | { type: 'restored' };

export type LeaseListener = (event: LeaseEvent) => void;
