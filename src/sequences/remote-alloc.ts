import { createHmac } from 'node:crypto';
import { CLUSTER_UID_HEADER } from '../client/cluster-pin.js';
import type { SequenceResult } from '../state/sequences/index.js';
import type { AllocCommand } from './sequence-service.js';

/** The internal route a follower sends node-mode allocations to (HMAC under the cluster secret). */
export const REMOTE_ALLOC_PATH = '/v1/internal/sequences/alloc';
/** `timeoutMs` when none is given: one allocation call to the leader. */
export const REMOTE_ALLOC_DEFAULT_TIMEOUT_MS = 3000;

/** Proves an alloc request comes from a member: an HMAC of every field under the cluster secret. */
export function allocProof(secret: string, cmd: AllocCommand): string {
  return createHmac('sha256', secret)
    .update(`floe-seq-alloc\n${cmd.key}\n${cmd.count}\n${cmd.owner}\n${cmd.requestId}\n${cmd.exact}`)
    .digest('hex');
}

export interface HttpRemoteAllocOptions {
  secret: string;
  /** The leader's HTTP address as this node knows it, if any. */
  leaderHttpAddr: () => string | undefined;
  timeoutMs?: number;
  /** `https` when the members' HTTP ports run TLS (docs/tls.md). Default `http`. */
  scheme?: 'http' | 'https';
  /** Default: the global fetch; with TLS, one that trusts the members' CA (src/tls/fetch.ts). */
  fetch?: (
    url: string,
    init: {
      method: string;
      headers: Record<string, string>;
      body: string;
      redirect: 'manual';
      signal: AbortSignal;
    },
  ) => Promise<{ status: number; json(): Promise<unknown>; headers?: { get(name: string): string | null } }>;
  /**
   * This node's cluster UUID, once known: an allocation is taken only from a leader that names the same one in its
   * `floe-cluster` header, so a stale leader address that reaches another cluster's node never hands this node a
   * segment (review 2 of the cluster identity, finding 5).
   */
  clusterUid?: () => string | undefined;
}

/** A follower's `remoteAlloc`: POSTs the command to the leader and returns its result (checked by the caller). */
export function httpRemoteAlloc(o: HttpRemoteAllocOptions): (cmd: AllocCommand) => Promise<SequenceResult> {
  return async (cmd) => {
    const mine = o.clusterUid?.();
    // No segment is asked for that this node would have to refuse (its answer cannot be checked yet).
    if (o.clusterUid && mine === undefined)
      throw new RemoteAllocError("this node does not know its cluster's UUID yet: no segment asked for");
    let addr = o.leaderHttpAddr();
    for (let hop = 0; hop < 2; hop++) {
      if (!addr) throw new RemoteAllocError('no leader is known to allocate a segment');
      const res = await (o.fetch ?? fetch)(`${o.scheme ?? 'http'}://${addr}${REMOTE_ALLOC_PATH}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          ...cmd,
          proof: allocProof(o.secret, cmd),
          ...(mine === undefined ? {} : { cluster: mine }),
        }),
        redirect: 'manual',
        signal: AbortSignal.timeout(o.timeoutMs ?? REMOTE_ALLOC_DEFAULT_TIMEOUT_MS),
      }).catch((err: unknown) => {
        throw new RemoteAllocError(`the leader at ${addr} did not answer: ${(err as Error).message}`);
      });
      const body = (await res.json().catch(() => ({}))) as Record<string, unknown>;
      if (res.status === 307) {
        addr = (body.leader as { httpAddr?: string } | undefined)?.httpAddr;
        continue;
      }
      if (res.status === 200 || res.status === 409 || res.status === 404 || res.status === 400) {
        if (o.clusterUid) {
          const theirs = res.headers?.get(CLUSTER_UID_HEADER) ?? null;
          if (mine === undefined || theirs !== mine)
            throw new RemoteAllocError(
              `the leader at ${addr} names cluster ${theirs ?? 'none'}, this node ${mine ?? 'none yet'}: answer refused`,
            );
        }
        return body as unknown as SequenceResult;
      }
      throw new RemoteAllocError(
        `the leader refused the allocation (${res.status} ${String(body.message ?? '')})`,
      );
    }
    throw new RemoteAllocError('the leader kept moving');
  };
}

/** Named like the node's overload error so servers answer it -TRYAGAIN / 429: retrying is safe. */
export class RemoteAllocError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OverloadedError';
  }
}
