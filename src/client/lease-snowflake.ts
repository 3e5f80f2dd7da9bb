import { Snowflake, type SnowflakeOptions } from '../id/index.js';

/**
 * The ID core's generator bound to a lease: the lease's deadline is checked through the ID core's public `guard` hook,
 * i.e. whenever the generator leaves its fast path (a new tick, a used-up tick, a clock behind its last reading) and
 * after every wait inside `next()`, `nextBatch()` and `fill()`. The fast path (same tick, sequence left) is the ID
 * core's own, so the check costs nothing per ID; the monotonic clock is read about once per tick.
 *
 * The fast path goes on for at most one tick (plus `maxLeadMs` in borrow mode) after a check, so the lease checks
 * against its deadline minus that span (see WorkerLease.snowflake and docs/decisions/0002-lease-safety.md).
 */
export class LeaseSnowflake extends Snowflake {
  /** Monotonic ms of the last deadline check that passed. */
  lastCheckMono = Number.NEGATIVE_INFINITY;

  /** @internal Use `WorkerLease.snowflake`. */
  constructor(options: Omit<SnowflakeOptions, 'guard'>, check: (gen: LeaseSnowflake, nowMs: number) => void) {
    let self: LeaseSnowflake | undefined;
    // The ID core issues no ID while constructing, so the guard never runs before `self` is set.
    super({ ...options, guard: (now) => check(self as LeaseSnowflake, now) });
    self = this;
  }
}
