import { FloeClientError } from '../client/errors.js';
import { FloeIdError } from '../id/errors.js';
import { LeaseReplyMismatchError, type LeaseService } from '../lease/lease-service.js';
import { NotLeaderError } from '../node/errors.js';
import type { FloeNode } from '../node/node.js';
import {
  SequenceRefusedError,
  SequenceReplyMismatchError,
  type SequenceService,
} from '../sequences/index.js';
import { SnowflakeRefusedError, type SnowflakeService } from '../snowflakes/snowflake-service.js';
import type { AuthStateMachine, Permission } from '../state/auth/index.js';
import type { LeaseError, LeaseGrant } from '../state/leases/index.js';
import { MAX_VALUE, type SequenceInfo } from '../state/sequences/index.js';
import { StoreUnavailableError } from '../store/errors.js';
import type { LeaseStore } from '../store/lease-store.js';
import type { StoreStateNode } from '../store/state-node.js';
import { bugOn } from '../testing/bug-switches.js';
import type { PasswordVerifier } from './auth/password-verifier.js';
import { precheckLease } from './lease-precheck.js';
import {
  BackendError,
  type LeaseReply,
  type RespBackend,
  RespError,
  type RespMember,
  type SequenceBackend,
  type SequenceInfoReply,
  type SnowflakeBackend,
  type WorkerAcquireRequest,
  type WorkerListRequest,
  type WorkerReleaseRequest,
  type WorkerRenewRequest,
} from './resp/index.js';

/** Everything the client-facing servers (RESP and HTTP) share on one node. */
export interface FloeServices {
  node: FloeNode<unknown>;
  leases: LeaseService;
  /** The lease store seam (built-in Raft or etcd); the servers' lease routes go through it. Absent: `leases`. */
  store?: LeaseStore;
  /** Where user and permission changes go (etcd store: an EtcdStateNode). Absent: the Raft node. */
  users?: StoreStateNode;
  /** Absent where a node serves no sequences (some tests). */
  sequences?: SequenceService;
  /** Server-side Snowflake; absent in some tests. */
  snowflakes?: SnowflakeService;
  /** The cluster secret: members may call the lease API as themselves (member-auth.ts). */
  memberSecret?: string;
  /** Password checks off libuv's pool, with back-off and a success cache (absent: auth.verify directly). */
  passwords?: PasswordVerifier;
  auth: AuthStateMachine;
  /** The cluster's UUID once applied here (src/state/cluster): named on every HTTP answer. Absent: never named. */
  clusterUid?: () => string | undefined;
}

/** HTTP status and RESP error code of each lease refusal. */
export const LEASE_ERROR_STATUS: Record<LeaseError['code'], number> = {
  bad_command: 400,
  invalid_argument: 400,
  lease_held: 409,
  pool_busy: 409,
  layout_mismatch: 409,
  pool_split_fixed: 409,
  lease_unhealthy: 409,
  stale_token: 409,
  not_held: 410,
  lease_expired: 410,
  pool_exhausted: 503,
};

export class LeaseRefusedError extends Error {
  constructor(readonly refusal: LeaseError) {
    super(refusal.message);
    this.name = 'LeaseRefusedError';
  }
}

/** Unwraps a lease result: refusals become LeaseRefusedError. */
export function unwrap<T extends { ok: true }>(r: T | LeaseError): T {
  if (!r.ok) throw new LeaseRefusedError(r);
  return r;
}

/** Refusals that fence a renewal's token (the `resp-renew-unchecked` switch answers them as renewed). */
const FENCED: readonly string[] = ['stale_token', 'not_held', 'lease_expired'];

/** The RESP server's view of this node: roles from Raft, leases from the lease service. */
export function respBackendOf(s: FloeServices): RespBackend {
  const { node, auth } = s;
  const leases = s.store ?? s.leases;
  // On the etcd store the node that won the etcd election serves; the others answer MOVED to it.
  const routing = s.store?.routing;
  const reply = (l: LeaseGrant & { expiresAtMs: number }): LeaseReply => ({
    app: l.app,
    workerId: l.workerId,
    datacenterId: l.datacenterId,
    nodeId: l.nodeId,
    token: l.token,
    expiresAtMs: l.expiresAtMs,
    highWaterMs: l.highWaterMs,
    ttlMs: l.ttlMs,
    extra: {
      local_worker_id: l.localWorkerId,
      bound_ms: l.boundMs,
      pool_bits: l.workerBits + l.datacenterBits,
    },
  });
  const call = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof LeaseRefusedError)
        throw new BackendError('ERR', `${err.refusal.code}: ${err.message}`);
      // Already logged by the lease service; never a grant.
      if (err instanceof LeaseReplyMismatchError) throw new BackendError('ERR', err.message);
      if (err instanceof StoreUnavailableError) throw new BackendError('TRYAGAIN', err.message);
      throw err;
    }
  };
  return {
    nodeId: node.id,
    role() {
      if (routing) return routing.isActive() ? 'leader' : 'follower';
      // Called on every keyed command: the leader answers without building a full status
      // (node.status() copies the members list; it was ~4% of the leader's CPU under renewals).
      if (node.isLeader) return 'leader';
      const st = node.status();
      if (st.role === 'leader') return 'leader';
      if (st.conf.learners.includes(node.id)) return 'learner';
      return st.role === 'follower' ? 'follower' : 'candidate';
    },
    leader() {
      const h = routing ? routing.active() : node.leaderHint();
      return h ? { id: h.id, respAddr: h.respAddr } : undefined;
    },
    members(): RespMember[] {
      const st = node.status();
      return st.members.map((m) => ({
        id: m.id,
        respAddr: m.respAddr,
        role: m.id === st.lead ? 'leader' : st.conf.learners.includes(m.id) ? 'learner' : 'follower',
      }));
    },
    term: () => node.status().term,
    appliedIndex: () => node.status().appliedIndex,
    authRequired: () => auth.authEnabled,
    authenticate: async (user, pass, addr) => {
      if (!s.passwords) return auth.verify(user, pass);
      const r = await s.passwords.verify(user, pass, addr ?? '');
      if (r.ok) return true;
      if (r.reason === 'backoff')
        throw new RespError(
          `ERR too many failed authentication attempts from this client or for this user; retry in ${Math.ceil(r.retryAfterMs / 1000)} s`,
        );
      if (r.reason === 'busy') throw new RespError('TRYAGAIN too many password checks queued; retry shortly');
      return false;
    },
    authorize: (user, app, perm) => auth.permits(user, app, perm as Permission),
    ...(s.clusterUid ? { clusterUid: s.clusterUid } : {}),
    workerAcquire: (req: WorkerAcquireRequest) =>
      call(async () => {
        // Nothing the lease state would refuse reaches the log.
        const bad = precheckLease({ op: 'acquire', ...req });
        if (bad) unwrap(bad);
        const r = unwrap(
          await leases.acquire({
            app: req.app,
            nodeId: req.nodeId,
            ttlMs: req.ttlMs,
            requestId: req.requestId,
            incarnation: req.incarnation,
            ...(req.layout === undefined ? {} : { layout: req.layout }),
            ...(req.boundMs === undefined ? {} : { boundMs: req.boundMs }),
          }),
        );
        const out = reply(r);
        // Echoed so that a client can check the grant answers its own request; `layout` is the app's pinned layout
        // ('' while none), as over HTTP.
        return {
          ...out,
          extra: { ...out.extra, request_id: r.requestId, incarnation: r.incarnation, layout: r.layout },
        };
      }),
    workerRenew: (req: WorkerRenewRequest) =>
      call(async () => {
        const bad = precheckLease({
          op: 'renew',
          app: req.app,
          workerId: req.workerId,
          token: Number(req.token),
          boundMs: req.boundMs,
        });
        if (bad) unwrap(bad);
        const renewed = await leases.renew({
          app: req.app,
          workerId: req.workerId,
          token: Number(req.token),
          boundMs: req.boundMs,
        });
        if (!renewed.ok && bugOn('resp-renew-unchecked') && FENCED.includes(renewed.code)) {
          // Test-only bug (src/testing/bug-switches.ts): the renewal is answered from the worker's record, whoever holds
          // it now, as if the token had been checked.
          const w = await leases.get(req.app, req.workerId, { linearizable: false });
          return {
            app: req.app,
            workerId: req.workerId,
            datacenterId: w?.datacenterId ?? 0,
            nodeId: w?.nodeId ?? '',
            token: req.token,
            expiresAtMs: (w?.renewedAtMs ?? 0) + (w?.ttlMs ?? 0),
            highWaterMs: w?.highWaterMs ?? 0,
            ttlMs: w?.ttlMs ?? 0,
            extra: {
              local_worker_id: w?.localWorkerId ?? 0,
              bound_ms: Math.max(req.boundMs ?? 0, w?.highWaterMs ?? 0),
              logged: 0,
            },
          };
        }
        const r = unwrap(renewed);
        const w = await leases.get(req.app, req.workerId, { linearizable: false });
        return {
          app: r.app,
          workerId: r.workerId,
          datacenterId: w?.datacenterId ?? 0,
          nodeId: w?.nodeId ?? '',
          token: r.token,
          expiresAtMs: r.expiresAtMs,
          highWaterMs: w?.highWaterMs ?? r.boundMs,
          ttlMs: r.ttlMs,
          extra: { local_worker_id: w?.localWorkerId ?? 0, bound_ms: r.boundMs, logged: r.logged ? 1 : 0 },
        };
      }),
    workerRelease: (req: WorkerReleaseRequest) =>
      call(async () => {
        const bad = precheckLease({
          op: 'release',
          app: req.app,
          workerId: req.workerId,
          token: Number(req.token),
          lastTimestampMs: req.lastMs,
        });
        if (bad) unwrap(bad);
        unwrap(
          await leases.release({
            app: req.app,
            workerId: req.workerId,
            token: Number(req.token),
            lastTimestampMs: req.lastMs,
          }),
        );
      }),
    workerList: (req: WorkerListRequest) => call(async () => (await leases.list(req.app)).map(reply)),
    onTopologyChange(listener) {
      if (routing) return routing.onChange(listener);
      node.on('role', listener);
      return () => node.off('role', listener);
    },
    ...(s.sequences ? { sequences: sequenceBackendOf(s.sequences) } : {}),
    ...(s.snowflakes ? { snowflakes: snowflakeBackendOf(s.snowflakes) } : {}),
  };
}

/** The RESP server's Snowflake keys: refusals and the SDK's errors become `-ERR` / `-TRYAGAIN` lines. */
export function snowflakeBackendOf(sf: SnowflakeService): SnowflakeBackend {
  const call = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof SnowflakeRefusedError) throw new BackendError('ERR', err.message);
      // The lease could not be had or is gone (cluster away, pool full, deadline): retry shortly.
      if (err instanceof FloeClientError || err instanceof FloeIdError)
        throw new BackendError('TRYAGAIN', err.message);
      throw err;
    }
  };
  return {
    create: (key, layout, ttlMs) => call(() => sf.create(key, layout, ttlMs)),
    info: (key) => sf.info(key),
    next: (key, count) => call(() => sf.next(key, count)),
  };
}

function seqInfoReply(i: SequenceInfo): SequenceInfoReply {
  return { ...i, start: BigInt(i.start), max: BigInt(i.max), next: BigInt(i.next) };
}

/** The RESP server's sequences: refusals become `-ERR <text>` in Redis's words where Redis has them. */
export function sequenceBackendOf(seqs: SequenceService): SequenceBackend {
  const call = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof SequenceRefusedError) {
        const r = err.refusal;
        if (r.code === 'exhausted' && r.message.includes(`max ${MAX_VALUE}`))
          throw new BackendError('ERR', 'increment or decrement would overflow');
        throw new BackendError('ERR', r.message);
      }
      if (err instanceof SequenceReplyMismatchError) throw new BackendError('ERR', err.message);
      throw err;
    }
  };
  return {
    servesLocally: (key) => seqs.servesLocally(key),
    create: (req) =>
      call(async () => {
        const r = await seqs.create(req.key, {
          start: req.start,
          max: req.max,
          step: req.step,
          minStep: req.minStep,
          maxStep: req.maxStep,
          mode: req.mode,
        });
        return { created: r.created, info: seqInfoReply(r.info) };
      }),
    info: (key, stale) =>
      call(async () => {
        const i = await seqs.info(key, { stale });
        return i ? seqInfoReply(i) : undefined;
      }),
    list: (stale) => call(async () => (await seqs.list({ stale })).map(seqInfoReply)),
    delete: (key) =>
      call(async () => {
        try {
          await seqs.delete(key);
          return true;
        } catch (err) {
          if (err instanceof SequenceRefusedError && err.refusal.code === 'not_found') return false;
          throw err;
        }
      }),
    incrBy: (key, count, opts) => call(() => seqs.incrBy(key, count, opts)),
    incrByNow: (key, count, arrivedAt) => seqs.incrByNow(key, count, arrivedAt),
    incrRepeatedNow: (key, count, times, arrivedAt) => seqs.incrRepeatedNow(key, count, times, arrivedAt),
    get: (key) =>
      call(async () => {
        try {
          return await seqs.get(key);
        } catch (err) {
          if (err instanceof SequenceRefusedError && err.refusal.code === 'not_found') return undefined;
          throw err;
        }
      }),
    alloc: (key, count) =>
      call(async () => {
        const r = await seqs.alloc(key, count);
        return { start: BigInt(r.start), end: BigInt(r.end) };
      }),
  };
}

/** Parses `Authorization: Basic base64(user:password)`. */
export function basicCredentials(header: string | undefined): { user: string; password: string } | undefined {
  if (!header?.startsWith('Basic ')) return undefined;
  const raw = Buffer.from(header.slice(6), 'base64').toString('utf8');
  const i = raw.indexOf(':');
  if (i <= 0) return undefined;
  return { user: raw.slice(0, i), password: raw.slice(i + 1) };
}

export { NotLeaderError };
