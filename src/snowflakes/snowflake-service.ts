import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { LeaseLostError } from '../client/errors.js';
import type { FloeClient } from '../client/floe-client.js';
import type { WorkerLease } from '../client/worker-lease.js';
import { getLayout, layoutFingerprint, Snowflake } from '../id/index.js';
import {
  DEFAULT_SNOWFLAKE_TTL_MS,
  encodeSnowflakeKeyCommand,
  parseSnowflakeKeyCommand,
  type SnowflakeKeyInfo,
  type SnowflakeKeyResult,
  type SnowflakeKeysStateMachine,
} from '../state/snowflakes/snowflake-keys.js';
import { bugOn } from '../testing/bug-switches.js';

export interface SnowflakeServiceOptions {
  state: SnowflakeKeysStateMachine;
  /** Proposes a command on this node (leader only; followers answer NotLeaderError). */
  propose(command: Uint8Array): Promise<unknown>;
  /**
   * A linearizable read (ReadIndex, also on a follower): before answering "no such key", a member makes sure it has
   * applied every create acknowledged so far. Default: none (this member's applied state only).
   */
  linearizableRead?(): Promise<void>;
  /** Sizes the key's lease pool for its layout (the lease service's configurePool). */
  configurePool(
    app: string,
    bits: number,
    datacenterBits: number,
  ): Promise<{ ok: boolean; message?: string }>;
  /**
   * The ID layout fingerprint the lease pool `app` is pinned to, if any (an SDK app of the same name, or an earlier
   * key): a create with another layout must not resize that pool (review round 3).
   */
  pinnedLayout?(app: string): string | undefined | Promise<string | undefined>;
  /** This node's SDK client (its own HTTP API, following the leader; authenticated as a member). */
  client: FloeClient;
  /** The lease holder's name, e.g. `floe-node-1`: a restarted node gets its worker ID back. */
  holder: string;
  /** Directory for the lease caches (one file per key), so a restart resumes at once. None: no cache. */
  cacheDir?: string;
  /**
   * Makes `cacheDir` (and its parents) if missing, before a lease is taken. Default: node:fs `mkdir` with `recursive`.
   * The full-stack simulator passes its node machine's disk, the file system `client` keeps its caches on (its
   * `cacheFs`).
   */
  mkdirCacheDir?(dir: string): Promise<unknown>;
}

/** A refusal (unknown key, bad layout, ...): the message says what. */
export class SnowflakeRefusedError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'SnowflakeRefusedError';
  }
}

interface KeyLease {
  lease: WorkerLease;
  gen: Snowflake;
}

/**
 * Server-side Snowflake (issue 11, March's "timestamp type"): every node leases its own worker ID
 * per key from the cluster with the client SDK (the same machinery embedded users run: floor above
 * the worker's high-water mark, ceiling at the bound promised to the cluster, a deadline before the
 * cluster may expire the lease; decision 0002) and serves IDs from it. Clock rollback and sequence
 * overflow borrow ticks ahead, as March does, within the SDK's bounds.
 *
 * A lease that is lost (deadline passed, fenced) is dropped; the next request leases again, and
 * the new lease starts above the worker's high-water mark, so a restarted or fenced node never
 * repeats an ID.
 */
export class SnowflakeService {
  private readonly held = new Map<string, KeyLease>();
  private readonly acquiring = new Map<string, Promise<KeyLease>>();
  /** Releases of dropped leases, by key: the next acquire of the key waits for its own orphan to be handed back. */
  private readonly releasing = new Map<string, Promise<void>>();
  private closed = false;

  constructor(private readonly o: SnowflakeServiceOptions) {}

  /** Creates of one key run one at a time on this node (two at once could size its pool for two layouts). */
  private readonly creating = new Map<string, Promise<unknown>>();

  create(
    key: string,
    layout = 'floe',
    ttlMs = DEFAULT_SNOWFLAKE_TTL_MS,
  ): Promise<{ created: boolean; info: SnowflakeKeyInfo }> {
    const before = this.creating.get(key) ?? Promise.resolve();
    const p = before.catch(() => {}).then(() => this.createNow(key, layout, ttlMs));
    this.creating.set(key, p);
    const forget = () => {
      if (this.creating.get(key) === p) this.creating.delete(key);
    };
    p.then(forget, forget);
    return p;
  }

  private async createNow(
    key: string,
    layout: string,
    ttlMs: number,
  ): Promise<{ created: boolean; info: SnowflakeKeyInfo }> {
    const cmd = parseSnowflakeKeyCommand({ op: 'create', key, layout, ttlMs });
    if ('ok' in cmd) throw new SnowflakeRefusedError(cmd.code, cmd.message);
    const l = getLayout(layout);
    // Refusals first, before the pool is touched: a refused create must leave the key and any app of the same name
    // exactly as they were (it used to resize the pool and then be refused, breaking the key for good).
    const existing = this.o.state.get(key);
    if (existing && cmd.op === 'create' && (existing.layout !== cmd.layout || existing.ttlMs !== cmd.ttlMs))
      throw new SnowflakeRefusedError(
        'exists',
        `snowflake key ${JSON.stringify(key)} exists with another layout or TTL`,
      );
    if (existing) return { created: false, info: existing };
    const pinned = await this.o.pinnedLayout?.(key);
    if (pinned && pinned !== layoutFingerprint(l))
      throw new SnowflakeRefusedError(
        'layout_mismatch',
        `the lease pool ${JSON.stringify(key)} is pinned to another ID layout (${pinned}) by earlier leases (an SDK app ` +
          `or a deleted key of that name): choose another key name`,
      );
    const pool = await this.o.configurePool(key, l.datacenterBits + l.workerBits, l.datacenterBits);
    if (!pool.ok)
      throw new SnowflakeRefusedError('pool', pool.message ?? 'the lease pool could not be sized');
    const r = (await this.o.propose(encodeSnowflakeKeyCommand(cmd))) as SnowflakeKeyResult;
    if (!r.ok) throw new SnowflakeRefusedError(r.code, r.message);
    if (r.op !== 'create' || r.key !== key)
      throw new Error(`create ${key} answered with ${JSON.stringify(r)}`);
    return { created: r.created, info: r.info };
  }

  info(key: string): SnowflakeKeyInfo | undefined {
    return this.o.state.get(key);
  }

  list(): SnowflakeKeyInfo[] {
    return this.o.state.list();
  }

  /** `count` IDs of `key` (1 ≤ count ≤ 100,000), strictly increasing. */
  async next(key: string, count = 1): Promise<bigint[]> {
    if (!Number.isSafeInteger(count) || count < 1 || count > 100_000)
      throw new SnowflakeRefusedError(
        'invalid_argument',
        `count must be an integer in [1, 100000], got ${count}`,
      );
    for (let attempt = 0; ; attempt++) {
      const kl = await this.leaseFor(key);
      try {
        return Array.from(kl.gen.nextBatch(count));
      } catch (err) {
        if (!(err instanceof LeaseLostError) || attempt >= 1) throw err;
        this.drop(key, kl);
      }
    }
  }

  /** Releases every lease (graceful shutdown: the next holder starts above what was used). */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.held.values()];
    this.held.clear();
    // The releases of dropped leases too: a stop that returned before they were answered left the worker IDs taken
    // until their TTL (review 3 of stop 35).
    // And acquires in flight: one answered after this began releases its lease at once, before the node stops
    // (review 4; start.ts bounds the whole wait).
    await Promise.all([
      ...all.map((kl) => kl.lease.release().catch(() => {})),
      ...this.releasing.values(),
      ...[...this.acquiring.values()].map((p) => p.catch(() => {})),
    ]);
  }

  private async leaseFor(key: string): Promise<KeyLease> {
    // A key created through another member may not be applied here yet: read-your-writes before "not found".
    if (!this.held.has(key) && !this.o.state.get(key) && this.o.linearizableRead)
      await this.o.linearizableRead();
    return this.leaseForKnown(key);
  }

  private leaseForKnown(key: string): Promise<KeyLease> {
    const have = this.held.get(key);
    if (have?.lease.valid) return Promise.resolve(have);
    if (have) this.drop(key, have);
    const pending = this.acquiring.get(key);
    if (pending) return pending;
    const info = this.o.state.get(key);
    if (!info)
      return Promise.reject(
        new SnowflakeRefusedError(
          'not_found',
          `no snowflake key ${JSON.stringify(key)} (create it with SNOWFLAKE.CREATE)`,
        ),
      );
    if (this.closed) return Promise.reject(new SnowflakeRefusedError('stopped', 'the node is stopping'));
    const p = (async () => {
      await this.releasing.get(key);
      // close() may have run while the release was answered: lease nothing after it (review 2 of stop 35).
      if (this.closed) throw new SnowflakeRefusedError('stopped', 'the node is stopping');
      if (this.o.cacheDir)
        await (this.o.mkdirCacheDir
          ? this.o.mkdirCacheDir(this.o.cacheDir)
          : mkdir(this.o.cacheDir, { recursive: true }));
      const lease = await this.o.client.leaseWorker({
        app: key,
        nodeId: this.o.holder,
        ttlMs: info.ttlMs,
        layout: info.layout,
        ...(this.o.cacheDir
          ? { cachePath: join(this.o.cacheDir, `${encodeURIComponent(key)}.lease.json`) }
          : {}),
      });
      if (this.closed) {
        // close() ran while the acquire was answered: hand the lease back at once, serve nothing (review 3 of stop 35).
        await lease.release().catch(() => {});
        throw new SnowflakeRefusedError('stopped', 'the node is stopping');
      }
      const leased = lease.snowflake(info.layout, {
        onClockBackwards: 'borrow',
        onSequenceExhausted: 'borrow',
      });
      // Test-only (`snowflake-unbounded-generator`): a plain generator on the leased worker ID and the lease's clock,
      // without the lease's floor, ceiling and deadline check.
      const gen = bugOn('snowflake-unbounded-generator')
        ? new Snowflake({
            layout: leased.layout,
            worker: leased.worker,
            datacenter: leased.datacenter,
            clock: leased.clock,
            onClockBackwards: 'borrow',
            onSequenceExhausted: 'borrow',
          })
        : leased;
      const kl = { lease, gen };
      lease.on('lost', () => this.drop(key, kl));
      this.held.set(key, kl);
      return kl;
    })().finally(() => this.acquiring.delete(key));
    this.acquiring.set(key, p);
    return p;
  }

  /**
   * Stops using a lease and ends it for good: release() ends it first (an answer still in flight, such as a renewal
   * sent before its deadline, can no longer revive it), then hands the worker ID back, so this member's next acquire
   * under the same holder is not refused as `lease_held` by its own orphan (review of stop 35). The next acquire of
   * the key waits for that release; if the release fails, the lease simply expires.
   */
  private drop(key: string, kl: KeyLease): void {
    if (this.held.get(key) !== kl) return;
    this.held.delete(key);
    const released: Promise<void> = kl.lease.release().then(
      () => {},
      () => {},
    );
    this.releasing.set(key, released);
    void released.then(() => {
      if (this.releasing.get(key) === released) this.releasing.delete(key);
    });
  }
}
