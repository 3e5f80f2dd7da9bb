import { DatacenterIdRangeError, IdPartRangeError, InvalidIdError, WorkerIdRangeError } from './errors.js';
import type { Layout, LayoutSpec } from './layout.js';
import { DEFAULT_LAYOUT_NAME, resolveLayout } from './presets.js';

/** The parts of a decoded ID. */
export interface IdParts {
  /** Start of the ID's tick, in ms since the Unix epoch. */
  timestamp: number;
  /** `timestamp` as a Date. */
  time: Date;
  datacenter: number;
  worker: number;
  sequence: number;
}

/** What `compose` takes. `timestamp` is ms since the Unix epoch (rounded down to the layout's tick); others default 0. */
export interface ComposeParts {
  timestamp: number | Date;
  datacenter?: number;
  worker?: number;
  sequence?: number;
}

/** Largest ID: the sign bit is always 0. */
export const MAX_ID = (1n << 63n) - 1n;

/** Split an ID into its parts. `id` may be a bigint, a safe-integer number, or decimal / 0x-hex text. */
export function decode(
  id: bigint | number | string,
  layout: Layout | LayoutSpec | string = DEFAULT_LAYOUT_NAME,
): IdParts {
  const l = resolveLayout(layout);
  const v = toId(id);
  const tick = Number(v >> BigInt(l.timestampShift));
  const timestamp = l.epochMs + tick * l.unitMs;
  return {
    timestamp,
    time: new Date(timestamp),
    datacenter: field(v, l.datacenterShift, l.datacenterBits),
    worker: field(v, l.workerShift, l.workerBits),
    sequence: field(v, l.sequenceShift, l.sequenceBits),
  };
}

/**
 * Build an ID from its parts. Throws `IdPartRangeError` (or `WorkerIdRangeError` / `DatacenterIdRangeError`)
 * naming the part and its allowed range. `decode(compose(p))` returns `p` when `p.timestamp` is tick-aligned.
 */
export function compose(
  parts: ComposeParts,
  layout: Layout | LayoutSpec | string = DEFAULT_LAYOUT_NAME,
): bigint {
  const l = resolveLayout(layout);
  const ms = parts.timestamp instanceof Date ? parts.timestamp.getTime() : parts.timestamp;
  const lastMs = l.endOfLifeMs - 1;
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < l.epochMs || ms > lastMs) {
    throw new IdPartRangeError(
      'timestamp',
      ms,
      l.epochMs,
      lastMs,
      `layout ${l.name} (ms since the Unix epoch)`,
    );
  }
  const tick = Math.floor((ms - l.epochMs) / l.unitMs);
  const datacenter = parts.datacenter ?? 0;
  const worker = parts.worker ?? 0;
  const sequence = parts.sequence ?? 0;
  if (!isIntIn(datacenter, l.maxDatacenter))
    throw new DatacenterIdRangeError(datacenter, l.maxDatacenter, l.name);
  if (!isIntIn(worker, l.maxWorker)) throw new WorkerIdRangeError(worker, l.maxWorker, l.name);
  if (!isIntIn(sequence, l.maxSequence)) {
    throw new IdPartRangeError('sequence', sequence, 0, l.maxSequence, `layout ${l.name}`);
  }
  return composeTick(l, tick, datacenter, worker, sequence);
}

/** Compose from an already validated tick and parts (no checks): the generator's per-tick base. */
export function composeTick(
  l: Layout,
  tick: number,
  datacenter: number,
  worker: number,
  sequence: number,
): bigint {
  return (
    (BigInt(tick) << BigInt(l.timestampShift)) |
    (BigInt(datacenter) << BigInt(l.datacenterShift)) |
    (BigInt(worker) << BigInt(l.workerShift)) |
    (BigInt(sequence) << BigInt(l.sequenceShift))
  );
}

/**
 * Parse and range-check an ID: a bigint, a non-negative safe-integer number, or text in decimal or `0x` hex
 * (surrounding spaces ignored). Throws `InvalidIdError`.
 */
export function toId(input: bigint | number | string): bigint {
  let v: bigint;
  if (typeof input === 'bigint') {
    v = input;
  } else if (typeof input === 'number') {
    if (!Number.isSafeInteger(input))
      throw new InvalidIdError(input, 'not a safe integer (pass a bigint or text)');
    v = BigInt(input);
  } else if (typeof input === 'string') {
    const text = input.trim();
    if (/^(?:[0-9]{1,40}|0x[0-9a-f]{1,32})$/i.test(text)) v = BigInt(text);
    else throw new InvalidIdError(input, 'not a decimal or 0x-hex integer');
  } else {
    throw new InvalidIdError(input, `a ${typeof input} is not an id`);
  }
  if (v < 0n) throw new InvalidIdError(input, 'negative');
  if (v > MAX_ID) throw new InvalidIdError(input, 'larger than 2^63 - 1 (the sign bit must be 0)');
  return v;
}

/** `0x` + 16 lower-case hex digits. */
export function toHex(id: bigint): string {
  return `0x${id.toString(16).padStart(16, '0')}`;
}

function field(v: bigint, shift: number, bits: number): number {
  return bits === 0 ? 0 : Number((v >> BigInt(shift)) & ((1n << BigInt(bits)) - 1n));
}

function isIntIn(v: unknown, max: number): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= max;
}
