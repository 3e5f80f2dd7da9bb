import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { type HostPort, type HostPortRules, parseHostPort as parseAddress } from '../net/host-port.js';
import type { NodeId } from '../raft/types.js';
import { ETCD_SECURITY_FLAGS, type EtcdSecurity, parseEtcdSecurity } from '../store/etcd/etcd-security.js';
import type { MemberInfo } from './members.js';

/**
 * Everything `floe serve` needs. Defaults give a working single-node Floe:
 * node 1, data in ./floe-data/node-1, peers on 127.0.0.1:7390, HTTP on 127.0.0.1:7380,
 * RESP on 127.0.0.1:7379.
 */
export interface ServeConfig {
  nodeId: NodeId;
  dataDir: string;
  /** Where this node listens for Raft peers. */
  peerAddr: string;
  /** HTTP admin/API listener. */
  httpAddr: string;
  /** RESP listener (Redis protocol). */
  respAddr: string;
  /** Members of a new cluster: id → peer address. Must include this node. */
  initialCluster: MemberInfo[];
  /**
   * 'new' bootstraps a cluster from initialCluster; 'existing' joins a running cluster (after
   * `floe cluster add`): the membership then comes from the leader.
   */
  initialClusterState: 'new' | 'existing';
  /** Shared secret every peer proves in the handshake. Required for clusters of more than one node. */
  clusterSecret: string | undefined;
  /** Distinguishes clusters that share hosts; peers of another cluster are refused. */
  clusterId: string;
  tickMs: number;
  electionTicks: number;
  snapshotEvery: number;
  /** Log entries kept behind each snapshot so slightly lagging followers get entries, not a snapshot. */
  snapshotTrailing: number;
  /**
   * INCR / SEQ.ALLOC on a missing sequence creates it with the defaults (start 1, step 1,000, strict)
   * when true. Off by default: a typo in a key must not silently start a new sequence.
   */
  seqAutoCreate: boolean;
  /**
   * Serve strict sequence values from the Raft leader lease instead of a ReadIndex round per batch (decision 0009):
   * no round trip to the followers, at the price of a clock assumption (every member's clock rate within ±10 %, and a
   * machine suspend visible on the wall clock). Off by default; set it on every member.
   */
  leaderLease: boolean;
  /**
   * Where this platform or file system has no kernel file lock for the data directory: undefined (default) refuses
   * to start; 'pid-file' opts in to the weaker PID rule (docs/storage.md, "The lock").
   */
  storageLock?: 'pid-file';
  /**
   * Take a LOCK in the old format (a bare PID: an older Floe version, or --storage-lock pid-file) once, for the
   * upgrade after every such process was stopped; default false: such a LOCK refuses the start.
   */
  takeLegacyLock?: boolean;
  logLevel: string;
  /**
   * The audit trail (docs/audit.md): ClickHouse to write to, or undefined for the embedded default (CRC-framed files
   * under `<dataDir>/audit`, shipped later with `floe audit replay`).
   */
  audit: { clickhouse?: { url: string; user?: string; password?: string; database?: string } };
  /** TLS for clients on the RESP and HTTP ports (docs/tls.md); undefined = plaintext. Paths are absolute. */
  tls?: { cert: string; key: string; ca?: string; clientAuth: 'none' | 'request' | 'require' };
  /** Mutual TLS between peers, inside which the cluster-secret handshake runs (docs/tls.md). */
  peerTls?: { cert: string; key: string; ca: string };
  /**
   * Where worker-ID leases live (docs/etcd-store.md): the built-in Raft log (default) or an etcd cluster
   * (`endpoints` as http(s) URLs; `prefix` of this installation's keys).
   */
  store?: { kind: 'raft' } | { kind: 'etcd'; endpoints: string[]; prefix: string; security?: EtcdSecurity };
}

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export const DEFAULTS = {
  nodeId: 1,
  peerAddr: '127.0.0.1:7390',
  httpAddr: '127.0.0.1:7380',
  respAddr: '127.0.0.1:7379',
  clusterId: 'floe',
  tickMs: 50,
  electionTicks: 10,
  snapshotEvery: 10_000,
  snapshotTrailing: 5_000,
  logLevel: 'info',
};

/**
 * A `host:port` flag (src/net/host-port.ts has the rules); a ConfigError naming the flag. Port 0 is
 * allowed only where `rules.allowPortZero` says so (addresses to listen on).
 */
export function parseHostPort(flag: string, value: string, rules: HostPortRules = {}): HostPort {
  try {
    return parseAddress(value, flag, rules);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
}

export function parseNodeId(flag: string, value: string | number): NodeId {
  const n = typeof value === 'number' ? value : Number(value);
  if (!Number.isSafeInteger(n) || n < 1)
    throw new ConfigError(`${flag} must be a positive integer (got "${value}")`);
  return n;
}

/** "1=10.0.0.1:7390,2=10.0.0.2:7390" → members. */
export function parseInitialCluster(value: string): MemberInfo[] {
  const members: MemberInfo[] = [];
  const seen = new Set<NodeId>();
  for (const part of value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const eq = part.indexOf('=');
    if (eq <= 0) throw new ConfigError(`--initial-cluster entries must be ID=HOST:PORT (got "${part}")`);
    const id = parseNodeId('--initial-cluster member id', part.slice(0, eq));
    const addr = part.slice(eq + 1);
    parseHostPort(`--initial-cluster address of member ${id}`, addr);
    if (seen.has(id)) throw new ConfigError(`--initial-cluster names member ${id} twice`);
    seen.add(id);
    members.push({ id, peerAddr: addr });
  }
  if (members.length === 0) throw new ConfigError('--initial-cluster names no members');
  return members;
}

export type RawServeOptions = Partial<
  Record<keyof ServeConfig | 'config', string | number | boolean | undefined>
>;

function bool(name: string, v: unknown): boolean {
  if (v === undefined || v === false || v === 'false') return false;
  if (v === true || v === 'true') return true;
  throw new ConfigError(`${name} must be true or false (got "${String(v)}")`);
}

/** Listen addresses may ask for any free port (0). */
const LISTEN: HostPortRules = { allowPortZero: true };

/** Flags beat the config file, which beats environment defaults, which beat built-in defaults. */
export function resolveServeConfig(
  flags: RawServeOptions,
  env: NodeJS.ProcessEnv = process.env,
): ServeConfig {
  let file: RawServeOptions = {};
  if (flags.config) {
    const path = String(flags.config);
    try {
      file = JSON.parse(readFileSync(path, 'utf8')) as RawServeOptions;
    } catch (err) {
      throw new ConfigError(`cannot read config file ${path}: ${(err as Error).message}`);
    }
  }
  const pick = (k: keyof ServeConfig) => flags[k] ?? file[k];
  const nodeId = parseNodeId('--node-id', (pick('nodeId') as string | number | undefined) ?? DEFAULTS.nodeId);
  const peerAddr = String(pick('peerAddr') ?? DEFAULTS.peerAddr);
  const httpAddr = String(pick('httpAddr') ?? DEFAULTS.httpAddr);
  const respAddr = String(pick('respAddr') ?? DEFAULTS.respAddr);
  parseHostPort('--peer-addr', peerAddr, LISTEN);
  parseHostPort('--http-addr', httpAddr, LISTEN);
  parseHostPort('--resp-addr', respAddr, LISTEN);
  const initial = pick('initialCluster');
  const initialCluster = initial ? parseInitialCluster(String(initial)) : [{ id: nodeId, peerAddr }];
  if (!initialCluster.some((m) => m.id === nodeId)) {
    throw new ConfigError(`--initial-cluster does not include this node (--node-id ${nodeId})`);
  }
  const state = String(pick('initialClusterState') ?? 'new');
  if (state !== 'new' && state !== 'existing') {
    throw new ConfigError(`--initial-cluster-state must be new or existing (got "${state}")`);
  }
  const secret = pick('clusterSecret') ?? env.FLOE_CLUSTER_SECRET;
  if (initialCluster.length > 1 && !secret) {
    throw new ConfigError('a cluster of more than one node needs --cluster-secret (or FLOE_CLUSTER_SECRET)');
  }
  if (secret !== undefined && String(secret).length < 16) {
    throw new ConfigError('--cluster-secret must be at least 16 characters (32 random bytes recommended)');
  }
  const num = (k: keyof ServeConfig, d: number, min: number) => {
    const v = Number(pick(k) ?? d);
    if (!Number.isSafeInteger(v) || v < min)
      throw new ConfigError(`${k} must be an integer >= ${min} (got "${pick(k)}")`);
    return v;
  };
  return {
    nodeId,
    dataDir: resolve(String(pick('dataDir') ?? `floe-data/node-${nodeId}`)),
    peerAddr,
    httpAddr,
    respAddr,
    initialCluster,
    initialClusterState: state,
    clusterSecret: secret === undefined ? undefined : String(secret),
    clusterId: String(pick('clusterId') ?? DEFAULTS.clusterId),
    tickMs: num('tickMs', DEFAULTS.tickMs, 1),
    electionTicks: num('electionTicks', DEFAULTS.electionTicks, 3),
    snapshotEvery: num('snapshotEvery', DEFAULTS.snapshotEvery, 10),
    snapshotTrailing: num('snapshotTrailing', DEFAULTS.snapshotTrailing, 0),
    seqAutoCreate: bool('seqAutoCreate', pick('seqAutoCreate')),
    leaderLease: bool('leaderLease', pick('leaderLease')),
    ...storageLockConfig(pick('storageLock')),
    ...(bool('takeLegacyLock', pick('takeLegacyLock')) ? { takeLegacyLock: true } : {}),
    logLevel: String(pick('logLevel') ?? env.FLOE_LOG_LEVEL ?? DEFAULTS.logLevel),
    audit: auditConfig(
      (k) =>
        (flags as Record<string, unknown>)[k] ??
        (file as Record<string, unknown>)[k] ??
        (k === 'auditPassword' ? env.FLOE_AUDIT_PASSWORD : undefined),
    ),
    ...tlsConfig((k) => (flags as Record<string, unknown>)[k] ?? (file as Record<string, unknown>)[k]),
    store: storeConfig(
      (k) => (flags as Record<string, unknown>)[k] ?? (file as Record<string, unknown>)[k],
      env,
    ),
  };
}

/** `--store raft|etcd`, `--etcd-endpoints http://a:2379,...`, `--etcd-prefix /floe`. */
function storageLockConfig(v: unknown): Pick<ServeConfig, 'storageLock'> {
  if (v === undefined || v === 'kernel') return {};
  if (v === 'pid-file') return { storageLock: 'pid-file' };
  throw new ConfigError(`storageLock must be kernel or pid-file (got "${String(v)}")`);
}

function storeConfig(
  pick: (k: string) => unknown,
  env: NodeJS.ProcessEnv,
): NonNullable<ServeConfig['store']> {
  const kind = String(pick('store') ?? 'raft');
  const raw = pick('etcdEndpoints');
  if (kind === 'raft') {
    if (raw !== undefined) throw new ConfigError('--etcd-endpoints needs --store etcd');
    for (const [k, flag] of ETCD_SECURITY_FLAGS)
      if (pick(k) !== undefined) throw new ConfigError(`${flag} needs --store etcd`);
    return { kind };
  }
  if (kind !== 'etcd') throw new ConfigError(`--store must be raft or etcd (got "${kind}")`);
  const list = Array.isArray(raw) ? raw.map(String) : raw === undefined ? [] : String(raw).split(',');
  const endpoints = list.map((e) => e.trim()).filter((e) => e !== '');
  if (endpoints.length === 0)
    throw new ConfigError('--store etcd needs --etcd-endpoints http://host:2379[,http://host2:2379...]');
  for (const e of endpoints) {
    let u: URL | undefined;
    try {
      u = new URL(e);
    } catch {}
    if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:') || !u.port)
      throw new ConfigError(
        `--etcd-endpoints: ${JSON.stringify(e)} is not a URL such as http://127.0.0.1:2379`,
      );
  }
  const prefix = String(pick('etcdPrefix') ?? '/floe');
  if (!/^\/[A-Za-z0-9._/-]{0,120}$/.test(prefix) || prefix.endsWith('/'))
    throw new ConfigError(`--etcd-prefix must look like /floe (got "${prefix}")`);
  // --etcd-ca/-cert/-key/-user/-password (src/store/etcd/etcd-security.ts).
  const security = parseEtcdSecurity(pick, endpoints, env);
  if ('error' in security) throw new ConfigError(security.error);
  return { kind: 'etcd', endpoints, prefix, security: security.ok };
}

/** `--tls-*` and `--peer-tls-*` (camelCase in the config file): both halves of a pair, known values. */
function tlsConfig(pick: (k: string) => unknown): Pick<ServeConfig, 'tls' | 'peerTls'> {
  const path = (k: string) => {
    const v = pick(k);
    return v === undefined || v === '' ? undefined : resolve(String(v));
  };
  const out: Pick<ServeConfig, 'tls' | 'peerTls'> = {};
  const cert = path('tlsCert');
  const key = path('tlsKey');
  const ca = path('tlsCa');
  const authRaw = pick('tlsClientAuth');
  const clientAuth = String(authRaw ?? 'none');
  if (clientAuth !== 'none' && clientAuth !== 'request' && clientAuth !== 'require')
    throw new ConfigError(`--tls-client-auth must be none, request or require (got "${clientAuth}")`);
  if ((cert === undefined) !== (key === undefined))
    throw new ConfigError('--tls-cert and --tls-key go together: give both or neither');
  if (cert === undefined && (ca !== undefined || authRaw !== undefined))
    throw new ConfigError(
      `${ca !== undefined ? '--tls-ca' : '--tls-client-auth'} needs --tls-cert and --tls-key`,
    );
  if (clientAuth !== 'none' && ca === undefined)
    throw new ConfigError(
      `--tls-client-auth ${clientAuth} needs --tls-ca (the CA that signs client certificates)`,
    );
  if (cert !== undefined && key !== undefined) out.tls = { cert, key, ...(ca ? { ca } : {}), clientAuth };
  const pcert = path('peerTlsCert');
  const pkey = path('peerTlsKey');
  const pca = path('peerTlsCa');
  const given = [pcert, pkey, pca].filter((v) => v !== undefined).length;
  if (given > 0 && given < 3)
    throw new ConfigError(
      '--peer-tls-cert, --peer-tls-key and --peer-tls-ca go together: give all three or none',
    );
  if (pcert && pkey && pca) out.peerTls = { cert: pcert, key: pkey, ca: pca };
  return out;
}

function auditConfig(pick: (k: string) => unknown): ServeConfig['audit'] {
  const url = pick('auditClickhouse');
  const others = ['auditUser', 'auditPassword', 'auditDatabase'].filter((k) => pick(k) !== undefined);
  if (url === undefined) {
    if (others.length > 0)
      throw new ConfigError(`${others[0]} needs auditClickhouse (--audit-clickhouse URL)`);
    return {};
  }
  const u = String(url);
  let parsed: URL;
  try {
    parsed = new URL(u);
  } catch {
    throw new ConfigError(
      `auditClickhouse must be an http(s) URL such as http://127.0.0.1:8123 (got "${u}")`,
    );
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new ConfigError(
      `auditClickhouse must be an http(s) URL such as http://127.0.0.1:8123 (got "${u}")`,
    );
  const opt = (k: string) => (pick(k) === undefined ? {} : { [k.slice(5).toLowerCase()]: String(pick(k)) });
  return { clickhouse: { url: u, ...opt('auditUser'), ...opt('auditPassword'), ...opt('auditDatabase') } };
}
