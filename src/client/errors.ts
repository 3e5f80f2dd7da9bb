/**
 * Errors of the client SDK. Each names what went wrong; `code` is stable for programmatic checks.
 */
export class FloeClientError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** Why a lease stopped being usable. */
export type LeaseLostReason =
  /** The safe deadline (monotonic clock, from the last acknowledged renewal's send time) passed. */
  | 'deadline'
  /** The cluster refused a renewal with `stale_token`, `not_held` or `lease_expired`. */
  | 'stale_token'
  | 'not_held'
  | 'lease_expired'
  /** Another process took over the lease cache's lock (this process's lock was judged stale). */
  | 'cache_lock_lost'
  /** The holder's own health check failed (`healthCheck`): it stopped generating and handed the worker ID back. */
  | 'unhealthy'
  /** `release()` was called. */
  | 'released';

/**
 * The lease is gone (or was never safe to use any more): the generator refuses to issue IDs. Thrown by every
 * generator bound to the lease, and emitted once as the lease's `lost` event (not for `released`).
 */
export class LeaseLostError extends FloeClientError {
  constructor(
    readonly reason: LeaseLostReason,
    readonly app: string,
    readonly workerId: number,
    readonly token: number,
    detail: string,
  ) {
    super(
      'ERR_LEASE_LOST',
      `lease on worker ID ${workerId} of app ${app} (token ${token}) lost (${reason}): ${detail}`,
    );
  }
}

/**
 * The lease's generator stopped one tick (plus `maxLeadMs` in borrow mode) before the lease's deadline because no
 * renewal was acknowledged recently enough, while the lease itself is still valid and still renewing. Transient: retry
 * shortly; an acknowledged renewal moves the deadline and the generator goes on. If none comes in time the lease is
 * lost at its deadline and the generator throws `LeaseLostError`. (Until stop 23 this was a `LeaseLostError` that did
 * not end the lease: a caller that leased again met its own live lease, finding FS-16.)
 */
export class LeaseRenewalLateError extends FloeClientError {
  constructor(
    readonly app: string,
    readonly workerId: number,
    readonly token: number,
    /** Milliseconds left before the lease's safe deadline (monotonic). */
    readonly deadlineInMs: number,
  ) {
    super(
      'ERR_LEASE_RENEWAL_LATE',
      `lease on worker ID ${workerId} of app ${app} (token ${token}): no renewal acknowledged recently enough; the ` +
        `generator stops one tick before the deadline (${Math.max(0, Math.round(deadlineInMs))} ms away), and the ` +
        'lease is still renewing: retry shortly',
    );
  }
}

/** The cluster answered with an error that retrying cannot fix (400, 401, 403, 409, 410, 503 pool_exhausted). */
export class FloeRequestError extends FloeClientError {
  constructor(
    /** HTTP status. */
    readonly status: number,
    /** The server's error code, e.g. `lease_held`, `pool_exhausted`, `stale_token`, `unauthorized`. */
    readonly serverCode: string,
    message: string,
    readonly path: string,
  ) {
    super('ERR_REQUEST', `${path}: ${status} ${serverCode}: ${message}`);
  }
}

/** No endpoint gave an answer in time (every try failed, timed out, or found no leader). The outcome is unknown. */
export class FloeUnavailableError extends FloeClientError {
  constructor(
    readonly path: string,
    readonly attempts: number,
    cause: unknown,
  ) {
    super(
      'ERR_UNAVAILABLE',
      `${path}: no answer from the cluster after ${attempts} attempt(s); last error: ${
        cause instanceof Error ? cause.message : String(cause)
      }`,
      { cause },
    );
  }
}

/** An option is out of range. */
export class ClientOptionError extends FloeClientError {
  constructor(
    readonly field: string,
    readonly allowed: string,
    readonly value: unknown,
  ) {
    super('ERR_CLIENT_OPTION', `invalid option: ${field} = ${String(value)}; allowed: ${allowed}`);
  }
}

/**
 * A reply that does not answer this request (another op, app, nodeId, requestId, incarnation, worker ID, token or
 * TTL): e.g. a node that matched the request to another proposal's result. It is never used: an acquire rejects with
 * it, a renewal counts as failed (`renewFailed`) and the deadline stays, a release rejects with it.
 */
export class ReplyMismatchError extends FloeClientError {
  constructor(
    readonly path: string,
    readonly field: string,
    readonly expected: unknown,
    readonly got: unknown,
  ) {
    super(
      'ERR_REPLY_MISMATCH',
      `${path}: reply does not match request: ${field} is ${show(got)}, expected ${show(expected)}; the reply was not used`,
    );
  }
}

/**
 * Another live process holds the lease cache's lock (`<cachePath>.lock`): two processes must never share one cache,
 * or they would share its lease. Thrown after waiting `cacheLockWaitMs`; this process did not read or write the cache.
 */
export class CacheLockedError extends FloeClientError {
  constructor(
    readonly cachePath: string,
    readonly lockPath: string,
    readonly holderPid: number,
    detail: string,
    waitedMs: number,
  ) {
    super(
      'ERR_CACHE_LOCKED',
      `lease cache ${cachePath} is in use by pid ${holderPid} (${detail}); waited ${Math.round(waitedMs)} ms for its ` +
        `lock ${lockPath}. Give every process its own cachePath, or stop the other process first`,
    );
  }
}

function show(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v.length > 60 ? `${v.slice(0, 60)}…` : v);
  if (v === undefined) return 'missing';
  if (typeof v === 'object' && v !== null) return 'an object';
  return String(v);
}
