// Pure majority math. Nothing here knows about terms, logs or messages.

import type { NodeId } from './types.js';

export type VoteResult = 'won' | 'lost' | 'pending';

/** Smallest number of voters that forms a majority of n. */
export function majority(n: number): number {
  return (n >> 1) + 1;
}

/**
 * The largest value v such that a majority of voters have acked at least v (acked ids missing from
 * the lookup count as `missing`). With no voters, returns `missing`: nobody can commit anything.
 * `scratch` is reused between calls to avoid an allocation per acknowledgement.
 */
export function majorityValue(
  voters: Iterable<NodeId>,
  acked: (id: NodeId) => number,
  missing: number,
  scratch: number[] = [],
): number {
  let n = 0;
  for (const id of voters) {
    const v = acked(id);
    // Insertion sort, descending: voter sets are tiny (3, 5, 7).
    let i = n++;
    while (i > 0 && (scratch[i - 1] as number) < v) {
      scratch[i] = scratch[i - 1] as number;
      i--;
    }
    scratch[i] = v;
  }
  if (n === 0) return missing;
  return scratch[majority(n) - 1] as number;
}

/** Outcome of an election (or of a ReadIndex acknowledgement round) given the answers so far. */
export function voteResult(voters: Iterable<NodeId>, votes: ReadonlyMap<NodeId, boolean>): VoteResult {
  let n = 0;
  let granted = 0;
  let rejected = 0;
  for (const id of voters) {
    n++;
    const v = votes.get(id);
    if (v === true) granted++;
    else if (v === false) rejected++;
  }
  // An empty configuration wins vacuously; callers never campaign without being a voter.
  const q = majority(n);
  if (granted >= q) return 'won';
  if (n - rejected >= q) return 'pending';
  return 'lost';
}
