import { type Clock, systemClock } from '../id/index.js';

/** What the guard needs from its lease: the safe deadline (monotonic ms) and what to throw past it. */
export interface DeadlineSource {
  /** Monotonic ms at which generation must stop; -Infinity once the lease is lost or released. */
  readonly deadlineMono: number;
  lostError(): Error;
}

/** Check the deadline at least every this many clock reads even if the wall clock does not move. */
const MAX_READS_BETWEEN_CHECKS = 256;

/**
 * The clock a lease's generator reads: the wall clock (plus a fixed lead when the lease's floor is ahead of it), with
 * the lease's monotonic deadline checked whenever the wall-clock reading changes (so at most once per ms tick for
 * `Date.now()`), and at least every 256 reads, and before every wait. Past the deadline `now()` throws the lease's
 * `LeaseLostError`, which the generator propagates before changing any state.
 *
 * The hot path is one wall-clock read, one comparison and one decrement: the monotonic clock is not read per ID.
 */
export class GuardedClock implements Clock {
  /** Monotonic ms of the last deadline check that passed (what the chaos checker uses as "last use"). */
  lastCheckMono = Number.NEGATIVE_INFINITY;
  private lastWall = Number.NaN;
  private reads = MAX_READS_BETWEEN_CHECKS;
  /** `Date.now` itself for the system clock (one call less per ID), else the clock's bound `now`. */
  private readonly wallNow: () => number;

  constructor(
    private readonly wall: Clock,
    private readonly mono: () => number,
    private readonly lease: DeadlineSource,
    /** Added to wall time (ms): lets a lease whose floor is ahead of this machine's clock start at once. */
    readonly leadMs: number,
  ) {
    this.wallNow = wall === systemClock ? Date.now : () => wall.now();
  }

  now(): number {
    const t = this.wallNow() + this.leadMs;
    if (t === this.lastWall && --this.reads > 0) return t;
    return this.check(t);
  }

  waitUntil(ms: number): void {
    this.check(this.wall.now() + this.leadMs);
    this.wall.waitUntil?.(ms - this.leadMs);
  }

  /** Make the next read check the deadline (called when the lease is lost or released). */
  invalidate(): void {
    this.lastWall = Number.NaN;
  }

  private check(t: number): number {
    const m = this.mono();
    if (!(m < this.lease.deadlineMono)) {
      this.lastWall = Number.NaN;
      throw this.lease.lostError();
    }
    this.reads = MAX_READS_BETWEEN_CHECKS;
    this.lastWall = t;
    this.lastCheckMono = m;
    return t;
  }
}
