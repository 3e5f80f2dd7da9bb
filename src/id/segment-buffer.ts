import { systemClock } from './clock.js';
import { OptionError, SegmentRangeError, SegmentUnavailableError } from './errors.js';
import type { Clock } from './time-source.js';

/** A half-open range [start, end) of values, as returned by a segment fetch. Bigints are accepted if safe. */
export interface SegmentRange {
  start: number | bigint;
  end: number | bigint;
}

/** Reserve the next range of about `step` values (e.g. from the replicated state). May return more or fewer. */
export type SegmentFetch = (step: number) => Promise<SegmentRange>;

export interface SegmentBufferOptions {
  /** Name of the counter, used in errors. */
  key: string;
  fetch: SegmentFetch;
  /** Time source for step adaptation only. Default `systemClock`. */
  clock?: Clock;
  /** Smallest step asked for. Default 1,000. */
  minStep?: number;
  /** Largest step asked for. Default 1,000,000. */
  maxStep?: number;
  /** First step asked for. Default `minStep`. */
  initialStep?: number;
  /**
   * A segment should last about this long (ms). When the previous one lasted less, the step doubles; when it
   * lasted more than twice this, the step halves (Leaf's rule). Default 60,000.
   */
  targetDurationMs?: number;
  /** Fetch the next range once this fraction of the current one (or less) remains. In (0, 1). Default 0.2. */
  prefetchRatio?: number;
  /** At most this many callers may wait for values at once; more are rejected (`queue-full`). Default 10,000. */
  maxWaiters?: number;
  /** Largest `nextBatch` size. Default 1,000,000. */
  maxBatch?: number;
}

/** A snapshot for metrics and tests. */
export interface SegmentBufferStats {
  /** Values left in the current range. */
  remaining: number;
  /** Values in the standby range (0 if none). */
  standby: number;
  fetching: boolean;
  waiters: number;
  step: number;
  fetches: number;
  failures: number;
  /** End of the last range accepted: no value at or beyond this has been handed out. */
  acceptedEnd: number;
}

interface Waiter {
  /** Resolve once `got` holds this many values. */
  want: number;
  got: number[];
  resolve: (values: number[]) => void;
  reject: (err: Error) => void;
}

/**
 * Leaf/Tinyid-style double buffer over ranges of a counter. Values come from the current range; once
 * `prefetchRatio` of it or less remains, the next range is fetched in the background into a standby buffer, so
 * callers rarely wait. Values are numbers (safe integers, <= 2^53 - 1): counters never get near that, and numbers
 * keep the synchronous fast path at tens of millions of values per second.
 *
 * Guarantees: a value is handed out at most once, in increasing order; at most one fetch is in flight; a fetched
 * range must be non-empty, of safe non-negative integers, and start at or after the end of every range accepted
 * before (`SegmentRangeError` otherwise, treated as a failed fetch). When no value is cached and the fetch fails,
 * every waiting caller is rejected with `SegmentUnavailableError` (reason `fetch-failed`, `cause` = the error);
 * the next call tries again. A failed prefetch while values remain is retried when half of what was left is used,
 * and again when the buffer runs dry. Values taken for a `nextBatch` that then fails are dropped (a gap), never
 * handed out again.
 */
export class SegmentBuffer {
  readonly key: string;
  private readonly fetchFn: SegmentFetch;
  private readonly clock: Clock;
  private readonly minStep: number;
  private readonly maxStep: number;
  private readonly targetDurationMs: number;
  private readonly prefetchRatio: number;
  private readonly maxWaiters: number;
  private readonly maxBatch: number;

  // Current range [cur, end); the fast path hands out values while cur < limit.
  private cur = 0;
  private end = 0;
  private limit = 0;
  /** Prefetch once remaining <= this; halved after a failed prefetch. */
  private trigger = 0;
  private standby: { start: number; end: number } | undefined;
  private fetching = false;
  private acceptedEnd = 0;
  private step: number;
  private lastFetchAt: number | undefined;
  private fetches = 0;
  private failures = 0;
  private closed = false;
  private waiters: Waiter[] = [];
  private waitersHead = 0;

  constructor(options: SegmentBufferOptions) {
    if (typeof options?.key !== 'string' || options.key.length === 0) {
      throw new OptionError('key', 'a non-empty string', options?.key);
    }
    if (typeof options.fetch !== 'function') throw new OptionError('fetch', 'a function', options.fetch);
    this.key = options.key;
    this.fetchFn = options.fetch;
    this.clock = options.clock ?? systemClock;
    this.minStep = int('minStep', options.minStep ?? 1000, 1, Number.MAX_SAFE_INTEGER);
    this.maxStep = int(
      'maxStep',
      options.maxStep ?? Math.max(1_000_000, this.minStep),
      this.minStep,
      2 ** 52,
    );
    this.step = int('initialStep', options.initialStep ?? this.minStep, this.minStep, this.maxStep);
    this.targetDurationMs = int('targetDurationMs', options.targetDurationMs ?? 60_000, 1, 2 ** 52);
    const ratio = options.prefetchRatio ?? 0.2;
    if (typeof ratio !== 'number' || !(ratio > 0 && ratio < 1)) {
      throw new OptionError('prefetchRatio', 'a number in (0, 1)', ratio);
    }
    this.prefetchRatio = ratio;
    this.maxWaiters = int('maxWaiters', options.maxWaiters ?? 10_000, 1, 2 ** 31);
    this.maxBatch = int('maxBatch', options.maxBatch ?? 1_000_000, 1, 2 ** 31);
  }

  /** The next value, or undefined when none is cached (a fetch is then under way). Never waits. */
  tryNextSync(): number | undefined {
    const v = this.cur;
    if (v < this.limit) {
      this.cur = v + 1;
      return v;
    }
    return this.nextSyncSlow();
  }

  /** The next value; waits for a fetch when none is cached. */
  next(): Promise<number> {
    const v = this.tryNextSync();
    if (v !== undefined) return Promise.resolve(v);
    return this.enqueue(1, []).then((values) => values[0] as number);
  }

  /** `n` values in increasing order (not necessarily contiguous: they may span ranges). */
  nextBatch(n: number): Promise<number[]> {
    if (!Number.isInteger(n) || n < 0 || n > this.maxBatch) {
      return Promise.reject(new OptionError('n', `an integer in [0, ${this.maxBatch}]`, n));
    }
    const got: number[] = [];
    if (this.pendingWaiters() === 0) this.takeInto(got, n);
    if (got.length === n) return Promise.resolve(got);
    return this.enqueue(n, got);
  }

  /** Stop: reject waiting callers (`closed`), drop cached values, fetch no more. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.cur = this.end = this.limit = 0;
    this.standby = undefined;
    this.rejectAll(new SegmentUnavailableError(this.key, 'closed', 'the buffer was closed'));
  }

  get stats(): SegmentBufferStats {
    return {
      remaining: this.end - this.cur,
      standby: this.standby ? this.standby.end - this.standby.start : 0,
      fetching: this.fetching,
      waiters: this.pendingWaiters(),
      step: this.step,
      fetches: this.fetches,
      failures: this.failures,
      acceptedEnd: this.acceptedEnd,
    };
  }

  private nextSyncSlow(): number | undefined {
    if (this.closed || this.pendingWaiters() > 0) return undefined;
    this.refill();
    const v = this.cur;
    if (v < this.end) {
      this.cur = v + 1;
      this.refill();
      return v;
    }
    return undefined;
  }

  /** Move values into `got` until it holds `want`, or nothing is cached. */
  private takeInto(got: number[], want: number): void {
    while (got.length < want) {
      this.refill();
      const k = Math.min(this.end - this.cur, want - got.length);
      if (k <= 0) break;
      const start = this.cur;
      for (let i = 0; i < k; i++) got.push(start + i);
      this.cur = start + k;
    }
    this.refill();
  }

  /** Swap in the standby range when the current one is used up, start a prefetch at the watermark, set `limit`. */
  private refill(): void {
    if (this.closed) {
      this.limit = 0;
      return;
    }
    if (this.cur >= this.end && this.standby) {
      this.install(this.standby.start, this.standby.end);
      this.standby = undefined;
    }
    if (!this.fetching && !this.standby && this.end - this.cur <= this.trigger) this.startFetch();
    this.limit = this.fetching || this.standby ? this.end : this.end - this.trigger;
  }

  private install(start: number, end: number): void {
    this.cur = start;
    this.end = end;
    this.trigger = Math.floor((end - start) * this.prefetchRatio);
  }

  private startFetch(): void {
    this.fetching = true;
    this.fetches++;
    this.adaptStep();
    let pending: Promise<SegmentRange>;
    try {
      pending = Promise.resolve(this.fetchFn(this.step));
    } catch (err) {
      pending = Promise.reject(err);
    }
    pending.then(
      (range) => this.onFetched(range),
      (err: unknown) => this.onFetchFailed(err),
    );
  }

  private adaptStep(): void {
    const now = this.clock.now();
    if (this.lastFetchAt !== undefined) {
      const lasted = now - this.lastFetchAt;
      if (lasted < this.targetDurationMs) this.step = Math.min(this.step * 2, this.maxStep);
      else if (lasted >= 2 * this.targetDurationMs)
        this.step = Math.max(Math.floor(this.step / 2), this.minStep);
    }
    this.lastFetchAt = now;
  }

  private onFetched(range: SegmentRange): void {
    this.fetching = false;
    if (this.closed) return;
    const start = toSafe(range?.start);
    const end = toSafe(range?.end);
    if (start === undefined || end === undefined || start < 0 || end <= start || start < this.acceptedEnd) {
      this.onFetchFailed(
        new SegmentRangeError(
          this.key,
          range?.start,
          range?.end,
          `safe integers with 0 <= start < end and start >= ${this.acceptedEnd} (the end of the ranges accepted so far)`,
        ),
      );
      return;
    }
    this.acceptedEnd = end;
    if (this.cur >= this.end) this.install(start, end);
    else this.standby = { start, end };
    this.serveWaiters();
    this.refill();
  }

  private onFetchFailed(err: unknown): void {
    this.fetching = false;
    this.failures++;
    if (this.closed) return;
    const remaining = this.end - this.cur;
    if (remaining > 0 || this.standby) {
      // A prefetch failed but values remain: retry when half of what is left is used (or when dry).
      this.trigger = Math.min(this.trigger, Math.floor(remaining / 2));
      this.refill();
      return;
    }
    const message = err instanceof Error ? err.message : String(err);
    this.rejectAll(
      new SegmentUnavailableError(
        this.key,
        'fetch-failed',
        `no cached values and the fetch failed: ${message}`,
        err,
      ),
    );
    this.limit = this.end;
  }

  private enqueue(want: number, got: number[]): Promise<number[]> {
    if (this.closed) {
      return Promise.reject(new SegmentUnavailableError(this.key, 'closed', 'the buffer was closed'));
    }
    if (this.pendingWaiters() >= this.maxWaiters) {
      return Promise.reject(
        new SegmentUnavailableError(
          this.key,
          'queue-full',
          `${this.maxWaiters} callers are already waiting for values (maxWaiters)`,
        ),
      );
    }
    return new Promise<number[]>((resolve, reject) => {
      this.waiters.push({ want, got, resolve, reject });
      if (!this.fetching) this.startFetch();
    });
  }

  /** Hand freshly fetched values to waiters, oldest first. */
  private serveWaiters(): void {
    while (this.waitersHead < this.waiters.length) {
      const w = this.waiters[this.waitersHead] as Waiter;
      this.takeInto(w.got, w.want);
      if (w.got.length < w.want) break; // dry again: refill() has started the next fetch
      this.waitersHead++;
      w.resolve(w.got);
    }
    if (this.waitersHead === this.waiters.length) {
      this.waiters = [];
      this.waitersHead = 0;
    } else if (this.waitersHead > 1024) {
      this.waiters = this.waiters.slice(this.waitersHead);
      this.waitersHead = 0;
    }
  }

  private pendingWaiters(): number {
    return this.waiters.length - this.waitersHead;
  }

  private rejectAll(err: Error): void {
    const waiting = this.waiters.slice(this.waitersHead);
    this.waiters = [];
    this.waitersHead = 0;
    for (const w of waiting) w.reject(err);
  }
}

function toSafe(v: unknown): number | undefined {
  if (typeof v === 'bigint') {
    return v >= 0n && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : undefined;
  }
  return typeof v === 'number' && Number.isSafeInteger(v) ? v : undefined;
}

function int(field: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new OptionError(field, `an integer in [${min}, ${max}]`, value);
  }
  return value;
}
