import { Etcd3 } from 'etcd3';
import { decodeEnvelope, unpack } from '../node/envelope.js';
import { FloeStateMachine } from '../state/floe-state-machine.js';
import type { LeaseStateMachine } from '../state/leases/lease-state-machine.js';
import { DurableStorage } from '../storage/durable-storage.js';
import { EtcdKeys, FIELDS, type PoolMeta, parseRecord, recordOf, type StoredRecord } from './etcd/records.js';

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
): Promise<{ apps: number; records: number; refused: string[] }> {
  if (data?.format !== 'floe-leases' || data.version !== 1)
    throw new Error('not a Floe lease export (format floe-leases, version 1)');
  const keys = new EtcdKeys(prefix);
  const client = new Etcd3({ hosts: endpoints, defaultCallOptions: () => ({ deadline: Date.now() + 5000 }) });
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
