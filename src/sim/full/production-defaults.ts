// What users run: the configuration `floe serve` (src/node/config.ts DEFAULTS, src/node/start.ts) and the SDK give a
// deployment that names no tuning. Seeds that draw it (config.ts, `config-late7-defaults`) run these values instead of
// the simulator's drawn ones. Every value is imported from the production code, so the simulator follows a change of
// a default.

import { DEFAULT_REQUEST_TIMEOUT_MS } from '../../client/floe-client.js';
import { DEFAULT_TTL_MS } from '../../lease/lease-service.js';
import { DEFAULTS as SERVE_DEFAULTS } from '../../node/config.js';
import { REMOTE_ALLOC_DEFAULT_TIMEOUT_MS } from '../../sequences/remote-alloc.js';
import { DEFAULT_SNOWFLAKE_TTL_MS } from '../../state/snowflakes/snowflake-keys.js';
import { DEFAULT_SEGMENT_BYTES } from '../../storage/wal.js';
import { DEFAULTS as TRANSPORT_DEFAULTS } from '../../transport/index.js';

/**
 * The SDK's per-attempt request timeout when `requestTimeoutMs` is not given. The simulated fetch cannot see the SDK's
 * `AbortSignal.timeout` (a real-time timer), so the router times a request out after this long instead, as the SDK's
 * signal would.
 */
export function sdkDefaultRequestTimeoutMs(): number {
  return DEFAULT_REQUEST_TIMEOUT_MS;
}

/** `httpRemoteAlloc`'s default `timeoutMs`. */
export { REMOTE_ALLOC_DEFAULT_TIMEOUT_MS };

/** The production defaults the simulator runs in those seeds. */
export const PRODUCTION = {
  /** `floe serve`: tickMs, electionTicks, snapshotEvery, snapshotTrailing. */
  serve: SERVE_DEFAULTS,
  /** LeaseService `defaultTtlMs` (start.ts names none), also the TTL a client that names none gets from the SDK. */
  leaseTtlMs: DEFAULT_TTL_MS,
  /** A server-side Snowflake key created without a TTL. */
  snowflakeTtlMs: DEFAULT_SNOWFLAKE_TTL_MS,
  /** DurableStorage's WAL segment size (start.ts passes none). */
  segmentBytes: DEFAULT_SEGMENT_BYTES,
  /** PeerTransport's snapshot chunk (start.ts passes none). */
  snapshotChunkBytes: TRANSPORT_DEFAULTS.snapshotChunkBytes,
} as const;
