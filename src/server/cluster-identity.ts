import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { CLUSTER_UID_HEADER } from '../client/cluster-pin.js';
import { type ClusterIdentityStateMachine, encodeClusterInit } from '../state/cluster/cluster-identity.js';

export { CLUSTER_UID_HEADER };

/** What the keeper needs of the node (the Raft node's lease adapter, or the etcd store's state node). */
export interface ClusterIdentityNode {
  isLeader(): boolean;
  onRoleChange(cb: (leader: boolean) => void): () => void;
  propose(command: Uint8Array): Promise<unknown>;
}

export interface ClusterIdentityKeeperOptions {
  node: ClusterIdentityNode;
  state: ClusterIdentityStateMachine;
  /** A fresh UUID (default `crypto.randomUUID`; the simulator draws it from the seed). */
  mint?: () => string;
  /** Wait before proposing again after a proposal that failed while this node still leads. Default 1,000 ms. */
  retryMs?: number;
  /** Default: the global timers. */
  timers?: { setTimeout(fn: () => void, ms: number): unknown; clearTimeout(handle: unknown): void };
  onError?: (what: string, err: unknown) => void;
}

/**
 * Mints the cluster's UUID: a leader that finds none applied proposes one. Proposals by several leaders (or twice
 * by one) are harmless: the first applied wins everywhere, the rest change nothing (ClusterIdentityStateMachine).
 */
export class ClusterIdentityKeeper {
  private readonly mint: () => string;
  private readonly retryMs: number;
  private inFlight = false;
  private timer: unknown;
  private readonly timers: NonNullable<ClusterIdentityKeeperOptions['timers']>;
  private closed = false;
  private readonly off: () => void;

  constructor(private readonly o: ClusterIdentityKeeperOptions) {
    this.mint = o.mint ?? randomUUID;
    this.retryMs = o.retryMs ?? 1000;
    this.timers = o.timers ?? {
      setTimeout: (fn, ms) => {
        const t = setTimeout(fn, ms);
        t.unref();
        return t;
      },
      clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
    };
    this.off = o.node.onRoleChange((leader) => {
      if (leader) this.ensure();
    });
    if (o.node.isLeader()) this.ensure();
  }

  private ensure(): void {
    if (this.closed || this.inFlight || this.o.state.uid !== undefined || !this.o.node.isLeader()) return;
    this.inFlight = true;
    this.o.node.propose(encodeClusterInit(this.mint())).then(
      () => this.settled(),
      (err) => {
        if (this.o.node.isLeader()) this.o.onError?.('cluster identity proposal failed', err);
        this.settled();
      },
    );
  }

  private settled(): void {
    this.inFlight = false;
    if (this.closed || this.o.state.uid !== undefined || !this.o.node.isLeader()) return;
    this.timer = this.timers.setTimeout(() => {
      this.timer = undefined;
      this.ensure();
    }, this.retryMs);
  }

  close(): void {
    this.closed = true;
    this.off();
    if (this.timer !== undefined) this.timers.clearTimeout(this.timer);
  }
}

/**
 * Every answer of this node's HTTP API names the cluster (`floe-cluster: <uuid>`), error answers and redirects
 * included, once the UUID has been applied here. The SDK pins it and refuses another cluster's answers.
 */
export function addClusterUidHeader(app: FastifyInstance, uid: () => string | undefined): void {
  // A callback hook, not an async one: it runs on every answer.
  app.addHook('onSend', (_req, reply, payload, done) => {
    const u = uid();
    if (u !== undefined) reply.header(CLUSTER_UID_HEADER, u);
    done(null, payload);
  });
}
