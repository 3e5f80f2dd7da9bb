// What users run: the configuration `floe serve` (src/node/config.ts DEFAULTS, src/node/start.ts) and the SDK give a
// deployment that names no tuning. Seeds that draw it (config.ts, `config-late7-defaults`) run these values instead of
// the simulator's drawn ones. Every value is imported from, or read out of, the production code, so the simulator
// follows a change of a default; the one that is not exported says so.

import { FloeClient } from '../../client/floe-client.js';
import { DEFAULT_TTL_MS } from '../../lease/lease-service.js';
import { DEFAULTS as SERVE_DEFAULTS } from '../../node/config.js';
import { DEFAULT_SNOWFLAKE_TTL_MS } from '../../state/snowflakes/snowflake-keys.js';
import { DEFAULT_SEGMENT_BYTES } from '../../storage/wal.js';
import { DEFAULTS as TRANSPORT_DEFAULTS } from '../../transport/index.js';

/**
 * The SDK's per-attempt request timeout when `requestTimeoutMs` is not given, read from a FloeClient built without one
 * (it is not exported). The simulated fetch cannot see the SDK's `AbortSignal.timeout` (a real-time timer), so the
 * router times a request out after this long instead, as the SDK's signal would.
 */
export function sdkDefaultRequestTimeoutMs(): number {
  const probe = new FloeClient({
    endpoints: ['http://probe:1'],
    bootId: 'probe',
    fetch: () => new Promise(() => {}),
  });
  const ms = (probe.transport as unknown as { o?: { requestTimeoutMs?: unknown } }).o?.requestTimeoutMs;
  if (typeof ms !== 'number' || !Number.isFinite(ms))
    throw new Error('harness: cannot read the SDK default requestTimeoutMs (HttpTransport changed shape?)');
  return ms;
}

/**
 * `httpRemoteAlloc`'s default `timeoutMs` (src/sequences/remote-alloc.ts, `o.timeoutMs ?? 3000`): not exported, so
 * copied here; the one value of this file that does not follow a change by itself.
 */
export const REMOTE_ALLOC_DEFAULT_TIMEOUT_MS = 3000;

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
