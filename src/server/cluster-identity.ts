import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { CLUSTER_UID_HEADER } from '../client/cluster-pin.js';
import type { FloeNode } from '../node/node.js';
import { REMOTE_ALLOC_PATH } from '../sequences/remote-alloc.js';
import {
  type ClusterIdentityStateMachine,
  encodeClusterInit,
  isClusterUid,
} from '../state/cluster/cluster-identity.js';
import { verifyClusterUidProof } from './member-auth.js';

export { CLUSTER_UID_HEADER };

/**
 * The routes whose results wait for the UUID where they are served (the leader; the etcd store's active node): lease
 * calls, segment allocations, and a follower's node-mode allocation through the leader. Matched on the route's
 * pattern, not the raw URL, so a percent-encoded path is gated too (review 4 of the cluster identity, finding 2). A
 * follower redirects lease calls and strict allocations, and allocates node-mode segments only through the leader
 * once it knows its own UUID (src/sequences/remote-alloc.ts): gating it would stall it under an older leader.
 */
const GATED_ROUTES = new Set([
  '/v1/apps/:app/workers/acquire',
  '/v1/apps/:app/workers/:workerId/renew',
  '/v1/apps/:app/workers/:workerId/release',
  '/v1/sequences/:key/alloc',
  REMOTE_ALLOC_PATH,
]);

/** What the keeper needs of the node (the Raft node's lease adapter). */
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
  /**
   * The UUIDs the other members name (best effort): before minting, a leader that knows none proposes one a member
   * knows. A member may hold the UUID while the leader does not: a snapshot of a version without the identity (a
   * rolling upgrade) carries none (review of the cluster identity, finding 4).
   */
  askMembers?: () => Promise<Array<string | undefined>>;
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
    this.choose()
      .then((uid) => {
        if (this.closed || this.o.state.uid !== undefined || !this.o.node.isLeader()) return;
        return this.o.node.propose(encodeClusterInit(uid));
      })
      .then(
        () => this.settled(),
        (err) => {
          if (this.o.node.isLeader()) this.o.onError?.('cluster identity proposal failed', err);
          this.settled();
        },
      );
  }

  /** The UUID a member names (the most named), else a fresh one. */
  private async choose(): Promise<string> {
    const named = this.o.askMembers ? await this.o.askMembers().catch(() => []) : [];
    const counts = new Map<string, number>();
    for (const u of named) if (isClusterUid(u)) counts.set(u, (counts.get(u) ?? 0) + 1);
    let best: string | undefined;
    for (const [u, n] of [...counts].sort((x, y) => (x[0] < y[0] ? -1 : 1)))
      if (best === undefined || n > (counts.get(best) ?? 0)) best = u;
    return best ?? this.mint();
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
export function addClusterUidHeader(
  app: FastifyInstance,
  uid: () => string | undefined,
  servesLeases: () => boolean,
  leads: () => boolean = servesLeases,
  /** Answers a redirect to whoever could act on the request (307); false when no one is known. */
  redirect: (reply: FastifyReply, url: string) => boolean = () => false,
): void {
  // The results the SDK uses wait for the UUID: an answer that names no cluster is then only ever an older version's,
  // and a pinned client can refuse it (review of the cluster identity, finding 5). Only at a cluster's first election
  // (or on a member that has not caught up with the UUID) does this answer; the SDK retries it. Lease calls wait only
  // where they are served: a follower's answer is a redirect to the leader, which the client checks there (review 2
  // of the cluster identity, finding 2: gating it too stalls every lease call under an older leader).
  app.addHook('onRequest', (req, reply, done) => {
    // A caller that names the cluster it means (import-api does) is refused here before anything is done, if this
    // is another one: a redirect to a stale address must not act on the wrong cluster (review 3, finding 1). A node
    // that does not know its own yet cannot tell: it does nothing either (review 4, finding 1).
    const expected = req.headers[CLUSTER_UID_HEADER];
    // A value that is no UUID names no cluster: a clear error, not "another cluster" (review of the RESP option, 3).
    if (typeof expected === 'string' && !isClusterUid(expected.toLowerCase())) {
      reply.code(400).send({
        error: 'invalid_argument',
        message: `the ${CLUSTER_UID_HEADER} header must be the cluster's UUID (floe cluster uid), not ${JSON.stringify(expected.slice(0, 64))}`,
      });
      return;
    }
    const known = uid();
    if (typeof expected === 'string' && known !== undefined && expected.toLowerCase() !== known) {
      reply.code(421).send({
        error: 'cluster_mismatch',
        message: `this node belongs to cluster ${known}; the request is meant for ${expected.slice(0, 64)}`,
      });
      return;
    }
    const named = typeof expected === 'string';
    const route = req.routeOptions?.url;
    const gated = req.method === 'POST' && route !== undefined && GATED_ROUTES.has(route) && servesLeases();
    // A named request never reaches a handler here before the UUID is known: a follower could become the leader
    // before its handler acts (review 2 of the request header, F1). A node that cannot act on it (neither the Raft
    // leader nor the store's active node) redirects it to the one that can, which checks the name in turn: answering
    // it `not_ready` left a client whose only endpoint reaches such a follower with no lease (review 1, F1).
    if (known === undefined && named && !servesLeases() && !leads() && redirect(reply, req.url)) return;
    if (known === undefined && (named || gated)) {
      reply.code(503).header('retry-after', '1').send({
        error: 'not_ready',
        message:
          "this node does not know the cluster's UUID yet (its first leader mints it; docs/cluster-identity.md): retry",
      });
      return;
    }
    done();
  });
  // A callback hook, not an async one: it runs on every answer.
  app.addHook('onSend', (_req, reply, payload, done) => {
    const u = uid();
    if (u !== undefined) reply.header(CLUSTER_UID_HEADER, u);
    done(null, payload);
  });
}

/** A member-to-member fetch, as the node's own (TLS or not) or the simulator's. */
export type MemberGet = (
  url: string,
  init: { method: string; headers: Record<string, string>; redirect: 'manual'; signal: AbortSignal },
) => Promise<{ text(): Promise<string> }>;

/**
 * The UUIDs the other voters name in `GET /v1/cluster`, each counted only if its answer proves it: the answering
 * node's `id` is the member asked for, and `clusterProof` verifies under this cluster's secret (undefined where it
 * names none, does not prove it, or did not answer).
 */
export async function askMembersForClusterUid(
  node: FloeNode<unknown>,
  scheme: 'http' | 'https',
  fetcher: MemberGet | undefined,
  secret: string,
  timeoutMs = 1000,
): Promise<Array<string | undefined>> {
  const f: MemberGet = fetcher ?? ((url, init) => fetch(url, init));
  const st = node.status();
  const voters = new Set(st.conf.voters);
  const others = st.members.filter((m) => m.id !== node.id && voters.has(m.id) && m.httpAddr);
  return Promise.all(
    others.map(async (m) => {
      try {
        const r = await f(`${scheme}://${m.httpAddr}/v1/cluster`, {
          method: 'GET',
          headers: {},
          redirect: 'manual',
          signal: AbortSignal.timeout(timeoutMs),
        });
        const v = JSON.parse(await r.text()) as { id?: unknown; cluster?: unknown; clusterProof?: unknown };
        if (v.id !== m.id || !isClusterUid(v.cluster)) return undefined;
        return verifyClusterUidProof(secret, m.id, v.cluster, v.clusterProof) ? v.cluster : undefined;
      } catch {
        return undefined;
      }
    }),
  );
}
