import { type Clock, Snowflake, type SnowflakeOptions } from '../id/index.js';
import type { DeadlineSource } from './guarded-clock.js';

/**
 * The ID core's generator, with the lease's monotonic deadline checked on its slow path: whenever it starts a new
 * tick, finds its tick used up, or sees the clock behind. The fast path (same tick, sequence left, clock not behind)
 * is the ID core's own, unchanged, so the guard costs nothing per ID; the monotonic clock is read at most once per
 * tick (or per 2^sequenceBits IDs when the wall clock stands still).
 *
 * Why a check per tick is enough: the fast path only continues while the wall clock reads inside the current tick and
 * not behind its last reading. A process paused for longer than a tick resumes with the wall clock past the tick, so
 * its next ID goes through the slow path and the check. The window left is the ID being generated when the pause
 * began (see docs/decisions/0002-lease-safety.md).
 *
 * The hook relies on the ID core's private `nextSlow` (src/id/snowflake.ts). If it is ever renamed,
 * `SLOW_PATH_HOOK_AVAILABLE` turns false and leases fall back on `GuardedClock` (a check in `clock.now()`).
 */
export class LeaseSnowflake extends Snowflake {
  /** Monotonic ms of the last deadline check that passed. */
  lastCheckMono = Number.NEGATIVE_INFINITY;
  private guard: { lease: DeadlineSource; mono: () => number } | undefined;

  constructor(options: SnowflakeOptions & { clock: Clock }, lease: DeadlineSource, mono: () => number) {
    super(options);
    this.guard = { lease, mono };
  }

  /** Throws the lease's error once its deadline has passed. */
  checkDeadline(): void {
    const g = this.guard;
    if (g === undefined) return; // during super(): the constructor issues no ID
    const m = g.mono();
    if (!(m < g.lease.deadlineMono)) throw g.lease.lostError();
    this.lastCheckMono = m;
  }

  /**
   * Sends the next call down the slow path (and so through the deadline check) even inside the current tick: used
   * when the lease is lost or released, so that generation stops at once rather than at the end of the tick.
   */
  invalidate(): void {
    (this as unknown as Internals).tickEndMs = Number.NEGATIVE_INFINITY;
  }
}

/** The ID core's private fields the hook touches (see SLOW_PATH_HOOK_AVAILABLE). */
interface Internals {
  tickEndMs: number;
}

interface SlowPath {
  nextSlow(this: LeaseSnowflake, now: number): bigint;
}
const base = Snowflake.prototype as unknown as Partial<SlowPath>;
const baseSlow = base.nextSlow;

/** True when the ID core has the slow-path method the hook wraps. */
export const SLOW_PATH_HOOK_AVAILABLE =
  typeof baseSlow === 'function' &&
  typeof (new Snowflake() as unknown as Partial<Internals>).tickEndMs === 'number';

if (SLOW_PATH_HOOK_AVAILABLE && baseSlow !== undefined) {
  Object.defineProperty(LeaseSnowflake.prototype, 'nextSlow', {
    value: function nextSlow(this: LeaseSnowflake, now: number): bigint {
      this.checkDeadline();
      return baseSlow.call(this, now);
    },
    writable: true,
    configurable: true,
  });
}
