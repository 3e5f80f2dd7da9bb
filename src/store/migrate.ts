import { Etcd3 } from 'etcd3';
import { CLUSTER_UID_HEADER } from '../client/cluster-pin.js';
import { decodeEnvelope, pack, unpack } from '../node/envelope.js';
import { FloeStateMachine } from '../state/floe-state-machine.js';
import type { LeaseStateMachine } from '../state/leases/lease-state-machine.js';
import { SequenceStateMachine } from '../state/sequences/index.js';
import type { SequenceCommand } from '../state/sequences/types.js';
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
 * Moving worker-ID leases and sequences between the built-in store and etcd (docs/etcd-store.md, "Moving
 * between stores").
 *
 * What must survive a move is every worker ID's **high-water mark** (the next holder's floor) and a token
 * above every token granted before; live leases need not: the export is taken from stopped members, so
 * their holders stop at their own deadlines, and the import writes every record free. For sequences it is
 * every key's **high-water mark** (`highWater`: the end of the last segment allocated, i.e. the first value
 * never handed to any segment), of live keys and of deleted ones (tombstones): the new store must never
 * allocate a value below it for that key.
 */
export interface LeaseExport {
  format: 'floe-leases';
  /** 2 added sequences and tombstones; a version-1 file (no sequences) is refused by the imports. */
  version: 2;
  /** Where it came from (data directories), for people. */
  source: string[];
  pools: { app: string; bits: number; datacenterBits: number; layout: string; records: StoredRecord[] }[];
  /** Live sequences: configuration and high-water mark (64-bit values as decimal strings). */
  sequences: SequenceExport[];
  /** Deleted sequences: a re-created key must start at or above this mark. */
  tombstones: { key: string; highWater: string }[];
}

/** A sequence's configuration (as its create command carries it) and its allocation state. */
export interface SequenceExport extends Omit<Extract<SequenceCommand, { op: 'create' }>, 'op'> {
  /** The first value no segment was allocated from (every value ever issued is below it). */
  highWater: string;
  allocations: number;
}

/** The sequence state machine's snapshot layout (version 1, src/state/sequences/sequence-state-machine.ts). */
type SnapshotSeq = [string, string, string, number, number, number, 'strict' | 'node', string, number];
interface SeqSnapshot {
  v: number;
  seqs: SnapshotSeq[];
  tombs: [string, string][];
}

function checkVersion(data: LeaseExport): void {
  const v = (data as { version?: unknown } | undefined)?.version;
  if (data?.format === 'floe-leases' && v === 1)
    throw new Error(
      'this is a version-1 export, which carries no sequences: export again with this version of store-migrate.ts',
    );
  if (
    data?.format !== 'floe-leases' ||
    v !== 2 ||
    !Array.isArray(data.sequences) ||
    !Array.isArray(data.tombstones)
  )
    throw new Error('not a Floe export (format floe-leases, version 2)');
}

/** Live sequences and tombstones of a sequence state machine (restored through it, so its version is checked). */
function sequencesOf(sm: SequenceStateMachine): Pick<LeaseExport, 'sequences' | 'tombstones'> {
  const s = unpack<SeqSnapshot>(sm.snapshot());
  const sequences = s.seqs.map(([key, start, max, step, minStep, maxStep, mode, next, allocations]) => ({
    key,
    start,
    max,
    step,
    minStep,
    maxStep,
    mode,
    highWater: next,
    allocations,
  }));
  const tombstones = s.tombs.map(([key, next]) => ({ key, highWater: next }));
  return { sequences: sequences.sort(byKey), tombstones: tombstones.sort(byKey) };
}

function byKey(a: { key: string }, b: { key: string }): number {
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

const big = (v: string, what: string): bigint => {
  if (typeof v !== 'string' || !/^-?\d{1,20}$/.test(v))
    throw new Error(`${what} is not a decimal integer string`);
  return BigInt(v);
};

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
  const members: {
    applied: number;
    pools: LeaseExport['pools'];
    seqs: Pick<LeaseExport, 'sequences' | 'tombstones'>;
  }[] = [];
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
      members.push({ applied, pools: poolsOf(sm.leases), seqs: sequencesOf(sm.sequences) });
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
  // Sequences: per key the most advanced member's state (live with its configuration, or deleted), and the
  // highest mark any member has (a lagging member only lacks later allocations).
  const seqs = new Map<string, SequenceExport>();
  const tombs = new Map<string, bigint>();
  const marks = new Map<string, bigint>();
  const raise = (key: string, v: string) => {
    const m = big(v, `high-water mark of sequence ${key}`);
    if (m > (marks.get(key) ?? -(1n << 64n))) marks.set(key, m);
  };
  for (const { seqs: m } of members) {
    for (const q of m.sequences) {
      raise(q.key, q.highWater);
      if (!seqs.has(q.key) && !tombs.has(q.key)) seqs.set(q.key, { ...q });
    }
    for (const t of m.tombstones) {
      raise(t.key, t.highWater);
      if (!seqs.has(t.key) && !tombs.has(t.key)) tombs.set(t.key, 0n);
    }
  }
  for (const q of seqs.values()) q.highWater = String(marks.get(q.key));
  return {
    format: 'floe-leases',
    version: 2,
    source: dirs,
    pools: [...merged.values()].sort((a, b) => (a.app < b.app ? -1 : a.app > b.app ? 1 : 0)),
    sequences: [...seqs.values()].sort(byKey),
    tombstones: [...tombs.keys()].map((key) => ({ key, highWater: String(marks.get(key)) })).sort(byKey),
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
): Promise<{ apps: number; records: number; sequences: number; refused: string[] }> {
  checkVersion(data);
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
    const seq = await importSequencesIntoEtcd(client, keys, data);
    refused.push(...seq.refused);
    return { apps, records, sequences: seq.sequences, refused };
  } finally {
    client.close();
  }
}

/**
 * Writes the export's sequences into the sequence state's key (`<prefix>/sequences`, one snapshot of the sequence
 * state machine, as the etcd store keeps it): every live sequence with its configuration and `next` = its old
 * high-water mark, every tombstone with its mark. A key the target already has live is refused (named in
 * `refused`); a target tombstone is kept at the higher of the two marks. One transaction, only if the key did not
 * change since it was read and no Floe node is active on the prefix. The written state is restored and checked:
 * every carried key's next value is at or above its old mark.
 */
async function importSequencesIntoEtcd(
  client: Etcd3,
  keys: EtcdKeys,
  data: LeaseExport,
): Promise<{ sequences: number; refused: string[] }> {
  if (data.sequences.length === 0 && data.tombstones.length === 0) return { sequences: 0, refused: [] };
  const seqKey = `${keys.prefix}/sequences`;
  const kv = (await client.get(seqKey).exec()).kvs[0];
  const current = new SequenceStateMachine();
  if (kv) current.restore(new Uint8Array(kv.value)); // checks the format version
  const snap = unpack<SeqSnapshot>(current.snapshot());
  const live = new Set(snap.seqs.map((q) => q[0]));
  const tombs = new Map(snap.tombs.map(([k, n]) => [k, BigInt(n)]));
  const refused: string[] = [];
  const want = new Map<string, bigint>();
  for (const q of data.sequences) {
    const mark = big(q.highWater, `high-water mark of sequence ${q.key}`);
    if (live.has(q.key)) {
      refused.push(`sequence ${JSON.stringify(q.key)} (already in etcd; old high-water ${mark})`);
      continue;
    }
    const t = tombs.get(q.key);
    tombs.delete(q.key);
    const next = t !== undefined && t > mark ? t : mark;
    snap.seqs.push([
      q.key,
      String(big(q.start, `start of sequence ${q.key}`)),
      String(big(q.max, `max of sequence ${q.key}`)),
      q.step,
      q.minStep,
      q.maxStep,
      q.mode,
      String(next),
      q.allocations,
    ]);
    live.add(q.key);
    want.set(q.key, mark);
  }
  for (const t of data.tombstones) {
    const mark = big(t.highWater, `high-water mark of deleted sequence ${t.key}`);
    if (live.has(t.key)) {
      if (!want.has(t.key))
        refused.push(`deleted sequence ${JSON.stringify(t.key)} (live in etcd; old high-water ${mark})`);
      continue;
    }
    const have = tombs.get(t.key);
    tombs.set(t.key, have !== undefined && have > mark ? have : mark);
  }
  snap.tombs = [...tombs].map(([k, n]) => [k, String(n)]);
  const written = new SequenceStateMachine();
  written.restore(pack(snap));
  for (const [key, mark] of want) {
    const got = written.get(key);
    if (!got || BigInt(got.next) < mark)
      throw new Error(
        `sequence ${JSON.stringify(key)}: the state to write would continue below its mark ${mark}`,
      );
  }
  const res = await client
    .if(keys.active, 'Create', '==', 0)
    .and(seqKey, 'Mod', '==', kv ? kv.mod_revision : '0')
    .then(client.put(seqKey).value(Buffer.from(written.snapshot())))
    .commit();
  if (!res.succeeded)
    throw new Error(
      `${seqKey} changed during the import, or a Floe node is active on ${keys.prefix}: stop every --store etcd node and import again`,
    );
  return { sequences: want.size, refused };
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
    // The sequence state: one snapshot in `<prefix>/sequences`, read at the same revision as the pools.
    const seqKey = `${prefix}/sequences`;
    const seqKv = (await client.get(seqKey).revision(res.header.revision).exec()).kvs[0];
    const sm = new SequenceStateMachine();
    if (seqKv) sm.restore(new Uint8Array(seqKv.value));
    return {
      format: 'floe-leases',
      version: 2,
      source: endpoints.map((u) => `${u}${prefix}`),
      pools: out,
      ...sequencesOf(sm),
    };
  } finally {
    client.close();
  }
}

/** What importThroughApi needs of HTTP: a JSON call to the target installation (redirects followed). */
export type JsonCall = (
  method: string,
  path: string,
  body?: unknown,
  /** The cluster the call is meant for: sent as `floe-cluster`, so a node of another cluster refuses it (421). */
  cluster?: string,
) => Promise<{
  status: number;
  body: Record<string, unknown>;
  /** The answer's `floe-cluster` header (null: none; absent: a call that cannot see headers). */
  cluster?: string | null;
}>;

/** JSON over fetch to `base` (e.g. `http://10.0.0.1:7380`), following 307 to the leader. */
export function httpJsonCall(base: string, headers: Record<string, string> = {}): JsonCall {
  return async (method, path, body, cluster) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: {
        ...headers,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(cluster === undefined ? {} : { [CLUSTER_UID_HEADER]: cluster }),
      },
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
    return { status: res.status, body: parsed, cluster: res.headers.get(CLUSTER_UID_HEADER) };
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
  rawCall: JsonCall,
  log: (line: string) => void = () => {},
  opts: { clusterWaitMs?: number; retryMs?: number } = {},
): Promise<{ apps: number; records: number; sequences: number; refused: string[] }> {
  checkVersion(data);
  const retryMs = opts.retryMs ?? 500;
  // Lease calls and allocations answer 503 not_ready until the target knows its cluster UUID (docs/cluster-identity.md):
  // wait for it before changing anything, and retry that answer on every call, so an import never stops half-way on
  // a fresh target (review 2 of the cluster identity, finding 4).
  const target = await waitForClusterUid(rawCall, opts.clusterWaitMs ?? 30_000, retryMs, log);
  // Every answer must come from the target's cluster: a redirect to a stale leader address may reach another one,
  // which would take the marks while the target got none (review 3 of the cluster identity, finding 1).
  const call: JsonCall = async (method, path, body) => {
    for (let tries = 0; ; tries++) {
      const r = await rawCall(method, path, body, target);
      if (target !== undefined && r.cluster !== undefined && r.cluster !== target)
        throw new Error(
          `${method} ${path} was answered by cluster ${r.cluster ?? 'none'}, not the target's ${target} ` +
            '(a redirect reached another cluster?): import stopped',
        );
      if (r.status !== 503 || r.body.error !== 'not_ready' || tries >= 60) return r;
      await new Promise((res) => setTimeout(res, retryMs));
    }
  };
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
  let sequences = 0;
  for (const q of data.sequences) {
    if (await carrySequence(call, q, big(q.highWater, `high-water mark of sequence ${q.key}`), false, log))
      sequences++;
    else
      refused.push(
        `sequence ${JSON.stringify(q.key)} (already on the target; old high-water ${q.highWater})`,
      );
  }
  for (const t of data.tombstones) {
    const q = { key: t.key, highWater: t.highWater };
    if (
      !(await carrySequence(
        call,
        q,
        big(t.highWater, `high-water mark of deleted sequence ${t.key}`),
        true,
        log,
      ))
    )
      refused.push(
        `deleted sequence ${JSON.stringify(t.key)} (live on the target; old high-water ${t.highWater})`,
      );
  }
  return { apps, records, sequences, refused };
}

/**
 * Waits until the target names its cluster UUID (`GET /v1/cluster`) and returns it; undefined for a target that
 * predates it (no field).
 */
async function waitForClusterUid(
  call: JsonCall,
  waitMs: number,
  retryMs: number,
  log: (line: string) => void,
): Promise<string | undefined> {
  const deadline = Date.now() + waitMs;
  for (let logged = false; ; ) {
    const r = await call('GET', '/v1/cluster');
    if (r.status === 200 && !('cluster' in r.body)) return undefined;
    if (r.status === 200 && typeof r.body.cluster === 'string') return r.body.cluster;
    if (Date.now() >= deadline)
      throw new Error(
        `the target does not know its cluster UUID after ${waitMs} ms (GET /v1/cluster answered ${r.status} ` +
          `${JSON.stringify(r.body).slice(0, 200)}): nothing was imported; is a leader elected?`,
      );
    if (!logged) log('waiting for the target to know its cluster UUID (its first leader mints it)');
    logged = true;
    await new Promise((res) => setTimeout(res, retryMs));
  }
}

/**
 * Recreates one sequence through `POST /v1/sequences` with START = its old high-water mark (its configuration
 * otherwise as exported; a tombstone with the defaults), so the first value the target allocates is the mark, above
 * every value issued before. A mark above MAX (an exhausted sequence) cannot be a START: the sequence is created at
 * MAX and that last value allocated (`/alloc`, held by the import, never issued). A tombstone is then deleted again
 * (the target keeps its mark). Then `GET /v1/sequences/:key` checks that the next value is at or above the mark.
 * Every reply is checked against its request. Returns false when the key already exists on the target (left alone).
 */
async function carrySequence(
  call: JsonCall,
  q: Partial<SequenceExport> & { key: string; highWater: string },
  mark: bigint,
  deleted: boolean,
  log: (line: string) => void,
): Promise<boolean> {
  const path = `/v1/sequences/${encodeURIComponent(q.key)}`;
  const what = `${deleted ? 'deleted sequence' : 'sequence'} ${JSON.stringify(q.key)} (old high-water ${mark})`;
  const fail = (step: string, r: { status: number; body: unknown }): never => {
    throw new Error(
      `import of ${what}: ${step} answered ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`,
    );
  };
  const max = q.max === undefined ? (1n << 63n) - 1n : big(q.max, `max of sequence ${q.key}`);
  const start = mark > max ? max : mark;
  const body = {
    key: q.key,
    start: String(start),
    ...(q.max === undefined ? {} : { max: q.max }),
    ...(q.step === undefined ? {} : { step: q.step, minStep: q.minStep, maxStep: q.maxStep }),
    ...(q.mode === undefined ? {} : { mode: q.mode }),
  };
  const c = await call('POST', '/v1/sequences', body);
  if ((c.status === 409 && c.body.error === 'exists') || (c.status === 200 && c.body.created === false))
    return false;
  if (
    c.status !== 201 ||
    c.body.created !== true ||
    c.body.key !== q.key ||
    (q.mode !== undefined && c.body.mode !== q.mode) ||
    typeof c.body.next !== 'string' ||
    BigInt(c.body.next) < start
  )
    fail(`create with start ${start}`, c);
  if (mark > max) {
    const a = await call('POST', `${path}/alloc`, { count: 1 });
    if (a.status !== 200 || a.body.key !== q.key || a.body.end !== String(max + 1n))
      fail(`allocation of its last value ${max}`, a);
  }
  if (deleted) {
    const d = await call('DELETE', path);
    if (d.status !== 200 || d.body.deleted !== true || d.body.key !== q.key) fail('delete', d);
    log(`${what}: tombstone carried`);
    return true;
  }
  const r = await call('GET', path);
  if (
    r.status !== 200 ||
    r.body.key !== q.key ||
    typeof r.body.next !== 'string' ||
    BigInt(r.body.next) < mark
  )
    fail('read-back', r);
  log(`${what}: recreated, next value ${r.body.next}`);
  return true;
}
