import type { CommandContext } from '../command.js';
import { RespError, respErrorOf } from '../errors.js';

/** The longest `CLUSTER` value taken: a UUID is 36 characters. */
const MAX_CLUSTER_BYTES = 64;

/**
 * The `CLUSTER uuid` option of WORKER.*, SEQ.ALLOC and SNOWFLAKE.NEXT: the cluster the caller means, checked before
 * anything is done, as the HTTP API checks the `floe-cluster` header (docs/cluster-identity.md). A node of another
 * cluster refuses (`-ERR cluster_mismatch: ...`): a client whose address list, DNS name or balancer reaches the wrong
 * Floe cluster is granted nothing there. A node that does not know its own UUID yet cannot tell, and refuses too
 * (`-TRYAGAIN not_ready: ...`). A follower never runs a write's handler (it answered MOVED before), so a named
 * write is checked where it acts.
 */
export function checkNamedCluster(ctx: CommandContext, named: Buffer | undefined): void {
  if (named === undefined) return;
  if (named.length === 0 || named.length > MAX_CLUSTER_BYTES)
    throw new RespError(
      `ERR invalid CLUSTER: must be the cluster's UUID (floe cluster uid), at most ${MAX_CLUSTER_BYTES} bytes`,
    );
  const meant = named.toString('utf8').toLowerCase();
  const known = ctx.server.backend.clusterUid?.();
  if (known === undefined)
    throw respErrorOf(
      'not_ready',
      "not_ready: this node does not know the cluster's UUID yet (its first leader mints it; docs/cluster-identity.md): retry",
    );
  if (known !== meant)
    throw respErrorOf(
      'cluster_mismatch',
      `cluster_mismatch: this node belongs to cluster ${known}; the request is meant for ${meant}`,
    );
}
