/**
 * The bounded in-memory audit channel between the ID path and the background writer.
 *
 * `emit(event)` is synchronous, never awaits and never throws: it stamps `tsMs` if absent and queues
 * the event. When `maxQueued` events are already waiting, the event goes to `overflow` instead (the
 * pipeline writes it to the spill synchronously, or counts it dropped with an alarm when the spill is
 * full) — never dropped silently. An exception from `overflow` is caught and reported to `onError`.
 */
import type { AuditEvent } from './events.js';

export interface AuditChannelOptions {
  /** Memory bound: events waiting at most (default 100,000). */
  maxQueued?: number;
  /** Where an event goes when the channel is full (synchronous). */
  overflow: (event: AuditEvent) => void;
  /** Called (synchronously) with anything `overflow` threw. */
  onError?: (err: unknown, event: AuditEvent) => void;
}

export class AuditChannel {
  readonly maxQueued: number;
  private buf: AuditEvent[] = [];
  private head = 0;
  private readonly overflow: (event: AuditEvent) => void;
  private readonly onError: (err: unknown, event: AuditEvent) => void;
  private wakeAt = Number.POSITIVE_INFINITY;
  private waker: (() => void) | undefined;
  /** Events accepted by emit (queued or overflowed). */
  emitted = 0;
  /** Events handed to `overflow`. */
  overflowed = 0;

  constructor(o: AuditChannelOptions) {
    this.maxQueued = o.maxQueued ?? 100_000;
    if (!Number.isInteger(this.maxQueued) || this.maxQueued < 1)
      throw new Error(`audit channel maxQueued must be an integer >= 1, got ${o.maxQueued}`);
    this.overflow = o.overflow;
    this.onError = o.onError ?? (() => {});
  }

  /** Events waiting. */
  get size(): number {
    return this.buf.length - this.head;
  }

  /** Queue an event. Synchronous; never throws. */
  emit(event: AuditEvent): void {
    try {
      if (event.tsMs === undefined) event.tsMs = Date.now();
      this.emitted++;
      if (this.buf.length - this.head < this.maxQueued) {
        this.buf.push(event);
        if (this.waker && this.buf.length - this.head >= this.wakeAt) this.fire();
        return;
      }
      this.overflowed++;
      this.overflow(event);
    } catch (err) {
      try {
        this.onError(err, event);
      } catch {
        // the ID path must not see it
      }
    }
  }

  private fire() {
    const w = this.waker;
    this.waker = undefined;
    this.wakeAt = Number.POSITIVE_INFINITY;
    w?.();
  }

  /** Take up to `max` events, oldest first. */
  take(max: number): AuditEvent[] {
    const n = Math.min(max, this.buf.length - this.head);
    const out = this.buf.slice(this.head, this.head + n);
    this.head += n;
    if (this.head === this.buf.length) {
      this.buf = [];
      this.head = 0;
    } else if (this.head > 65_536 && this.head * 2 > this.buf.length) {
      this.buf = this.buf.slice(this.head);
      this.head = 0;
    }
    return out;
  }

  /**
   * Resolves when at least `n` events wait, after `timeoutMs`, or when `wake()` is called — whichever
   * comes first. One waiter at a time (the pipeline's pump).
   */
  wait(n: number, timeoutMs: number): Promise<void> {
    if (this.size >= n) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(() => this.fire(), timeoutMs);
      this.wakeAt = n;
      this.waker = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }

  /** Wake the waiter now (flush, close). */
  wake(): void {
    this.fire();
  }
}
