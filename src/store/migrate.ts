import { Etcd3 } from 'etcd3';
import { decodeEnvelope, unpack } from '../node/envelope.js';
import { FloeStateMachine } from '../state/floe-state-machine.js';
import type { LeaseStateMachine } from '../state/leases/lease-state-machine.js';
import { DurableStorage } from '../storage/durable-storage.js';
import { type EtcdSecurity, etcd3SecurityOptions } from './etcd/etcd-security.js';
import {
  EtcdKeys,
  FIELDS,
  type PoolMeta,
  parseMeta,
  parseRecord,
  recordOf,
  type StoredRecord,
} from './etcd/records.js';

/**
 * Moving worker-ID leases from the built-in store to etcd (docs/etcd-store.md, "Moving between stores").
 *
 * What must survive a move is every worker ID's **high-water mark** (the next holder's floor) and a token
 * above every token granted before; live leases need not: the export is taken from stopped members, so
 * their holders stop at their own deadlines, and the import writes every record free.
 */
export interface LeaseExport {
  format: 'floe-leases';
  version: 1;
  /** Where it came from (data directories), for people. */
  source: string[];
  pools: { app: string; bits: number; datacenterBits: number; layout: string; records: StoredRecord[] }[];
}

type SnapshotPool = [string, number, number, number, (number | string)[], number[], string];

function poolsOf(sm: LeaseStateMachine): LeaseExport['pools'] {
  const s = unpack<{ pools: SnapshotPool[] }>(sm.snapshot());
  return s.pools.map(([app, bits, datacenterBits, , flat, , layout]) => {
    const records: StoredRecord[] = [];
    for (let i = 0; i < flat.length; i += FIELDS) records.push(recordOf(flat, i));
    return { app, bits, datacenterBits, layout: layout ?? '', records };
  });
}

/**
 * Reads the lease state of stopped built-in members from their data directories (snapshot, then every
 * entry in the log, committed or not: an uncommitted tail can only raise marks) and merges them: per
 * worker ID the highest mark and token any member has. Give every member's directory: one that lagged
 * misses the latest marks, and the merge takes the highest.
 */
export async function exportFromDataDirs(dirs: string[]): Promise<LeaseExport> {
  if (dirs.length === 0) throw new Error('give at least one data directory of a stopped member');
  // Each member's pools, the most advanced member first: its pool settings are the latest.
  const members: { applied: number; pools: LeaseExport['pools'] }[] = [];
  for (const dir of dirs) {
    const ds = await DurableStorage.open(dir);
    try {
      const st = ds.storage;
      const sm = new FloeStateMachine();
      const snap = st.snapshot();
      if (snap.data.length > 0) sm.restore(unpack<[Uint8Array, Uint8Array]>(snap.data)[1]);
      let applied = snap.metadata.index;
      const last = st.lastIndex();
      for (let lo = st.firstIndex(); lo <= last; lo += 1000) {
        for (const e of st.entries(lo, Math.min(last + 1, lo + 1000))) {
          applied = e.index;
          if (e.type !== 'normal' || e.data.length === 0) continue;
          const env = decodeEnvelope(e.data);
          if (env.kind === 'app')
            sm.apply(env.payload, { index: e.index, term: e.term, leaderTimeMs: env.leaderTimeMs });
        }
      }
      members.push({ applied, pools: poolsOf(sm.leases) });
    } finally {
      await ds.close();
    }
  }
  members.sort((a, b) => b.applied - a.applied);
  const merged = new Map<string, LeaseExport['pools'][number]>();
  for (const { pools } of members) {
    for (const p of pools) {
      const m = merged.get(p.app);
      if (!m) {
        merged.set(p.app, p);
        continue;
      }
      // Per worker ID the highest mark and token any member has (a lagging member only lacks later ones).
      const byId = new Map(m.records.map((r) => [r.workerId, r]));
      for (const r of p.records) {
        const o = byId.get(r.workerId);
        const newer = !o || r.token > o.token ? r : o;
        byId.set(r.workerId, {
          ...newer,
          highWaterMs: Math.max(r.highWaterMs, o?.highWaterMs ?? 0),
          token: Math.max(r.token, o?.token ?? 0),
        });
      }
      m.layout ||= p.layout;
      m.records = [...byId.values()].sort((a, b) => a.workerId - b.workerId);
    }
  }
  return {
    format: 'floe-leases',
    version: 1,
    source: dirs,
    pools: [...merged.values()].sort((a, b) => (a.app < b.app ? -1 : a.app > b.app ? 1 : 0)),
  };
}

/**
 * Writes an export into etcd under `prefix`. Per app: the worker records in transactions of at most
 * 100 keys (etcd's default limit is 128 operations), each only if none of its keys exists, then the
 * pool (`meta`, `seq`) only if the app has no pool there yet. An app already in use in etcd is refused,
 * never overwritten. Every record is written free, keeping its high-water mark, last holder and token;
 * the etcd store's tokens continue above the imported ones. Import before starting `--store etcd` nodes.
 */
export async function importIntoEtcd(
  data: LeaseExport,
  endpoints: string[],
  prefix = '/floe',
  security?: EtcdSecurity,
): Promise<{ apps: number; records: number; refused: string[] }> {
  if (data?.format !== 'floe-leases' || data.version !== 1)
    throw new Error('not a Floe lease export (format floe-leases, version 1)');
  const keys = new EtcdKeys(prefix);
  const client = new Etcd3({
    hosts: endpoints,
    ...etcd3SecurityOptions(security),
    defaultCallOptions: () => ({ deadline: Date.now() + 5000 }),
  });
  let apps = 0;
  let records = 0;
  const refused: string[] = [];
  try {
    for (const p of data.pools) {
      const meta: PoolMeta = { bits: p.bits, datacenterBits: p.datacenterBits, layout: p.layout };
      const existing = await client.getAll().prefix(keys.app(p.app)).count();
      if (existing > 0) {
        refused.push(p.app);
        continue;
      }
      let maxToken = 0;
      let ok = true;
      for (let i = 0; i < p.records.length && ok; i += 100) {
        const chunk = p.records
          .slice(i, i + 100)
          .map((raw) => parseRecord(JSON.stringify(raw), `${p.app}/${raw.workerId}`));
        let txn = client.if(keys.worker(p.app, chunk[0]!.workerId), 'Create', '==', 0);
        for (const r of chunk.slice(1)) txn = txn.and(keys.worker(p.app, r.workerId), 'Create', '==', 0);
        const puts = chunk.map((r) => {
          maxToken = Math.max(maxToken, r.token);
          const free: StoredRecord = {
            ...r,
            live: false,
            requestId: '',
            incarnation: '',
            freedAt: r.freedAt || 1,
          };
          return client.put(keys.worker(p.app, r.workerId)).value(JSON.stringify(free));
        });
        ok = (await txn.then(...puts).commit()).succeeded;
      }
      const res = ok
        ? await client
            .if(keys.meta(p.app), 'Create', '==', 0)
            .and(keys.seq(p.app), 'Create', '==', 0)
            .then(
              client.put(keys.meta(p.app)).value(JSON.stringify(meta)),
              client.put(keys.seq(p.app)).value(String(maxToken)),
            )
            .commit()
        : { succeeded: false };
      if (!res.succeeded) {
        refused.push(p.app);
        continue;
      }
      apps++;
      records += p.records.length;
    }
  } finally {
    client.close();
  }
  return { apps, records, refused };
}

export function encodeExport(e: LeaseExport): string {
  return JSON.stringify(e, null, 1);
}

/**
 * Reads every app's pool and worker records from etcd in one range read (one revision), for a move back to the
 * built-in store (or to another installation). Refused while a Floe node is active on `prefix` (its `active` key
 * exists): stop every `--store etcd` node first, so that no mark can rise after the read. Live records are exported
 * as they are; the import writes them free.
 */
export async function exportFromEtcd(
  endpoints: string[],
  prefix = '/floe',
  security?: EtcdSecurity,
): Promise<LeaseExport> {
  const keys = new EtcdKeys(prefix);
  const client = new Etcd3({
    hosts: endpoints,
    ...etcd3SecurityOptions(security),
    defaultCallOptions: () => ({ deadline: Date.now() + 10_000 }),
  });
  try {
    const active = await client.get(keys.active).string();
    if (active !== null)
      throw new Error(
        `a Floe node is still active on ${prefix} (${active}): stop every --store etcd node before exporting`,
      );
    const pools = new Map<string, LeaseExport['pools'][number] & { hasMeta: boolean }>();
    const res = await client.getAll().prefix(keys.apps).exec();
    for (const kv of res.kvs) {
      const key = kv.key.toString();
      const p = keys.parse(key);
      if (!p) continue;
      let e = pools.get(p.app);
      if (!e) {
        e = { app: p.app, bits: 0, datacenterBits: 0, layout: '', records: [], hasMeta: false };
        pools.set(p.app, e);
      }
      if (p.kind === 'meta') {
        const m = parseMeta(kv.value.toString(), key);
        e.bits = m.bits;
        e.datacenterBits = m.datacenterBits;
        e.layout = m.layout;
        e.hasMeta = true;
      } else if (p.kind === 'worker') {
        e.records.push(parseRecord(kv.value.toString(), key));
      }
    }
    const out: LeaseExport['pools'] = [];
    for (const { hasMeta, ...e } of pools.values()) {
      if (!hasMeta)
        throw new Error(`app ${e.app} has worker records but no pool record in etcd (${keys.meta(e.app)})`);
      e.records.sort((a, b) => a.workerId - b.workerId);
      out.push(e);
    }
    out.sort((a, b) => (a.app < b.app ? -1 : a.app > b.app ? 1 : 0));
    return { format: 'floe-leases', version: 1, source: endpoints.map((u) => `${u}${prefix}`), pools: out };
  } finally {
    client.close();
  }
}

/** What importThroughApi needs of HTTP: a JSON call to the target installation (redirects followed). */
export type JsonCall = (
  method: string,
  path: string,
  body?: unknown,
) => Promise<{ status: number; body: Record<string, unknown> }>;

/** JSON over fetch to `base` (e.g. `http://10.0.0.1:7380`), following 307 to the leader. */
export function httpJsonCall(base: string, headers: Record<string, string> = {}): JsonCall {
  return async (method, path, body) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(text) as Record<string, unknown>;
    } catch {
      parsed = { error: 'not_json', message: text.slice(0, 200) };
    }
    return { status: res.status, body: parsed };
  };
}

/**
 * Writes an export into a running Floe installation through its public lease API (any store; made for the built-in
 * one, whose state machine has no import command and whose tokens are its log indexes). Per app:
 *  1. `PUT /v1/apps/:app/pool` with the exported size and datacenter split; an app whose pool already exists there
 *     (`created: false`) is refused and left alone.
 *  2. Acquires worker IDs as `floe-import-<n>` (naming the pinned layout, which pins it) until it holds every worker
 *     ID that has a high-water mark in the export, then releases each with `lastTimestampMs` = that mark: every
 *     worker ID's next holder starts above everything an old holder could have issued.
 *  3. Reads every such record back and checks its mark.
 * Every reply is checked against its request (app, worker ID, nodeId); anything unexpected stops the import with an
 * error naming the app. Marks more than an hour ahead of the target leader's clock are refused by the target
 * (`invalid_argument`): wait, and import again into a fresh target.
 */
export async function importThroughApi(
  data: LeaseExport,
  call: JsonCall,
  log: (line: string) => void = () => {},
): Promise<{ apps: number; records: number; refused: string[] }> {
  if (data?.format !== 'floe-leases' || data.version !== 1)
    throw new Error('not a Floe lease export (format floe-leases, version 1)');
  const enc = encodeURIComponent;
  const fail = (app: string, what: string, r: { status: number; body: unknown }): never => {
    throw new Error(
      `import of app ${app}: ${what} answered ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`,
    );
  };
  let apps = 0;
  let records = 0;
  const refused: string[] = [];
  for (const p of data.pools) {
    const pool = await call('PUT', `/v1/apps/${enc(p.app)}/pool`, {
      bits: p.bits,
      datacenterBits: p.datacenterBits,
    });
    if (pool.status !== 200) fail(p.app, 'PUT pool', pool);
    if (pool.body.created !== true) {
      refused.push(p.app);
      continue;
    }
    const marks = new Map<number, number>();
    for (const r of p.records) {
      const m = Math.max(r.highWaterMs, r.floorMs);
      if (m > 0) marks.set(r.workerId, m);
    }
    const size = 2 ** p.bits;
    const held: { workerId: number; token: number }[] = [];
    const covered = new Set<number>();
    // The layout pin needs one acquire even when no worker ID has a mark.
    const want = Math.max(marks.size, p.layout ? 1 : 0);
    for (let n = 0; covered.size < marks.size || held.length < want; n++) {
      if (n >= size)
        throw new Error(`import of app ${p.app}: could not hold every marked worker ID (pool of ${size})`);
      const nodeId = `floe-import-${n}`;
      const requestId = `floe-import-${p.app}-${n}`;
      const g = await call('POST', `/v1/apps/${enc(p.app)}/workers/acquire`, {
        nodeId,
        requestId,
        incarnation: 'floe-import',
        ttlMs: 600_000,
        ...(p.layout ? { layout: p.layout } : {}),
      });
      if (g.status !== 200) fail(p.app, `acquire as ${nodeId}`, g);
      const w = g.body.workerId;
      const token = g.body.token;
      if (
        g.body.app !== p.app ||
        g.body.nodeId !== nodeId ||
        g.body.requestId !== requestId ||
        !Number.isInteger(w) ||
        !Number.isInteger(token) ||
        (w as number) < 0 ||
        (w as number) >= size
      )
        fail(p.app, `acquire as ${nodeId} (a reply to another request)`, g);
      held.push({ workerId: w as number, token: token as number });
      if (marks.has(w as number)) covered.add(w as number);
    }
    for (const h of held) {
      const last = marks.get(h.workerId) ?? 0;
      const r = await call('POST', `/v1/apps/${enc(p.app)}/workers/${h.workerId}/release`, {
        token: h.token,
        lastTimestampMs: last,
      });
      if (
        r.status !== 200 ||
        r.body.workerId !== h.workerId ||
        r.body.app !== p.app ||
        (r.body.highWaterMs as number) < last
      )
        fail(p.app, `release of worker ID ${h.workerId}`, r);
    }
    for (const [w, m] of marks) {
      const r = await call('GET', `/v1/apps/${enc(p.app)}/workers/${w}`);
      if (
        r.status !== 200 ||
        r.body.workerId !== w ||
        r.body.live !== false ||
        (r.body.highWaterMs as number) < m
      )
        fail(p.app, `read-back of worker ID ${w} (mark ${m})`, r);
    }
    log(`app ${p.app}: pool of ${size}, ${marks.size} worker mark(s) carried, ${held.length} acquire(s)`);
    apps++;
    records += marks.size;
  }
  return { apps, records, refused };
}
