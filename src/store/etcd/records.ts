import { pack, unpack } from '../../node/envelope.js';
import { LeaseStateMachine } from '../../state/leases/lease-state-machine.js';

/**
 * How the etcd store keeps the lease state in etcd, and how it turns loaded keys into a
 * LeaseStateMachine (so that both stores decide with the same code) and back.
 *
 * Keys under the prefix (default `/floe`), the app name URI-encoded so that an app's keys never
 * share a prefix with another app's (app names may contain `/`):
 * - `<prefix>/active`: the active Floe node (JSON: id, httpAddr, respAddr), bound to its etcd lease;
 * - `<prefix>/apps/<app>/meta`: the pool (JSON: bits, datacenterBits, layout);
 * - `<prefix>/apps/<app>/seq`: written by every acquire and pool change, which read the whole pool: their
 *   transactions compare it, so they apply one at a time per app (renewals and releases do not touch it);
 * - `<prefix>/apps/<app>/w/<workerId, 7 digits>`: one worker ID's record (JSON, the fields of the
 *   lease state machine's record: token, highWaterMs, floorMs, requestId, incarnation, ttlMs, nodeId, ...).
 */
export interface PoolMeta {
  bits: number;
  datacenterBits: number;
  layout: string;
}

/** One worker ID's record as stored (the fields of src/state/leases/pool.ts's WorkerRecord). */
export interface StoredRecord {
  workerId: number;
  highWaterMs: number;
  nodeId: string;
  live: boolean;
  token: number;
  ttlMs: number;
  grantedAtMs: number;
  renewedAtMs: number;
  floorMs: number;
  requestId: string;
  incarnation: string;
  /** etcd revision at which it was last released/expired (orders the free list); 0 when never freed. */
  freedAt: number;
}

export class EtcdKeys {
  constructor(readonly prefix: string) {}
  get active(): string {
    return `${this.prefix}/active`;
  }
  get apps(): string {
    return `${this.prefix}/apps/`;
  }
  app(app: string): string {
    return `${this.prefix}/apps/${encodeURIComponent(app)}/`;
  }
  meta(app: string): string {
    return `${this.app(app)}meta`;
  }
  seq(app: string): string {
    return `${this.app(app)}seq`;
  }
  worker(app: string, workerId: number): string {
    return `${this.app(app)}w/${String(workerId).padStart(7, '0')}`;
  }
  /** The app and kind of a key under `apps` (workerId for a worker record); undefined for anything else. */
  parse(key: string): { app: string; kind: 'meta' | 'seq' | 'worker'; workerId?: number } | undefined {
    if (!key.startsWith(this.apps)) return undefined;
    const rest = key.slice(this.apps.length);
    const m = /^([^/]+)\/(?:(meta|seq)|w\/(\d{7}))$/.exec(rest);
    if (!m) return undefined;
    const app = decodeURIComponent(m[1]!);
    if (m[2] === 'meta' || m[2] === 'seq') return { app, kind: m[2] };
    return { app, kind: 'worker', workerId: Number(m[3]) };
  }
}

/** An app as loaded from etcd at one revision: the pool (if any) and records, each with its mod revision. */
export interface LoadedApp {
  app: string;
  meta: { value: PoolMeta; mod: string } | undefined;
  /** Mod revision of the meta key ('0' when absent). */
  metaMod: string;
  /** Mod revision of the seq key ('0' when absent or not loaded). */
  seqMod: string;
  records: Map<number, { value: StoredRecord; mod: string }>;
}

type SnapshotPool = [string, number, number, number, (number | string)[], number[], string];

function flatOf(r: StoredRecord): (number | string)[] {
  return [
    r.workerId,
    r.highWaterMs,
    r.nodeId,
    r.live ? 1 : 0,
    r.token,
    r.ttlMs,
    r.grantedAtMs,
    r.renewedAtMs,
    r.floorMs,
    r.requestId,
    r.freedAt,
    r.incarnation,
  ];
}

/** Fields per worker record in the lease state's snapshot (version 3). */
export const FIELDS = 12;

/** The worker record at `i` in a lease snapshot's flat record array. */
export function recordOf(flat: (number | string)[], i: number): StoredRecord {
  return {
    workerId: flat[i] as number,
    highWaterMs: flat[i + 1] as number,
    nodeId: flat[i + 2] as string,
    live: flat[i + 3] === 1,
    token: flat[i + 4] as number,
    ttlMs: flat[i + 5] as number,
    grantedAtMs: flat[i + 6] as number,
    renewedAtMs: flat[i + 7] as number,
    floorMs: flat[i + 8] as number,
    requestId: flat[i + 9] as string,
    freedAt: flat[i + 10] as number,
    incarnation: flat[i + 11] as string,
  };
}

function poolOf(a: LoadedApp): SnapshotPool | undefined {
  if (!a.meta) return undefined;
  const { bits, datacenterBits, layout } = a.meta.value;
  const size = 2 ** bits;
  const recs = [...a.records.values()].map((r) => r.value).sort((x, y) => x.workerId - y.workerId);
  const flat = recs.flatMap(flatOf);
  // The built-in pool frees into a list in log order; here the same order comes from the revision of each free.
  const freeOrder = recs
    .filter((r) => !r.live && r.workerId < size)
    .sort((x, y) => x.freedAt - y.freedAt || x.workerId - y.workerId)
    .map((r) => r.workerId);
  return [a.app, bits, datacenterBits, 0, flat, freeOrder, layout];
}

/**
 * A LeaseStateMachine holding exactly the loaded apps (the state the built-in store would hold for
 * them): commands applied to it are decided by the same code as on a Raft replica.
 */
export function machineOf(apps: LoadedApp[], applied: number): LeaseStateMachine {
  const sm = new LeaseStateMachine();
  const pools = apps.map(poolOf).filter((p): p is SnapshotPool => p !== undefined);
  sm.restore(pack({ v: 3, applied, pools }));
  return sm;
}

/** What changed in `app` after a command: the pool meta (if created or changed) and the changed records. */
export function changesOf(
  sm: LeaseStateMachine,
  before: LoadedApp,
): { meta: PoolMeta | undefined; records: StoredRecord[] } {
  const s = unpack<{ pools: SnapshotPool[] }>(sm.snapshot());
  const p = s.pools.find((x) => x[0] === before.app);
  if (!p) return { meta: undefined, records: [] };
  const [, bits, datacenterBits, , flat, , layout] = p;
  const m = before.meta?.value;
  const meta =
    !m || m.bits !== bits || m.datacenterBits !== datacenterBits || m.layout !== layout
      ? { bits, datacenterBits, layout: layout ?? '' }
      : undefined;
  const records: StoredRecord[] = [];
  for (let i = 0; i < flat.length; i += FIELDS) {
    const r = recordOf(flat, i);
    const old = before.records.get(r.workerId)?.value;
    if (!old || JSON.stringify(flatOf(old)) !== JSON.stringify(flatOf(r))) records.push(r);
  }
  return { meta, records };
}

export function parseMeta(raw: string, key: string): PoolMeta {
  const v = JSON.parse(raw) as Partial<PoolMeta>;
  if (!Number.isInteger(v.bits) || !Number.isInteger(v.datacenterBits) || typeof v.layout !== 'string')
    throw new Error(`etcd key ${key} is not a Floe pool record: ${raw.slice(0, 200)}`);
  return v as PoolMeta;
}

export function parseRecord(raw: string, key: string): StoredRecord {
  const v = JSON.parse(raw) as Partial<StoredRecord>;
  const ints = [
    'workerId',
    'highWaterMs',
    'token',
    'ttlMs',
    'grantedAtMs',
    'renewedAtMs',
    'floorMs',
    'freedAt',
  ];
  const bad =
    ints.some((k) => !Number.isSafeInteger((v as Record<string, unknown>)[k])) ||
    typeof v.nodeId !== 'string' ||
    typeof v.live !== 'boolean' ||
    typeof v.requestId !== 'string' ||
    typeof v.incarnation !== 'string';
  if (bad) throw new Error(`etcd key ${key} is not a Floe worker record: ${raw.slice(0, 200)}`);
  return v as StoredRecord;
}
