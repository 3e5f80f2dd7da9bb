import type { Layout } from '../id/index.js';
import type {
  AcquireRequest,
  LeaseListing,
  LeaseService,
  ReleaseRequest,
  RenewRequest,
  ServiceRenewOk,
} from '../lease/lease-service.js';
import type { WhoisAnswer } from '../lease/whois.js';
import type { LeaderHint } from '../node/errors.js';
import type {
  AcquireOk,
  ConfigurePoolOk,
  LeaseError,
  LeaseStateMachine,
  PoolInfo,
  ReleaseOk,
  WorkerInfo,
} from '../state/leases/index.js';

export type { AcquireRequest, LeaseListing, ReleaseRequest, RenewRequest, ServiceRenewOk };

/** A worker ID's record as `get` answers it: live or free, with the active node's remaining time when live. */
export type WorkerRecordReply = WorkerInfo & { remainingMs: number | undefined };

/** Which store keeps the lease state: the built-in Raft log, or an etcd cluster. */
export type StoreKind = 'raft' | 'etcd';

/**
 * Who serves lease calls when that is not decided by this node's Raft role (the etcd store: the
 * node that won the etcd election). Servers ask it for their MOVED / 307 answers.
 */
export interface StoreRouting {
  /** True while this node is the active one and may serve lease calls. */
  isActive(): boolean;
  /** The active node as far as this node knows (undefined during an election). */
  active(): LeaderHint | undefined;
  /** Called on every change of the active node (or of this node's standing). Returns an unsubscribe. */
  onChange(cb: () => void): () => void;
}

/**
 * The store seam for worker-ID leases: every server (RESP, HTTP) and the node's own services call
 * leases through it, whatever keeps the state. Both implementations give the same results and
 * refusals (the shapes of src/state/leases/types.ts), decided by the same rules: the built-in store
 * applies commands to the LeaseStateMachine through the Raft log, the etcd store applies the same
 * LeaseStateMachine to records it loaded from etcd and writes the result back with a guarded
 * transaction (docs/decisions/0005-etcd-store.md).
 *
 * Calls on a node that may not serve them throw NotLeaderError (with the leader/active node's
 * addresses when known): servers answer MOVED / 307.
 */
export interface LeaseStore {
  readonly kind: StoreKind;
  acquire(req: AcquireRequest): Promise<AcquireOk | LeaseError>;
  renew(req: RenewRequest): Promise<ServiceRenewOk | LeaseError>;
  release(req: ReleaseRequest): Promise<ReleaseOk | LeaseError>;
  configurePool(app: string, bits: number, datacenterBits?: number): Promise<ConfigurePoolOk | LeaseError>;
  /** Live leases of an app with the serving node's remaining time. Linearizable unless told otherwise. */
  list(app: string, opts?: { linearizable?: boolean }): Promise<LeaseListing[]>;
  /** A worker ID's record (live or free); undefined when never used. */
  get(
    app: string,
    workerId: number,
    opts?: { linearizable?: boolean },
  ): Promise<WorkerRecordReply | undefined>;
  /** The app's pool; undefined when it has none. */
  pool(app: string): Promise<PoolInfo | undefined>;
  /** Who issued `id` (docs/whois.md). */
  whois(id: bigint, layout: Layout, app?: string): Promise<WhoisAnswer>;
  /** Present when routing is not the Raft role's (etcd store). */
  readonly routing?: StoreRouting;
  close(): Promise<void> | void;
}

/**
 * The built-in store: the existing LeaseService over Raft, unchanged. Reads of a pool use the
 * leader's applied state after a linearizable read, as `list` and `get` do.
 */
export class RaftLeaseStore implements LeaseStore {
  readonly kind = 'raft' as const;

  constructor(
    readonly service: LeaseService,
    private readonly state: LeaseStateMachine,
    private readonly linearizableRead: () => Promise<void>,
  ) {}

  acquire(req: AcquireRequest): Promise<AcquireOk | LeaseError> {
    return this.service.acquire(req);
  }

  renew(req: RenewRequest): Promise<ServiceRenewOk | LeaseError> {
    return this.service.renew(req);
  }

  release(req: ReleaseRequest): Promise<ReleaseOk | LeaseError> {
    return this.service.release(req);
  }

  configurePool(app: string, bits: number, datacenterBits = 0): Promise<ConfigurePoolOk | LeaseError> {
    return this.service.configurePool(app, bits, datacenterBits);
  }

  list(app: string, opts?: { linearizable?: boolean }): Promise<LeaseListing[]> {
    return this.service.list(app, opts);
  }

  get(
    app: string,
    workerId: number,
    opts?: { linearizable?: boolean },
  ): Promise<WorkerRecordReply | undefined> {
    return this.service.get(app, workerId, opts);
  }

  async pool(app: string): Promise<PoolInfo | undefined> {
    await this.linearizableRead();
    return this.state.pool(app);
  }

  whois(id: bigint, layout: Layout, app?: string): Promise<WhoisAnswer> {
    return this.service.whois(id, layout, app);
  }

  close(): void {
    this.service.close();
  }
}
