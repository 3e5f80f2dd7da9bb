import { dirname } from 'node:path';
import { bugOn } from '../testing/bug-switches.js';
import { type CacheFs, type CacheHost, nodeCacheFs, nodeCacheHost } from './cache-fs.js';
import { FloeClientError } from './errors.js';

/**
 * What a lease leaves on disk (`cachePath`) so that a restarted instance can ask for the same lease back, or, while
 * the cluster is away, keep generating until the cached lease's safe deadline.
 */
export interface LeaseCacheRecord {
  version: 1;
  app: string;
  nodeId: string;
  requestId: string;
  workerId: number;
  datacenterId: number;
  localWorkerId: number;
  datacenterBits: number;
  workerBits: number;
  token: number;
  ttlMs: number;
  highWaterMs: number;
  /** The bound committed by the cluster (acquire or logged renewal). */
  boundMs: number;
  /**
   * The highest timestamp this instance allowed its generators to use (<= boundMs). Written before the generators
   * may use it, so a restarted instance starts strictly above it.
   */
  usedUpToMs: number;
  /**
   * Safe deadline on CLOCK_MONOTONIC (ms): comparable only on the machine boot `bootId`, and only when the writer used
   * the machine's monotonic clock (`systemMonotonic`).
   */
  deadlineMono: number;
  bootId: string | null;
  /**
   * True when `deadlineMono` was read from the machine's monotonic clock: the built-in CLOCK_MONOTONIC, or a supplied
   * clock declared `monotonicIsSystemWide`.
   */
  systemMonotonic?: boolean;
  /**
   * The wall-clock deadline: wall time when the last acknowledged acquire/renewal was sent + TTL - margin. Always
   * enforced as well (it counts time the machine spent suspended, which CLOCK_MONOTONIC does not).
   */
  deadlineWallMs: number;
  savedAtWallMs: number;
  /** The (canonical) cache path the writer locked: a reader that reached the file by another name checks that lock. */
  cachePath?: string;
  /** The lease's layout fingerprint: a cached lease is resumed only for the same layout. */
  layout?: string;
  /** The cluster the lease was granted by (its UUID): never resumed nor released against another. */
  cluster?: string;
  /**
   * Written (durably) before a release of this lease is sent: the release may take effect even if its answer is
   * lost, so the lease is never resumed from this record again (review finding F2).
   */
  released?: true;
}

/**
 * Writes the record atomically and durably: a temporary file in the same directory, fsynced, renamed over the cache,
 * then the directory fsynced (so that neither the content nor the rename is lost in a crash).
 */
export function writeLeaseCache(
  path: string,
  record: LeaseCacheRecord,
  fs: CacheFs = nodeCacheFs,
  host: CacheHost = nodeCacheHost,
): void {
  const tmp = `${path}.${host.pid}.${host.nonce(4)}.tmp`;
  const noFsync = bugOn('client-cache-no-fsync');
  try {
    fs.writeFile(tmp, `${JSON.stringify(record)}\n`, !noFsync);
    fs.rename(tmp, path);
  } catch (err) {
    fs.remove(tmp);
    throw err;
  }
  if (!noFsync) fs.syncDir(dirname(path));
}

/** The cached record for this app and nodeId, or undefined if there is none or it is unreadable / for another one. */
export function readLeaseCache(
  path: string,
  app: string,
  nodeId: string,
  fs: CacheFs = nodeCacheFs,
): LeaseCacheRecord | undefined {
  let text: string;
  try {
    text = fs.readText(path);
  } catch {
    return undefined;
  }
  try {
    const r = JSON.parse(text) as Partial<LeaseCacheRecord>;
    if (r.version !== 1 || r.app !== app || r.nodeId !== nodeId || typeof r.requestId !== 'string')
      return undefined;
    for (const k of [
      'workerId',
      'datacenterId',
      'localWorkerId',
      'datacenterBits',
      'workerBits',
      'token',
      'ttlMs',
      'highWaterMs',
      'boundMs',
      'usedUpToMs',
      'deadlineMono',
      'deadlineWallMs',
    ] as const) {
      if (typeof r[k] !== 'number' || !Number.isFinite(r[k])) return undefined;
    }
    if (r.cachePath !== undefined && typeof r.cachePath !== 'string') return undefined;
    if (r.layout !== undefined && typeof r.layout !== 'string') return undefined;
    if (r.cluster !== undefined && typeof r.cluster !== 'string') return undefined;
    // UUIDs compare in lower case, as nodes name them (a hand-edited record in upper case is the same cluster).
    if (r.cluster !== undefined) r.cluster = r.cluster.toLowerCase();
    if (r.released !== undefined && r.released !== true) return undefined;
    return r as LeaseCacheRecord;
  } catch {
    return undefined;
  }
}

export function removeLeaseCache(path: string, fs: CacheFs = nodeCacheFs): void {
  fs.remove(path);
  fs.syncDir(dirname(path));
}

/**
 * The error of a release that was not sent because its tombstone (`released: true`) could not be made durable: were
 * it sent, the worker ID could go to another holder while a power loss brings the resumable record back (review
 * finding F3). The lease is left to expire; `cause` is the file system's error.
 */
export function releaseMarkFailed(path: string, workerId: number, err: unknown): FloeClientError {
  const why = err instanceof Error ? err.message : String(err);
  return new FloeClientError(
    'ERR_CACHE_WRITE',
    `the release of worker ID ${workerId} was not sent: its mark in the lease cache ${path} could not be made ` +
      `durable (${why}). The lease expires at most one TTL after its last renewal; check the disk`,
    { cause: err },
  );
}
