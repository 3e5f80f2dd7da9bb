/**
 * Typed errors of the ID core. Every error names what was wrong and, where there is one, the allowed range,
 * so a caller (or the CLI) can print `err.message` as is. `code` is stable for programmatic checks.
 */
export class FloeIdError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A layout field is invalid (wrong type, out of range, or the bit widths do not sum to 63). */
export class LayoutError extends FloeIdError {
  constructor(
    readonly field: string,
    readonly allowed: string,
    readonly value: unknown,
    detail?: string,
  ) {
    super(
      'ERR_LAYOUT',
      `invalid layout: ${field} = ${show(value)}; allowed: ${allowed}${detail ? ` (${detail})` : ''}`,
    );
  }
}

/** A generator or buffer option is out of its allowed range. */
export class OptionError extends FloeIdError {
  constructor(
    readonly field: string,
    readonly allowed: string,
    readonly value: unknown,
  ) {
    super('ERR_OPTION', `invalid option: ${field} = ${show(value)}; allowed: ${allowed}`);
  }
}

/** No preset has this name. */
export class UnknownLayoutError extends FloeIdError {
  constructor(
    readonly layoutName: string,
    readonly known: readonly string[],
  ) {
    super('ERR_UNKNOWN_LAYOUT', `unknown layout "${layoutName}"; known layouts: ${known.join(', ')}`);
  }
}

/** A part of an ID (timestamp, datacenter, worker, sequence) is outside what the layout can hold. */
export class IdPartRangeError extends FloeIdError {
  constructor(
    readonly field: string,
    readonly value: unknown,
    readonly min: number | bigint,
    readonly max: number | bigint,
    /** What the range belongs to, e.g. `layout twitter`. */
    context: string,
    code = 'ERR_ID_PART_RANGE',
  ) {
    super(
      code,
      `${field} ${show(value)} is out of range: ${field} must be an integer in [${min}, ${max}] for ${context}`,
    );
  }
}

/** The worker ID does not fit the layout's worker bits. */
export class WorkerIdRangeError extends IdPartRangeError {
  constructor(value: unknown, max: number, layoutName: string) {
    super('worker', value, 0, max, `layout ${layoutName}`, 'ERR_WORKER_ID_RANGE');
  }
}

/** The datacenter ID does not fit the layout's datacenter bits. */
export class DatacenterIdRangeError extends IdPartRangeError {
  constructor(value: unknown, max: number, layoutName: string) {
    super('datacenter', value, 0, max, `layout ${layoutName}`, 'ERR_DATACENTER_ID_RANGE');
  }
}

/** Text or a number that is not an ID: IDs are integers in [0, 2^63 - 1]. */
export class InvalidIdError extends FloeIdError {
  constructor(
    readonly input: unknown,
    reason: string,
  ) {
    super('ERR_INVALID_ID', `invalid id ${show(input)}: ${reason}; an id is an integer in [0, 2^63 - 1]`);
  }
}

/** The layout's epoch is later than the clock's current time: IDs would need negative timestamps. */
export class EpochInFutureError extends FloeIdError {
  constructor(
    readonly epochMs: number,
    readonly nowMs: number,
    layoutName: string,
  ) {
    super(
      'ERR_EPOCH_IN_FUTURE',
      `layout ${layoutName}: epochMs ${iso(epochMs)} is ${epochMs - nowMs} ms after the clock's time ${iso(nowMs)}; ` +
        `the epoch must be <= the current time`,
    );
  }
}

/** The layout's timestamp bits are exhausted: the layout ran out at `endOfLife`. */
export class TimestampOverflowError extends FloeIdError {
  constructor(
    readonly endOfLife: Date,
    readonly timestampBits: number,
    layoutName: string,
  ) {
    super(
      'ERR_TIMESTAMP_OVERFLOW',
      `layout ${layoutName} ran out of time on ${endOfLife.toISOString()}: its ${timestampBits} timestamp bits are exhausted`,
    );
  }
}

/**
 * The clock moved backwards by more than the tolerance. `movedMs` is how far behind the reference it reads:
 * the highest clock reading seen so far, or the floor (the previous holder's high-water mark), whichever is later.
 */
export class ClockMovedBackwardsError extends FloeIdError {
  constructor(
    readonly movedMs: number,
    readonly toleranceMs: number,
    readonly reference: 'clock' | 'floor',
  ) {
    super(
      'ERR_CLOCK_BACKWARDS',
      reference === 'clock'
        ? `clock moved backwards by ${movedMs} ms (tolerance ${toleranceMs} ms); refusing to generate ids`
        : `clock is ${movedMs} ms behind the floor (the previous holder's high-water mark; tolerance ${toleranceMs} ms); refusing to generate ids`,
    );
  }
}

/** The next ID would have a timestamp above the ceiling the generator's holder promised. */
export class CeilingReachedError extends FloeIdError {
  constructor(readonly ceilingMs: number) {
    super(
      'ERR_CEILING_REACHED',
      `ceiling reached: the next id would have a timestamp after the ceiling ${iso(ceilingMs)} (${ceilingMs}); ` +
        'raise it with setCeiling()',
    );
  }
}

/** Lowering a floor or ceiling, or a floor above the ceiling. */
export class BoundError extends FloeIdError {
  constructor(
    readonly field: 'floor' | 'ceiling',
    readonly value: number,
    readonly allowed: string,
  ) {
    super('ERR_BOUND', `${field} ${show(value)} refused: ${field} must be ${allowed}`);
  }
}

/** A segment fetch returned a range that is empty, unsafe, or overlaps / goes behind what was already accepted. */
export class SegmentRangeError extends FloeIdError {
  constructor(
    readonly key: string,
    readonly start: unknown,
    readonly end: unknown,
    allowed: string,
  ) {
    super(
      'ERR_SEGMENT_RANGE',
      `segment "${key}": fetched range [${show(start)}, ${show(end)}) refused; allowed: ${allowed}`,
    );
  }
}

/** No value could be handed out: the fetch failed (see `cause`), the waiters queue is full, or the buffer is closed. */
export class SegmentUnavailableError extends FloeIdError {
  constructor(
    readonly key: string,
    readonly reason: 'fetch-failed' | 'queue-full' | 'closed',
    detail: string,
    cause?: unknown,
  ) {
    super(
      'ERR_SEGMENT_UNAVAILABLE',
      `segment "${key}" unavailable (${reason}): ${detail}`,
      cause === undefined ? undefined : { cause },
    );
  }
}

/** A short code that this codec did not produce. */
export class InvalidShortCodeError extends FloeIdError {
  constructor(
    readonly input: string,
    reason: string,
  ) {
    super('ERR_INVALID_SHORT_CODE', `invalid short code ${show(input)}: ${reason}`);
  }
}

function show(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v.length > 60 ? `${v.slice(0, 60)}...` : v);
  if (typeof v === 'bigint') return `${v}`;
  return String(v);
}

function iso(ms: number): string {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? String(ms) : d.toISOString();
}
