import { isClusterUid } from '../../../state/cluster/cluster-identity.js';
import type { CommandContext } from '../command.js';
import { RespError, respErrorOf } from '../errors.js';

/**
 * The `CLUSTER uuid` option of WORKER.*, SEQ.ALLOC and SNOWFLAKE.NEXT: the cluster the caller means, checked before
 * anything is done, as the HTTP API checks the `floe-cluster` header (docs/cluster-identity.md). A node of another
 * cluster refuses (`-ERR cluster_mismatch: ...`): a client whose address list, DNS name or balancer reaches the wrong
 * Floe cluster is granted nothing there. A node that does not know its own UUID yet cannot tell, and refuses too
 * (`-TRYAGAIN not_ready: ...`). A follower never runs the handler of a write it does not serve itself (it answered
 * MOVED before), so a named write is checked where it acts.
 */
export function checkNamedCluster(ctx: CommandContext, named: Buffer | undefined): void {
  if (named === undefined) return;
  // Surrounding whitespace is a file's newline (`floe cluster uid > uid.txt`), as HTTP drops it around a header value.
  const meant = named.subarray(0, 128).toString('utf8').trim().toLowerCase();
  // Anything else than a UUID names no cluster: a clear error, not "another cluster" (review of the option, 3).
  if (named.length > 128 || !isClusterUid(meant))
    throw new RespError(
      `ERR invalid CLUSTER ${JSON.stringify(meant.slice(0, 64))}: must be the cluster's UUID (floe cluster uid)`,
    );
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
