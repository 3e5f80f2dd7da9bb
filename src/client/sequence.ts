import { SegmentBuffer, type SegmentBufferStats } from '../id/segment-buffer.js';
import type { MonotonicClock } from './clocks.js';
import { ReplyMismatchError } from './errors.js';
import type { HttpTransport } from './http-transport.js';
import { vouch } from './worker-lease.js';

export interface SequenceOptions {
  /** Values fetched per segment at first. Default 1,000. */
  step?: number;
  /** Bounds of the adaptive step (Leaf's rule, see SegmentBuffer). Defaults: step, 100 x step. */
  minStep?: number;
  maxStep?: number;
  /** A segment should last about this long (ms). Default 60,000. */
  targetDurationMs?: number;
  /** Fetch the next segment once this fraction of the current one remains. Default 0.5 (March's watermark). */
  prefetchRatio?: number;
  /** Budget of one segment fetch, retries included (ms). Default 10,000. */
  fetchTimeoutMs?: number;
}

/**
 * Values of a Floe sequence handed out in this process (Tinyid style): segments [start, end) are
 * allocated by the cluster (`POST /v1/sequences/:key/alloc`) and served from a double buffer, so
 * there is no network call per value. Unique across every client and member (each segment is
 * allocated once through the log); increasing within this object; not ordered across processes.
 * Values left in a segment when the process exits are never used (a gap). Values are numbers (the
 * buffer refuses segments past 2^53 − 1).
 */
export class FloeSequence {
  private readonly buffer: SegmentBuffer;

  constructor(
    private readonly transport: HttpTransport,
    readonly key: string,
    o: SequenceOptions = {},
    /** Times segments for the adaptive step: a duration, so the monotonic clock (a wall step must not resize it). */
    monotonic?: MonotonicClock,
  ) {
    const step = o.step ?? 1000;
    const budgetMs = o.fetchTimeoutMs ?? 10_000;
    this.buffer = new SegmentBuffer({
      key,
      minStep: o.minStep ?? step,
      maxStep: o.maxStep ?? step * 100,
      initialStep: step,
      ...(monotonic ? { clock: { now: monotonic } } : {}),
      ...(o.targetDurationMs !== undefined ? { targetDurationMs: o.targetDurationMs } : {}),
      prefetchRatio: o.prefetchRatio ?? 0.5,
      fetch: async (count) => {
        const path = `/v1/sequences/${encodeURIComponent(key)}/alloc`;
        // Retrying an alloc whose answer was lost is safe: at worst it leaves a gap.
        const r = await this.transport.post<{ key?: unknown; start?: unknown; end?: unknown }>(
          path,
          { count },
          { budgetMs },
        );
        const b = r.body;
        // Another key's reply answered another request: the transport forgets that endpoint (vouch).
        return vouch(this.transport, r.endpoint, () => this.segment(path, key, count, b), ['key']);
      },
    });
  }

  /** The alloc reply as a segment of `count` values of `key`, else ReplyMismatchError. */
  private segment(
    path: string,
    key: string,
    count: number,
    b: { key?: unknown; start?: unknown; end?: unknown },
  ): { start: bigint; end: bigint } {
    if (b.key !== key) throw new ReplyMismatchError(path, 'key', key, b.key);
    if (
      typeof b.start !== 'string' ||
      typeof b.end !== 'string' ||
      !/^\d+$/.test(b.start) ||
      !/^\d+$/.test(b.end)
    )
      throw new ReplyMismatchError(path, 'start/end', 'decimal strings', `${b.start}/${b.end}`);
    const start = BigInt(b.start);
    const end = BigInt(b.end);
    if (end - start !== BigInt(count))
      throw new ReplyMismatchError(path, 'end - start', count, String(end - start));
    return { start, end };
  }

  /** The next value. */
  next(): Promise<number> {
    return this.buffer.next();
  }

  /** The next value if one is buffered, else undefined (a fetch is then under way). Never waits. */
  tryNextSync(): number | undefined {
    return this.buffer.tryNextSync();
  }

  /** `n` values, increasing. */
  nextBatch(n: number): Promise<number[]> {
    return this.buffer.nextBatch(n);
  }

  get stats(): SegmentBufferStats {
    return this.buffer.stats;
  }
}
