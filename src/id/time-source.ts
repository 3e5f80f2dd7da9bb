/**
 * The time source a generator reads. The ID core never reads the system time itself: callers inject a `Clock`
 * (`systemClock` from `./clock.js` in production, `ManualClock` in tests).
 */
export interface Clock {
  /** Current time in ms since the Unix epoch. May jump forwards or backwards; generators cope (or refuse clearly). */
  now(): number;
  /**
   * Optional: block until `now()` would return at least `ms`, or return early (the generator re-reads the clock and
   * calls again). Without it a generator busy-spins on `now()`. A test clock advances its time here, which keeps
   * waiting deterministic.
   */
  waitUntil?(ms: number): void;
}

/**
 * A clock that only moves when told to: `set`, `advance`, or a generator's `waitUntil` (which jumps to the requested
 * time, as if the wait had happened). `waits` counts `waitUntil` calls so tests can assert that a generator waited.
 */
export class ManualClock implements Clock {
  waits = 0;
  private t: number;

  constructor(startMs: number) {
    this.t = startMs;
  }

  now(): number {
    return this.t;
  }

  /** Set the time, forwards or backwards. */
  set(ms: number): void {
    this.t = ms;
  }

  /** Move the time by `deltaMs` (negative moves it backwards). */
  advance(deltaMs: number): void {
    this.t += deltaMs;
  }

  waitUntil(ms: number): void {
    this.waits++;
    if (ms > this.t) this.t = ms;
  }
}
