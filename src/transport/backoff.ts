/**
 * Reconnect delays: exponential with "equal jitter". Attempt n waits a uniform time in
 * [c/2, c) where c = min(max, base * 2^n): never zero (no hot loop against a dead peer), never over
 * the cap, and spread out so peers restarted together do not redial in lockstep.
 */
export class Backoff {
  private attempt = 0;

  constructor(
    private readonly baseMs: number,
    private readonly maxMs: number,
    /** Uniform in [0, 1). */
    private readonly random: () => number,
  ) {}

  /** The delay before the next attempt; each call grows the next one. */
  next(): number {
    const ceiling = Math.min(this.maxMs, this.baseMs * 2 ** Math.min(this.attempt, 30));
    this.attempt++;
    const r = this.random();
    const unit = Number.isFinite(r) ? Math.min(Math.max(r, 0), 1) : 0.5;
    return ceiling / 2 + (unit * ceiling) / 2;
  }

  /** After a connection succeeded: the next failure starts from the base delay again. */
  reset(): void {
    this.attempt = 0;
  }
}
