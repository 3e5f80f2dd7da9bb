/**
 * Test-only switches that put known bugs back into production code, so the full-stack simulator
 * can show it finds each one (issue 10, "teeth"; docs/simulator-full.md). Inert in production:
 * the set is empty unless a simulation run turns a switch on for its own duration, and a check is
 * one size test on an empty set.
 *
 * - `client-two-generators` (issue 9 item 2): `lease.snowflake()` makes a new generator on every
 *   call instead of returning the lease's one, so two generators issue the same IDs.
 * - `client-no-tick-margin` (issue 9 item 3): the SDK's deadline check does not keep one tick (plus
 *   the borrow lead) before the deadline, so a coarse tick outlives the lease.
 * - `wal-cut-complete-frame` (issue 9 item 7): recovery cuts a complete frame that fails its
 *   checksum at the tail as if it were torn, silently dropping an fsynced record (and its vote).
 * - `client-no-cache-lock` (issue 9 item 2a): the lease cache's lock is taken whatever holds it, so a replacement
 *   started while the old process runs reads its cache and releases the lease the old process still uses.
 * - `proposal-counter` (issue 9 item 1): the node answers a proposal with the result of any applied entry that carries
 *   its origin and per-process counter, wherever it landed in the log (the counter restarts at 0 in every process),
 *   so an entry of a previous incarnation answers a new proposal.
 * - `client-cache-no-fsync` (issue 9 item 2): the lease cache is written without fsync of the file or its directory,
 *   so a power loss can leave an older cache, whose use mark is below what was used.
 * - `no-reply-check` (issue 9 item 1): the SDK (`checkReply`) and the lease service (`matchResult`) accept a reply
 *   that does not answer its request (nodeId, app, workerId, token, requestId, incarnation), so a reply meant for
 *   another request becomes a grant.
 * - `cached-mono-deadline` (issue 9 item 4): a restarted process resumes a cached lease on the previous process's
 *   monotonic deadline (and the cached wall deadline without its margin) whenever the boot ID matches, even when
 *   either process used a monotonic clock of its own (not the system-wide one), whose readings do not compare.
 * - `tick-without-catch` (issue 9 item 6): the node's tick timer lets an exception escape (the process dies instead
 *   of stopping with its reason), and `linearizableRead` arms its timeout before the core accepts the read, so a
 *   read the core refuses at once (a stale cached leader) leaves an orphaned promise that rejects later, unhandled.
 * - `transport-no-frame-crc` (issue 10): the peer transport's frame decoder checks neither the frame checksum nor the length's, so bytes
 *   corrupted in transit past TCP's checksum reach Raft as a different message (wire version 1 had no checksum).
 * - `snowflake-unbounded-generator` (issue 10, server-side Snowflake): a node's `SnowflakeService` issues IDs from a
 *   plain generator on its leased worker ID and the lease's clock, without the lease's floor (the worker's high-water
 *   mark), ceiling and deadline check.
 * - `wal-retry-failed-fsync` (issue 10 review): the WAL retries a failed fdatasync once, so a save is acknowledged
 *   although the kernel dropped its data (the fsyncgate mistake; the failure model says fail-stop).
 * - `wal-skip-crc` (issue 10, bit flips in written data): the WAL reader does not check a frame's payload checksum, so
 *   a record whose bytes changed on the write path or at rest is decoded and used instead of refused.
 * - `read-context-per-process` (issue 9 item 1): a linearizable read's context is [node id, per-process counter], with
 *   no incarnation, so it repeats after a restart and a late ReadIndex answer to an earlier process's read can release
 *   a new read at an older index (a stale read).
 * - `wal-torn-frame-shaped-refused` (issue 9 item 7): an incomplete frame at the WAL's tail is cut as torn only when
 *   no valid frame starts anywhere after its first byte, so a torn, never-acknowledged record whose payload holds
 *   frame-shaped bytes is refused as corruption and the node does not start.
 * - `step-error-logged` (issue 9 item 6): an error the Raft core throws from `step` (an entry conflicting with a
 *   committed one, a commit index beyond the log: durability was lost) is only logged, and the node runs on.
 * - `undecodable-entry-skipped` (issue 9 item 6): a committed entry whose envelope cannot be decoded is skipped (logged,
 *   counted as applied) instead of stopping the node, so this replica's state may diverge from the others'.
 * - `resp-renew-unchecked` (issue 10, RESP lease clients): `WORKER.RENEW` with a token the cluster fenced (`stale_token`,
 *   `not_held`, `lease_expired`) is answered as renewed, from the worker's record, as if the token had been checked,
 *   so a holder whose lease expired and was granted to another takes the renewal and issues again.
 * - `transport-skip-proof` (issue 10, strangers on the peer port): the peer transport's listener accepts an AUTH
 *   without checking its proof, so anyone who can name the cluster id and a member id is taken for that member.
 * - `transport-no-pending-limit` (issue 10, strangers on the peer port): the listener does not enforce
 *   `maxPendingHandshakes`, so unauthenticated connections (slow handshakes) pile up without bound.
 * - `resp-no-request-timeout` (issue 10, hostile RESP clients): a RESP connection never arms `requestTimeoutMs`, so a
 *   client that starts a request and never finishes it (slowloris) holds its connection and buffer for ever.
 * - `no-cluster-check` (issue 10, FS-19 review): the SDK takes any cluster's answer (no `floe-cluster` check), so a
 *   grant another Floe cluster gave (an endpoint, balancer or redirect that reaches it) becomes a lease.
 * - `leader-self-removal` (FS-22): a leader asked to remove or demote itself proposes the change itself instead of
 *   handing leadership over first (`handOverBeforeLeaving`); it applies the change and stops, and with two voters a
 *   survivor that never learnt the commit (the machine switched off as soon as the call returned) never elects.
 * - `removed-verdict-ignored` (FS-23): `FloeNode.onRemoved` ignores a member's authenticated "removed" verdict, so a
 *   removed member that never applied its removal (the message carrying the commit lost, or it was down) runs on for
 *   ever as a pre-candidate.
 * - `leader-lease-margin-fifth` (issue 9 item 5, decision 0009): the node's core takes the old leader-lease margin,
 *   ⌊electionTicks / 5⌋ ticks, instead of the one derived from the clock-drift bound, so a leader whose clock runs
 *   slow believes its lease after a follower with a fast clock could vote for another.
 * - `leader-lease-clock-blind` (decision 0009): `FloeNode.holdsLeaderLease` trusts the core's tick count alone: ticks
 *   not delivered yet (a stopped process, a blocked event loop) and a suspend the wall clock shows are not taken off.
 * - `lease-promise-opt-in` (decision 0009, stop 34): only a member started with `leaderLease` keeps the followers' side of
 *   leases (refusing votes for an election timeout after it starts, delivering overdue ticks before a message), so in
 *   a cluster where some members run without the flag (a rolling enable) a restarted or stopped member votes for
 *   another candidate while the leader still serves from its lease.
 */
export const BUG_SWITCHES = [
  'client-two-generators',
  'client-no-tick-margin',
  'wal-cut-complete-frame',
  'client-no-cache-lock',
  'client-cache-no-fsync',
  'proposal-counter',
  'no-reply-check',
  'cached-mono-deadline',
  'tick-without-catch',
  'transport-no-frame-crc',
  'snowflake-unbounded-generator',
  'wal-retry-failed-fsync',
  'wal-skip-crc',
  'read-context-per-process',
  'wal-torn-frame-shaped-refused',
  'step-error-logged',
  'undecodable-entry-skipped',
  'resp-renew-unchecked',
  'transport-skip-proof',
  'transport-no-pending-limit',
  'resp-no-request-timeout',
  'no-cluster-check',
  'leader-self-removal',
  'removed-verdict-ignored',
  'leader-lease-margin-fifth',
  'leader-lease-clock-blind',
  'lease-promise-opt-in',
] as const;
export type BugSwitch = (typeof BUG_SWITCHES)[number];

const active = new Set<string>();

/** True when `name` is switched on (only ever inside a simulation run). */
export function bugOn(name: BugSwitch): boolean {
  return active.size !== 0 && active.has(name);
}

/** Switches on the production-code bugs among `names` until the returned function is called. */
export function switchBugsOn(names: Iterable<string>): () => void {
  const mine = [...names].filter((n): n is BugSwitch => (BUG_SWITCHES as readonly string[]).includes(n));
  for (const n of mine) active.add(n);
  return () => {
    for (const n of mine) active.delete(n);
  };
}
