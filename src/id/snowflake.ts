import { systemClock } from './clock.js';
import { composeTick } from './codec.js';
import {
  BoundError,
  CeilingReachedError,
  ClockMovedBackwardsError,
  DatacenterIdRangeError,
  EpochInFutureError,
  OptionError,
  TimestampOverflowError,
  WorkerIdRangeError,
} from './errors.js';
import type { Layout, LayoutSpec } from './layout.js';
import { DEFAULT_LAYOUT_NAME, resolveLayout } from './presets.js';
import type { Clock } from './time-source.js';

/**
 * What a generator does when it would have to issue an ID in a tick it has no sequence number left for.
 * - `wait`: wait (on the clock) for the next tick. IDs never carry a time later than the clock's.
 * - `borrow`: use the next tick at once (seed 003's "sequence overflow carries into the timestamp"), as long as that
 *   tick starts no more than `maxLeadMs` after the clock's time; beyond that lead it waits until the clock catches up.
 */
export type ExhaustedMode = 'wait' | 'borrow';

/**
 * What a generator does when the clock reads earlier than it did before (or earlier than the floor), by no more
 * than `backwardsToleranceMs`. Beyond the tolerance both modes throw `ClockMovedBackwardsError`.
 * - `wait`: wait until the clock is back where it was.
 * - `borrow`: keep counting from the last tick used (taking further ticks as `onSequenceExhausted` allows).
 */
export type BackwardsMode = 'wait' | 'borrow';

export interface SnowflakeOptions {
  /** Preset name, `defineLayout` result or spec. Default `floe`. */
  layout?: Layout | LayoutSpec | string;
  /** Worker ID in [0, 2^workerBits - 1]. Default 0. Out of range: `WorkerIdRangeError`. */
  worker?: number;
  /** Datacenter ID in [0, 2^datacenterBits - 1]. Default 0. Out of range: `DatacenterIdRangeError`. */
  datacenter?: number;
  /** Time source. Default `systemClock` (Date.now). */
  clock?: Clock;
  /** Default `wait`. */
  onClockBackwards?: BackwardsMode;
  /** How far (ms) the clock may read behind its highest reading (or the floor) before `next()` refuses. Default 5. */
  backwardsToleranceMs?: number;
  /** Default `wait`. */
  onSequenceExhausted?: ExhaustedMode;
  /** Borrow mode: how far (ms) a borrowed tick may start after the clock's time. Default 100. */
  maxLeadMs?: number;
  /**
   * Never issue an ID whose timestamp is <= floor (ms since the Unix epoch): the previous holder's high-water mark.
   * A clock behind the floor counts as a clock that moved backwards to it. Raise later with `setFloor`.
   */
  floor?: number;
  /**
   * Never issue an ID whose timestamp is > ceiling (ms since the Unix epoch): the bound the holder promised the
   * cluster. Needing a later tick throws `CeilingReachedError`. Raise later with `setCeiling`.
   */
  ceiling?: number;
  /**
   * Called with the clock's reading each time the generator leaves its fast path (a new tick, a used-up tick, a
   * clock behind its last reading, or after `recheck()`) and again after every wait inside `next()`, `nextBatch()`
   * and `fill()`, before an ID is issued. Throwing from it aborts the call before any ID is issued (a lease uses it
   * to stop at its deadline). The fast path (same tick, sequence left) does not call it: it continues for at most
   * the rest of the current tick, or `maxLeadMs` + one tick in borrow mode, or 2^sequenceBits IDs while the clock
   * stands still.
   */
  guard?: (nowMs: number) => void;
}

export const DEFAULT_BACKWARDS_TOLERANCE_MS = 5;
export const DEFAULT_MAX_LEAD_MS = 100;

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
const LO = LITTLE_ENDIAN ? 0 : 1;
const HI = 1 - LO;
const MAX_BATCH = 1 << 27;

/**
 * A Snowflake ID generator for one (datacenter, worker) pair. Not thread-safe by design: one instance per event loop.
 * Performs no I/O and reads time only through the injected clock.
 *
 * IDs from one instance are strictly increasing. Errors: `ClockMovedBackwardsError` (beyond tolerance),
 * `CeilingReachedError`, `TimestampOverflowError` (layout exhausted), and at construction `EpochInFutureError`,
 * `WorkerIdRangeError`, `DatacenterIdRangeError`, `OptionError`, `BoundError`.
 */
export class Snowflake {
  readonly layout: Layout;
  readonly worker: number;
  readonly datacenter: number;
  readonly clock: Clock;
  readonly onClockBackwards: BackwardsMode;
  readonly onSequenceExhausted: ExhaustedMode;
  readonly backwardsToleranceMs: number;
  readonly maxLeadMs: number;
  private readonly guard: ((nowMs: number) => void) | undefined;

  // Hot state. `tick` is the last tick used (or the floor's tick, marked used up); `seq` the last sequence in it.
  private tick: number;
  private seq: number;
  private cur = 0n;
  /** First ms after `tick`: while the clock is below it (and not backwards) the fast path may continue in `tick`. */
  private tickEndMs: number;
  /** Highest clock reading seen, or the floor if later: a reading below it means the clock moved backwards. */
  private refMs: number;
  private refIsFloor: boolean;
  private lastEmittedTick = -1;
  private floorMs: number | undefined;
  private ceilingMs: number | undefined;
  private ceilingTick = Number.POSITIVE_INFINITY;

  private readonly maxSeq: number;
  private readonly seqStep: bigint;
  private readonly seqStepNum: number;
  private readonly epochMs: number;
  private readonly unitMs: number;

  constructor(options: SnowflakeOptions = {}) {
    const layout = resolveLayout(options.layout ?? DEFAULT_LAYOUT_NAME);
    this.layout = layout;
    const worker = options.worker ?? 0;
    const datacenter = options.datacenter ?? 0;
    if (!Number.isInteger(worker) || worker < 0 || worker > layout.maxWorker) {
      throw new WorkerIdRangeError(worker, layout.maxWorker, layout.name);
    }
    if (!Number.isInteger(datacenter) || datacenter < 0 || datacenter > layout.maxDatacenter) {
      throw new DatacenterIdRangeError(datacenter, layout.maxDatacenter, layout.name);
    }
    this.worker = worker;
    this.datacenter = datacenter;
    this.clock = options.clock ?? systemClock;
    this.onClockBackwards = oneOf('onClockBackwards', options.onClockBackwards ?? 'wait', ['wait', 'borrow']);
    this.onSequenceExhausted = oneOf('onSequenceExhausted', options.onSequenceExhausted ?? 'wait', [
      'wait',
      'borrow',
    ]);
    this.backwardsToleranceMs = nonNegative(
      'backwardsToleranceMs',
      options.backwardsToleranceMs ?? DEFAULT_BACKWARDS_TOLERANCE_MS,
    );
    this.maxLeadMs = nonNegative('maxLeadMs', options.maxLeadMs ?? DEFAULT_MAX_LEAD_MS);
    if (options.guard !== undefined && typeof options.guard !== 'function') {
      throw new OptionError('guard', 'a function', options.guard);
    }
    this.guard = options.guard;
    this.maxSeq = layout.maxSequence;
    this.seqStep = 1n << BigInt(layout.sequenceShift);
    this.seqStepNum = 2 ** layout.sequenceShift;
    this.epochMs = layout.epochMs;
    this.unitMs = layout.unitMs;

    const now = this.readClock();
    if (now < layout.epochMs) throw new EpochInFutureError(layout.epochMs, now, layout.name);
    if (this.tickOf(now) > layout.maxTick) {
      throw new TimestampOverflowError(new Date(layout.endOfLifeMs), layout.timestampBits, layout.name);
    }
    this.refMs = now;
    this.refIsFloor = false;
    this.tick = -1;
    this.seq = this.maxSeq; // nothing issued yet: force the slow path
    this.tickEndMs = layout.epochMs;
    if (options.ceiling !== undefined) this.setCeiling(options.ceiling);
    if (options.floor !== undefined) this.setFloor(options.floor);
  }

  /** The next ID. */
  next(): bigint {
    const now = this.clock.now();
    // Fast path: clock not behind, still inside the current tick (or a borrowed one), sequence left.
    if (now >= this.refMs && now < this.tickEndMs && this.seq < this.maxSeq) {
      this.refMs = now;
      this.seq++;
      this.cur += this.seqStep;
      return this.cur;
    }
    return this.nextSlow(now);
  }

  /** The next ID as decimal text. */
  nextString(): string {
    return this.next().toString();
  }

  /**
   * `n` IDs in increasing order. Each run of sequence numbers costs one clock read and is written into the typed
   * array as two 32-bit halves, so a batch is far cheaper per ID than `next()`.
   */
  nextBatch(n: number): BigInt64Array {
    if (!Number.isInteger(n) || n < 0 || n > MAX_BATCH)
      throw new OptionError('n', `an integer in [0, ${MAX_BATCH}]`, n);
    return this.fill(new BigInt64Array(n));
  }

  /** Fill `out[offset, offset + count)` with IDs (reuse one array to avoid allocation). Returns `out`. */
  fill(out: BigInt64Array, offset = 0, count = out.length - offset): BigInt64Array {
    if (!Number.isInteger(offset) || offset < 0 || offset > out.length) {
      throw new OptionError('offset', `an integer in [0, ${out.length}]`, offset);
    }
    if (!Number.isInteger(count) || count < 0 || offset + count > out.length) {
      throw new OptionError('count', `an integer in [0, ${out.length - offset}]`, count);
    }
    const words = new Uint32Array(out.buffer, out.byteOffset, out.length * 2);
    const end = offset + count;
    const step = this.seqStepNum;
    let i = offset;
    while (i < end) {
      const first = this.next();
      out[i++] = first;
      const k = Math.min(end - i, this.maxSeq - this.seq);
      if (k <= 0) continue;
      const lo = Number(first & 0xffffffffn);
      if (lo + k * step <= 0xffffffff) {
        // The sequence field lies below bit 32 here: only the low word changes.
        const hi = Number(first >> 32n);
        for (let j = 1, w = 2 * i; j <= k; j++, w += 2) {
          words[w + LO] = lo + j * step;
          words[w + HI] = hi;
        }
      } else {
        let v = first;
        for (let j = 0; j < k; j++) {
          v += this.seqStep;
          out[i + j] = v;
        }
      }
      this.seq += k;
      this.cur = first + BigInt(k) * this.seqStep;
      i += k;
    }
    return out;
  }

  /** Highest timestamp (ms since the Unix epoch, tick start) of an ID issued so far; undefined before the first. */
  get lastTimestamp(): number | undefined {
    return this.lastEmittedTick < 0 ? undefined : this.epochMs + this.lastEmittedTick * this.unitMs;
  }

  get floor(): number | undefined {
    return this.floorMs;
  }

  get ceiling(): number | undefined {
    return this.ceilingMs;
  }

  /** Raise the floor (ms). Lowering it, or raising it above the ceiling, throws `BoundError`. */
  setFloor(ms: number): void {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw new BoundError('floor', ms, 'a finite number of ms >= 0');
    }
    if (this.floorMs !== undefined && ms < this.floorMs) {
      throw new BoundError('floor', ms, `>= the current floor ${this.floorMs} (a floor can only be raised)`);
    }
    if (this.ceilingMs !== undefined && ms > this.ceilingMs) {
      throw new BoundError('floor', ms, `<= the ceiling ${this.ceilingMs}`);
    }
    this.floorMs = ms;
    const floorTick = this.tickOf(ms);
    if (floorTick >= this.tick) {
      // Every ID in the floor's tick has timestamp <= floor: mark that tick used up.
      this.tick = floorTick;
      this.seq = this.maxSeq;
      this.tickEndMs = this.epochMs + (floorTick + 1) * this.unitMs;
    }
    if (ms > this.refMs) {
      this.refMs = ms;
      this.refIsFloor = true;
    }
  }

  /** Raise the ceiling (ms). Lowering it, or setting it below the floor, throws `BoundError`. */
  setCeiling(ms: number): void {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw new BoundError('ceiling', ms, 'a finite number of ms >= 0');
    }
    if (this.ceilingMs !== undefined && ms < this.ceilingMs) {
      throw new BoundError(
        'ceiling',
        ms,
        `>= the current ceiling ${this.ceilingMs} (a ceiling can only be raised)`,
      );
    }
    if (this.floorMs !== undefined && ms < this.floorMs) {
      throw new BoundError('ceiling', ms, `>= the floor ${this.floorMs}`);
    }
    this.ceilingMs = ms;
    this.ceilingTick = this.tickOf(ms);
    // A first ceiling below the tick in use: the fast path must not go on in that tick.
    if (this.ceilingTick < this.tick) this.seq = this.maxSeq;
  }

  /**
   * Sends the next call down the slow path (and so through `guard`) even inside the current tick, e.g. once a lease
   * is lost, so that generation stops at once rather than at the end of the tick.
   */
  recheck(): void {
    this.tickEndMs = Number.NEGATIVE_INFINITY;
  }

  private nextSlow(now: number): bigint {
    this.guard?.(now);
    for (;;) {
      if (!(now >= this.refMs)) {
        if (!Number.isFinite(now)) throw new OptionError('clock.now()', 'a finite number of ms', now);
        const moved = this.refMs - now;
        if (moved > this.backwardsToleranceMs) {
          throw new ClockMovedBackwardsError(
            moved,
            this.backwardsToleranceMs,
            this.refIsFloor ? 'floor' : 'clock',
          );
        }
        if (this.onClockBackwards === 'wait') {
          now = this.waitFor(this.refMs);
          continue;
        }
        // borrow: carry on from the last tick used; the reference stays until the clock passes it again.
      } else {
        this.refMs = now;
        this.refIsFloor = false;
      }
      const nowTick = this.tickOf(now);
      if (nowTick > this.tick) return this.startTick(nowTick);
      if (this.seq < this.maxSeq) {
        this.tickEndMs = this.epochMs + (this.tick + 1) * this.unitMs; // undoes recheck()
        this.seq++;
        this.cur += this.seqStep;
        return this.cur;
      }
      // The last tick is used up: the next tick is the only way on. Refuse now if it can never be used.
      const nextTick = this.tick + 1;
      this.checkTick(nextTick);
      const nextStart = this.epochMs + nextTick * this.unitMs;
      if (this.onSequenceExhausted === 'borrow') {
        if (nextStart - now <= this.maxLeadMs) return this.startTick(nextTick);
        now = this.waitFor(nextStart - this.maxLeadMs);
      } else {
        now = this.waitFor(nextStart);
      }
    }
  }

  private startTick(tick: number): bigint {
    this.checkTick(tick);
    this.tick = tick;
    this.lastEmittedTick = tick;
    this.seq = 0;
    this.tickEndMs = this.epochMs + (tick + 1) * this.unitMs;
    this.cur = composeTick(this.layout, tick, this.datacenter, this.worker, 0);
    return this.cur;
  }

  private checkTick(tick: number): void {
    if (tick > this.ceilingTick) throw new CeilingReachedError(this.ceilingMs as number);
    if (tick > this.layout.maxTick) {
      throw new TimestampOverflowError(
        new Date(this.layout.endOfLifeMs),
        this.layout.timestampBits,
        this.layout.name,
      );
    }
  }

  /**
   * Wait until the clock reads >= target; return early if it falls back beyond the tolerance (caller throws). The
   * guard sees the reading after the wait: time went by since it last passed.
   */
  private waitFor(target: number): number {
    const clock = this.clock;
    const giveUpBelow = this.refMs - this.backwardsToleranceMs;
    let now = clock.now();
    while (now < target && now >= giveUpBelow) {
      clock.waitUntil?.(target);
      now = clock.now();
    }
    this.guard?.(now);
    return now;
  }

  private readClock(): number {
    const now = this.clock.now();
    if (typeof now !== 'number' || !Number.isFinite(now)) {
      throw new OptionError('clock.now()', 'a finite number of ms', now);
    }
    return now;
  }

  private tickOf(ms: number): number {
    return Math.floor((ms - this.epochMs) / this.unitMs);
  }
}

function oneOf<T extends string>(field: string, value: T, allowed: readonly T[]): T {
  if (!allowed.includes(value))
    throw new OptionError(field, allowed.map((a) => `'${a}'`).join(' or '), value);
  return value;
}

function nonNegative(field: string, value: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new OptionError(field, 'a finite number >= 0', value);
  }
  return value;
}
