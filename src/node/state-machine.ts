/** What the leader stamped on a command: applying it on any replica gives the same result. */
export interface ApplyContext {
  index: number;
  term: number;
  /** The proposing leader's wall clock (ms since the Unix epoch) when it proposed. Never read Date.now() in apply. */
  leaderTimeMs: number;
}

/**
 * The application's replicated state. `apply` must be deterministic: same commands in the same
 * order → same state and results on every replica. `apply` must not throw for bad commands: it
 * returns an error result instead (a thrown error would stop the node, since the log cannot skip it).
 */
export interface StateMachine<Result = unknown> {
  apply(command: Uint8Array, ctx: ApplyContext): Result;
  /** Serialized state as of the last applied command. */
  snapshot(): Uint8Array;
  /** Replace all state with a snapshot produced by `snapshot()` (possibly on another node). */
  restore(data: Uint8Array): void;
}
