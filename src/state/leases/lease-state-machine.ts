import { pack, unpack } from '../../node/envelope.js';
import type { ApplyContext, StateMachine } from '../../node/state-machine.js';
import { decodeLeaseCommand, leaseError, parseLeaseCommand } from './codec.js';
import { Pool, WorkerRecord } from './pool.js';
import {
  type AcquireOk,
  type ConfigurePoolOk,
  DEFAULT_DATACENTER_BITS,
  DEFAULT_POOL_BITS,
  type ExpireItemResult,
  type ExpireOk,
  type LeaseCommand,
  type LeaseError,
  type LeaseEvent,
  type LeaseGrant,
  type LeaseListener,
  type LeaseResult,
  MAX_BOUND_AHEAD_MS,
  type PoolInfo,
  type ReleaseOk,
  type RenewOk,
  type WorkerInfo,
} from './types.js';

/**
 * Version 2 added each record's incarnation, version 3 each pool's pinned layout; older snapshots still restore
 * (without incarnations / unpinned).
 */
const SNAPSHOT_VERSION = 3;
/** Fields per worker record in a snapshot's flat array, by snapshot version. */
const RECORD_FIELDS: Record<number, number> = { 1: 11, 2: 12, 3: 12 };

type SnapshotPool = [
  app: string,
  bits: number,
  datacenterBits: number,
  nextFresh: number,
  records: (number | string)[],
  freeOrder: number[],
  layout?: string,
];

interface SnapshotData {
  v: number;
  applied: number;
  pools: SnapshotPool[];
}

/**
 * The replicated worker-ID lease state: pools per app, one record per worker ID ever used (with
 * its high-water mark), live leases with their fencing tokens.
 *
 * Deterministic: the only time it reads is `ctx.leaderTimeMs` (stored as information) and the only
 * order it depends on is the log's. It never decides expiry by itself: the leader proposes
 * `expire` when a lease's deadline passes on its monotonic clock (see src/lease/lease-service.ts).
 * `apply` never throws; bad commands get `{ ok: false, code, message }`.
 */
export class LeaseStateMachine implements StateMachine<LeaseResult> {
  private readonly pools = new Map<string, Pool>();
  private readonly listeners: LeaseListener[] = [];
  private applied = 0;
  private leasedTotal = 0;

  apply(command: Uint8Array, ctx: ApplyContext): LeaseResult {
    const cmd = decodeLeaseCommand(command);
    return this.applyParsed(cmd, ctx);
  }

  /** For a composed state machine that already unpacked the entry and saw `ns: 'lease'`. */
  applyUnpacked(value: unknown, ctx: ApplyContext): LeaseResult {
    return this.applyParsed(parseLeaseCommand(value), ctx);
  }

  private applyParsed(cmd: LeaseCommand | LeaseError, ctx: ApplyContext): LeaseResult {
    this.applied = ctx.index;
    if ('ok' in cmd) return cmd;
    switch (cmd.op) {
      case 'configurePool':
        return this.configurePool(cmd.app, cmd.bits, cmd.datacenterBits);
      case 'acquire':
        return this.acquire(cmd, ctx);
      case 'renew':
        return this.renew(cmd, ctx);
      case 'release':
        return this.release(cmd, ctx);
      case 'expire':
        return this.expire(cmd.items, ctx);
    }
  }

  // ---- commands ----------------------------------------------------------------------------

  private configurePool(app: string, bits: number, datacenterBits: number): ConfigurePoolOk | LeaseError {
    let pool = this.pools.get(app);
    let created = false;
    let changed = false;
    if (!pool) {
      pool = new Pool(app, bits, datacenterBits);
      this.pools.set(app, pool);
      created = true;
    } else if (pool.bits !== bits || pool.datacenterBits !== datacenterBits) {
      if (pool.leased > 0) {
        return leaseError(
          'pool_busy',
          `app ${app} has ${pool.leased} live lease(s); its pool (${pool.bits} bits, ${pool.datacenterBits} datacenter bits) ` +
            `can change to ${bits} bits, ${datacenterBits} datacenter bits only when none is leased`,
        );
      }
      // With a datacenter split (before or after), a worker ID's (datacenter, worker) pair depends on the split: the
      // same pair would come back under another worker ID whose high-water mark knows nothing of it (review finding
      // F3: all 1,000 IDs repeated). Marks are kept per worker ID, so once IDs were used the split is fixed.
      const remaps = pool.datacenterBits > 0 || datacenterBits > 0;
      if (remaps && pool.records.size > 0) {
        return leaseError(
          'pool_split_fixed',
          `app ${app} has used worker IDs under its split (${pool.bits} bits, ${pool.datacenterBits} datacenter bits); ` +
            `changing it to ${bits} bits, ${datacenterBits} datacenter bits would give a used (datacenter, worker) ` +
            `pair to another worker ID without its high-water mark. Only a pool without a datacenter split may grow ` +
            `or shrink; use another app for another split`,
        );
      }
      pool.resize(bits, datacenterBits);
      changed = true;
    }
    return {
      ok: true,
      op: 'configurePool',
      app,
      bits,
      datacenterBits,
      size: pool.size,
      created,
      changed,
    };
  }

  private acquire(cmd: Extract<LeaseCommand, { op: 'acquire' }>, ctx: ApplyContext): AcquireOk | LeaseError {
    if (cmd.boundMs !== undefined) {
      const err = checkAhead('boundMs', cmd.boundMs, ctx);
      if (err) return err;
    }
    let pool = this.pools.get(cmd.app);
    if (!pool) {
      pool = new Pool(cmd.app, DEFAULT_POOL_BITS, DEFAULT_DATACENTER_BITS);
      this.pools.set(cmd.app, pool);
    }
    if (cmd.layout !== undefined && pool.layout !== '' && pool.layout !== cmd.layout) {
      return leaseError(
        'layout_mismatch',
        `app ${cmd.app} is pinned to ID layout ${pool.layout}; this acquire names ${cmd.layout}. IDs of two layouts ` +
          `on one worker ID can collide (floors are in ms, each layout maps them to its own ticks): generate with ` +
          `the app's layout, or use another app for the new layout`,
      );
    }
    const held = pool.liveLeaseOf(cmd.nodeId);
    if (held) {
      // One live lease per nodeId per app. The same requestId from the same process incarnation is
      // a retry of the grant (its reply was lost): answer it again, unchanged. Anything else may be
      // another live process using the same nodeId (or one that read the first one's cache file),
      // and handing it the same worker ID and token would make two generators share it.
      // Without an incarnation there is no telling two processes apart (review finding R1b): such a repeat is never
      // a retry. (A lease restored from a version-1 snapshot has incarnation '': it is not retried either.)
      const incarnation = cmd.incarnation ?? '';
      if (held.requestId === cmd.requestId) {
        if (incarnation !== '' && held.incarnation === incarnation) return this.grantResult(pool, held, true);
        if (incarnation === '') {
          return leaseError(
            'lease_held',
            `node ${JSON.stringify(cmd.nodeId)} already holds worker ID ${held.workerId} in app ${cmd.app} under ` +
              `this requestId; without an incarnation a repeat is not recognised as a retry (another process may ` +
              `use the same requestId): send the calling process's incarnation (HTTP "incarnation", RESP ` +
              `INCARNATION) to retry, release the lease with its token, or wait for it to expire`,
          );
        }
        return leaseError(
          'lease_held',
          `node ${JSON.stringify(cmd.nodeId)} already holds worker ID ${held.workerId} in app ${cmd.app}, ` +
            `granted for this requestId to another process incarnation; a new process does not inherit a lease ` +
            `by its requestId: release it with its token, or wait for it to expire`,
        );
      }
      return leaseError(
        'lease_held',
        `node ${JSON.stringify(cmd.nodeId)} already holds worker ID ${held.workerId} in app ${cmd.app} ` +
          `under another requestId; retry with that requestId, release the lease, or wait for it to expire`,
      );
    }
    const r = pool.pick(cmd.nodeId);
    if (!r) {
      return leaseError(
        'pool_exhausted',
        `app ${cmd.app} has no free worker ID: all ${pool.size} IDs of its ${pool.bits}-bit pool are leased; ` +
          `release one, wait for a lease to expire, or give the app a larger pool (configurePool, up to 22 bits)`,
      );
    }
    pool.grant(
      r,
      cmd.nodeId,
      ctx.index,
      cmd.ttlMs,
      cmd.requestId,
      cmd.incarnation ?? '',
      ctx.leaderTimeMs,
      cmd.boundMs,
    );
    if (cmd.layout !== undefined && pool.layout === '') pool.layout = cmd.layout;
    this.leasedTotal++;
    if (this.listeners.length > 0) {
      this.emit({
        type: 'granted',
        app: cmd.app,
        workerId: r.workerId,
        token: r.token,
        nodeId: cmd.nodeId,
        ttlMs: cmd.ttlMs,
        index: ctx.index,
        leaderTimeMs: ctx.leaderTimeMs,
      });
    }
    return this.grantResult(pool, r, false);
  }

  private renew(cmd: Extract<LeaseCommand, { op: 'renew' }>, ctx: ApplyContext): RenewOk | LeaseError {
    const err = checkAhead('boundMs', cmd.boundMs, ctx);
    if (err) return err;
    const found = this.findLive(cmd.app, cmd.workerId, cmd.token);
    if ('ok' in found) return found;
    const r = found.record;
    if (cmd.boundMs > r.highWaterMs) r.highWaterMs = cmd.boundMs;
    r.renewedAtMs = ctx.leaderTimeMs;
    if (this.listeners.length > 0) {
      this.emit({
        type: 'renewed',
        app: cmd.app,
        workerId: r.workerId,
        token: r.token,
        boundMs: r.highWaterMs,
        index: ctx.index,
        leaderTimeMs: ctx.leaderTimeMs,
      });
    }
    return {
      ok: true,
      op: 'renew',
      app: cmd.app,
      workerId: r.workerId,
      token: r.token,
      ttlMs: r.ttlMs,
      boundMs: r.highWaterMs,
      expiresAtMs: ctx.leaderTimeMs + r.ttlMs,
    };
  }

  private release(cmd: Extract<LeaseCommand, { op: 'release' }>, ctx: ApplyContext): ReleaseOk | LeaseError {
    const err = checkAhead('lastTimestampMs', cmd.lastTimestampMs, ctx);
    if (err) return err;
    const pool = this.pools.get(cmd.app);
    const r = pool?.records.get(cmd.workerId);
    if (pool && r && !r.live && r.token === cmd.token) {
      // A retried release (its reply was lost). Raising the mark is still right: the timestamp
      // is one this holder used.
      if (cmd.lastTimestampMs > r.highWaterMs) r.highWaterMs = cmd.lastTimestampMs;
      return releaseOk(cmd.app, r, true);
    }
    const found = this.findLive(cmd.app, cmd.workerId, cmd.token);
    if ('ok' in found) return found;
    const live = found.record;
    if (cmd.lastTimestampMs > live.highWaterMs) live.highWaterMs = cmd.lastTimestampMs;
    this.freeRecord(found.pool, live, 'released', ctx);
    return releaseOk(cmd.app, live, false);
  }

  private expire(items: readonly [string, number, number][], ctx: ApplyContext): ExpireOk {
    const out: ExpireItemResult[] = [];
    let expired = 0;
    for (const [app, workerId, token] of items) {
      const pool = this.pools.get(app);
      const r = pool?.liveLease(workerId);
      if (pool && r && r.token === token) {
        this.freeRecord(pool, r, 'expired', ctx);
        expired++;
        out.push({ app, workerId, token, expired: true });
      } else {
        out.push({ app, workerId, token, expired: false });
      }
    }
    return { ok: true, op: 'expire', expired, items: out };
  }

  private freeRecord(pool: Pool, r: WorkerRecord, type: 'released' | 'expired', ctx: ApplyContext): void {
    pool.free(r, ctx.index);
    this.leasedTotal--;
    if (this.listeners.length > 0) {
      this.emit({
        type,
        app: pool.app,
        workerId: r.workerId,
        token: r.token,
        nodeId: r.nodeId,
        highWaterMs: r.highWaterMs,
        index: ctx.index,
        leaderTimeMs: ctx.leaderTimeMs,
      });
    }
  }

  private findLive(
    app: string,
    workerId: number,
    token: number,
  ): { pool: Pool; record: WorkerRecord } | LeaseError {
    const pool = this.pools.get(app);
    if (!pool)
      return leaseError('not_held', `app ${app} has no pool: worker ID ${workerId} was never leased`);
    if (workerId >= pool.size) {
      return leaseError(
        'invalid_argument',
        `workerId must be an integer in 0..${pool.size - 1} for app ${app} (${pool.bits}-bit pool), got ${workerId}`,
      );
    }
    const r = pool.records.get(workerId);
    if (!r?.live) {
      return leaseError(
        'not_held',
        `worker ID ${workerId} of app ${app} is not leased (released, expired or never granted); acquire again`,
      );
    }
    // The live token is not revealed: a token is the holder's proof, and whoever holds a stale
    // one must stop, not take over.
    if (r.token !== token) {
      return leaseError(
        'stale_token',
        `token ${token} is not the live lease's token for worker ID ${workerId} of app ${app} ` +
          `(the lease was released, expired or granted again); stop using this worker ID and acquire again`,
      );
    }
    return { pool, record: r };
  }

  private grantResult(pool: Pool, r: WorkerRecord, retried: boolean): AcquireOk {
    return {
      ok: true,
      op: 'acquire',
      app: pool.app,
      workerId: r.workerId,
      datacenterId: pool.datacenterOf(r.workerId),
      localWorkerId: pool.localWorkerOf(r.workerId),
      datacenterBits: pool.datacenterBits,
      workerBits: pool.workerBits,
      token: r.token,
      nodeId: r.nodeId,
      ttlMs: r.ttlMs,
      grantedAtMs: r.grantedAtMs,
      expiresAtMs: r.renewedAtMs + r.ttlMs,
      highWaterMs: r.floorMs,
      boundMs: r.highWaterMs,
      requestId: r.requestId,
      incarnation: r.incarnation,
      layout: pool.layout,
      retried,
    };
  }

  // ---- listeners ---------------------------------------------------------------------------

  /** Subscribes to events of applied commands (leader-side expiry tracking, audit). Returns an unsubscribe. */
  subscribe(listener: LeaseListener): () => void {
    this.listeners.push(listener);
    return () => {
      const i = this.listeners.indexOf(listener);
      if (i >= 0) this.listeners.splice(i, 1);
    };
  }

  private emit(e: LeaseEvent): void {
    for (const l of this.listeners) {
      try {
        l(e);
      } catch {
        // A listener's bug must not stop the log from applying (apply must never throw).
      }
    }
  }

  // ---- reads -------------------------------------------------------------------------------

  /** Index of the last applied command. */
  get appliedIndex(): number {
    return this.applied;
  }

  /** Live leases across all apps. */
  get leaseCount(): number {
    return this.leasedTotal;
  }

  pool(app: string): PoolInfo | undefined {
    const p = this.pools.get(app);
    return p ? poolInfo(p) : undefined;
  }

  poolList(): PoolInfo[] {
    return [...this.pools.values()].sort((a, b) => cmp(a.app, b.app)).map(poolInfo);
  }

  /** The live lease on a worker ID, as replies describe it. */
  lease(app: string, workerId: number): LeaseGrant | undefined {
    const p = this.pools.get(app);
    const r = p?.liveLease(workerId);
    return p && r ? grantOf(p, r) : undefined;
  }

  /**
   * The live lease's token and TTL without allocating (the leader's renewal path).
   * Returns 0 when the worker ID has no live lease.
   */
  liveToken(app: string, workerId: number): number {
    return this.pools.get(app)?.liveLease(workerId)?.token ?? 0;
  }

  liveTtlMs(app: string, workerId: number): number {
    return this.pools.get(app)?.liveLease(workerId)?.ttlMs ?? 0;
  }

  /** The worker's high-water mark (0 when never used). */
  highWaterMs(app: string, workerId: number): number {
    return this.pools.get(app)?.records.get(workerId)?.highWaterMs ?? 0;
  }

  /** Live leases of an app, by worker ID. */
  leases(app: string): LeaseGrant[] {
    const p = this.pools.get(app);
    if (!p) return [];
    const out: LeaseGrant[] = [];
    for (const r of p.records.values()) if (r.live) out.push(grantOf(p, r));
    return out.sort((a, b) => a.workerId - b.workerId);
  }

  /** Every live lease of every app, without sorting or copying (for the leader's deadline seeding). */
  *liveLeases(): Generator<{ app: string; workerId: number; token: number; ttlMs: number }> {
    for (const p of this.pools.values()) {
      for (const r of p.records.values()) {
        if (r.live) yield { app: p.app, workerId: r.workerId, token: r.token, ttlMs: r.ttlMs };
      }
    }
  }

  /** A worker ID's record, live or free; undefined when never used. */
  worker(app: string, workerId: number): WorkerInfo | undefined {
    const p = this.pools.get(app);
    const r = p?.records.get(workerId);
    if (!p || !r) return undefined;
    return {
      app,
      workerId,
      datacenterId: p.datacenterOf(workerId),
      localWorkerId: p.localWorkerOf(workerId),
      live: r.live,
      nodeId: r.nodeId,
      token: r.token,
      highWaterMs: r.highWaterMs,
      floorMs: r.floorMs,
      ttlMs: r.ttlMs,
      grantedAtMs: r.grantedAtMs,
      renewedAtMs: r.renewedAtMs,
      freedAtIndex: r.freedAt,
    };
  }

  /** Free worker IDs that were used before, longest free first (what acquire picks after fresh IDs). */
  freeOrder(app: string): number[] {
    const p = this.pools.get(app);
    return p ? [...p.freeRecords()].map((r) => r.workerId) : [];
  }

  // ---- snapshots ---------------------------------------------------------------------------

  /** Canonical bytes: two replicas with the same state produce identical snapshots. */
  snapshot(): Uint8Array {
    const pools: SnapshotPool[] = [];
    for (const p of [...this.pools.values()].sort((a, b) => cmp(a.app, b.app))) {
      const recs = [...p.records.values()].sort((a, b) => a.workerId - b.workerId);
      const flat: (number | string)[] = new Array(recs.length * (RECORD_FIELDS[SNAPSHOT_VERSION] as number));
      let i = 0;
      for (const r of recs) {
        flat[i++] = r.workerId;
        flat[i++] = r.highWaterMs;
        flat[i++] = r.nodeId;
        flat[i++] = r.live ? 1 : 0;
        flat[i++] = r.token;
        flat[i++] = r.ttlMs;
        flat[i++] = r.grantedAtMs;
        flat[i++] = r.renewedAtMs;
        flat[i++] = r.floorMs;
        flat[i++] = r.requestId;
        flat[i++] = r.freedAt;
        flat[i++] = r.incarnation;
      }
      const freeOrder = [...p.freeRecords()].map((r) => r.workerId);
      pools.push([p.app, p.bits, p.datacenterBits, p.nextFresh, flat, freeOrder, p.layout]);
    }
    const data: SnapshotData = { v: SNAPSHOT_VERSION, applied: this.applied, pools };
    return pack(data);
  }

  /** Replaces all state; rebuilds the per-node index, the free lists and the counters. */
  restore(data: Uint8Array): void {
    const s = unpack<SnapshotData>(data);
    const fields = typeof s === 'object' && s !== null ? RECORD_FIELDS[s.v] : undefined;
    if (fields === undefined) {
      throw new Error(
        `lease snapshot version ${String(s?.v)} is not supported (expected 1..${SNAPSHOT_VERSION})`,
      );
    }
    this.pools.clear();
    this.leasedTotal = 0;
    this.applied = s.applied;
    for (const [app, bits, datacenterBits, nextFresh, flat, freeOrder, layout] of s.pools) {
      const p = new Pool(app, bits, datacenterBits);
      p.nextFresh = nextFresh;
      p.layout = typeof layout === 'string' ? layout : '';
      for (let i = 0; i < flat.length; i += fields) {
        const r = new WorkerRecord(flat[i] as number);
        r.highWaterMs = flat[i + 1] as number;
        r.nodeId = flat[i + 2] as string;
        r.live = flat[i + 3] === 1;
        r.token = flat[i + 4] as number;
        r.ttlMs = flat[i + 5] as number;
        r.grantedAtMs = flat[i + 6] as number;
        r.renewedAtMs = flat[i + 7] as number;
        r.floorMs = flat[i + 8] as number;
        r.requestId = flat[i + 9] as string;
        r.freedAt = flat[i + 10] as number;
        r.incarnation = fields > 11 ? (flat[i + 11] as string) : '';
        p.records.set(r.workerId, r);
        if (r.nodeId !== '') p.byNode.set(r.nodeId, r);
        if (r.live) p.leased++;
      }
      p.restoreFreeOrder(freeOrder);
      this.leasedTotal += p.leased;
      this.pools.set(app, p);
    }
    this.emit({ type: 'restored' });
  }
}

function checkAhead(field: string, ts: number, ctx: ApplyContext): LeaseError | undefined {
  const max = ctx.leaderTimeMs + MAX_BOUND_AHEAD_MS;
  if (ts > max) {
    return leaseError(
      'invalid_argument',
      `${field} ${ts} is more than ${MAX_BOUND_AHEAD_MS} ms ahead of the leader's clock (${ctx.leaderTimeMs}); ` +
        `allowed: 0..${max} (is the holder's clock wrong?)`,
    );
  }
  return undefined;
}

function grantOf(p: Pool, r: WorkerRecord): LeaseGrant {
  return {
    app: p.app,
    workerId: r.workerId,
    datacenterId: p.datacenterOf(r.workerId),
    localWorkerId: p.localWorkerOf(r.workerId),
    datacenterBits: p.datacenterBits,
    workerBits: p.workerBits,
    token: r.token,
    nodeId: r.nodeId,
    ttlMs: r.ttlMs,
    grantedAtMs: r.grantedAtMs,
    expiresAtMs: r.renewedAtMs + r.ttlMs,
    highWaterMs: r.floorMs,
    boundMs: r.highWaterMs,
  };
}

function releaseOk(app: string, r: WorkerRecord, alreadyReleased: boolean): ReleaseOk {
  return { ok: true, op: 'release', app, workerId: r.workerId, highWaterMs: r.highWaterMs, alreadyReleased };
}

function poolInfo(p: Pool): PoolInfo {
  return {
    app: p.app,
    bits: p.bits,
    datacenterBits: p.datacenterBits,
    workerBits: p.workerBits,
    size: p.size,
    leased: p.leased,
    known: p.records.size,
    layout: p.layout,
  };
}

/** Code-unit order: the same on every replica, whatever the locale. */
function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
