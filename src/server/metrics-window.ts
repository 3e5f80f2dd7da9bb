/**
 * Throughput and latency over the last minutes, for the live dashboard: fixed memory (slots × buckets),
 * O(1) per observation, no allocation on the hot path. Prometheus gets the same observations through
 * its histograms; this keeps a short history in the process so the page needs no Prometheus.
 */

/** Bucket i holds durations up to BASE_S × GROWTH^i (10 µs … ~12.7 s); the last one also holds anything above. */
const BUCKETS = 64;
const BASE_S = 10e-6;
const GROWTH = 1.25;
const LOG_GROWTH = Math.log(GROWTH);

function bucketOf(seconds: number): number {
  if (!(seconds > BASE_S)) return 0;
  const i = Math.ceil(Math.log(seconds / BASE_S) / LOG_GROWTH);
  return i >= BUCKETS ? BUCKETS - 1 : i;
}

/** Upper bound of a bucket, in seconds. */
function upperOf(i: number): number {
  return BASE_S * GROWTH ** i;
}

export interface WindowPoint {
  /** Start of the slot (ms since the epoch). */
  t: number;
  /** Operations per second over the slot. */
  rate: number;
  /** Errors per second over the slot. */
  errors: number;
  /** Median and 99th percentile latency in ms (bucket upper bound: at most 25 % high); null without operations. */
  p50: number | null;
  p99: number | null;
}

/** A ring of `slots` slots of `slotMs` each: counts, errors and latency buckets per slot. */
export class LatencyWindow {
  private readonly counts: Uint32Array;
  private readonly errs: Uint32Array;
  private readonly buckets: Uint32Array;
  private readonly starts: Float64Array;
  private current = 0;

  constructor(
    readonly slots = 60,
    readonly slotMs = 5000,
    private readonly now: () => number = Date.now,
  ) {
    this.counts = new Uint32Array(slots);
    this.errs = new Uint32Array(slots);
    this.buckets = new Uint32Array(slots * BUCKETS);
    this.starts = new Float64Array(slots);
    this.starts[0] = this.slotStart(this.now());
  }

  private slotStart(ms: number): number {
    return Math.floor(ms / this.slotMs) * this.slotMs;
  }

  /** Moves to the slot of `ms`, clearing the slots skipped over. */
  private advance(ms: number): number {
    const start = this.slotStart(ms);
    const cur = this.starts[this.current]!;
    if (start <= cur) return this.current;
    const steps = Math.min(this.slots, Math.round((start - cur) / this.slotMs));
    for (let k = 1; k <= steps; k++) {
      const i = (this.current + k) % this.slots;
      this.counts[i] = 0;
      this.errs[i] = 0;
      this.buckets.fill(0, i * BUCKETS, (i + 1) * BUCKETS);
      this.starts[i] = start - (steps - k) * this.slotMs;
    }
    this.current = (this.current + steps) % this.slots;
    return this.current;
  }

  /** `count` operations of `seconds` each (default one). */
  observe(seconds: number, ok = true, count = 1): void {
    const i = this.advance(this.now());
    this.counts[i]! += count;
    if (!ok) this.errs[i]! += count;
    this.buckets[i * BUCKETS + bucketOf(seconds)]! += count;
  }

  /** Oldest first; the current (partial) slot last, its rate over the time elapsed in it. */
  points(): WindowPoint[] {
    const now = this.now();
    this.advance(now);
    const out: WindowPoint[] = [];
    for (let k = 1; k <= this.slots; k++) {
      const i = (this.current + k) % this.slots;
      const t = this.starts[i]!;
      if (t === 0) continue; // never used
      const span = i === this.current ? Math.max(1000, now - t) : this.slotMs;
      const n = this.counts[i]!;
      out.push({
        t,
        rate: (n * 1000) / span,
        errors: (this.errs[i]! * 1000) / span,
        p50: n === 0 ? null : this.quantile(i, n, 0.5),
        p99: n === 0 ? null : this.quantile(i, n, 0.99),
      });
    }
    return out;
  }

  private quantile(slot: number, n: number, q: number): number {
    const rank = Math.ceil(q * n);
    let seen = 0;
    for (let b = 0; b < BUCKETS; b++) {
      seen += this.buckets[slot * BUCKETS + b]!;
      if (seen >= rank) return Math.round(upperOf(b) * 1e6) / 1e3;
    }
    return Math.round(upperOf(BUCKETS - 1) * 1e6) / 1e3;
  }
}
