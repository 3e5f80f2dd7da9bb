/**
 * Floe's client SDK (`floe/client`): lease a worker ID from a Floe cluster and generate Snowflake IDs in-process,
 * never past the lease's safe deadline. See docs/client.md.
 */
export { hrtimeMonotonic, type MonotonicClock, readBootId } from './clocks.js';
export {
  CacheLockedError,
  ClientOptionError,
  FloeClientError,
  FloeRequestError,
  FloeUnavailableError,
  LeaseLostError,
  type LeaseLostReason,
  LeaseRenewalLateError,
  ReplyMismatchError,
} from './errors.js';
export {
  FloeClient,
  type FloeClientOptions,
  type LeaseWorkerOptions,
  PROCESS_INCARNATION,
} from './floe-client.js';
export type { FetchInit, FetchLike, FetchResponseLike } from './http-transport.js';
export { type LeaseCacheRecord, readLeaseCache } from './lease-cache.js';
export { LeaseSnowflake } from './lease-snowflake.js';
export { FloeSequence, type SequenceOptions } from './sequence.js';
export {
  type LeaseSnowflakeOptions,
  type ReleasedEvent,
  type RenewedEvent,
  WorkerLease,
} from './worker-lease.js';
