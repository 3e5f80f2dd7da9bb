import { LayoutError } from './errors.js';

/**
 * Where the sequence sits relative to the node (datacenter + worker) fields, below the timestamp.
 * - `node-sequence` (default, Twitter, Baidu): `time | datacenter | worker | sequence`
 * - `sequence-node` (Sonyflake): `time | sequence | datacenter | worker`
 * Either way IDs of one generator increase with (timestamp, sequence).
 */
export type FieldOrder = 'node-sequence' | 'sequence-node';

/**
 * What a caller writes to describe a 64-bit Snowflake layout. The sign bit is always 0, so the four widths sum to 63.
 *
 * Rules (each violation is a `LayoutError` naming the field and the allowed range):
 * - `epochMs`: integer ms since the Unix epoch, >= 0. The generator also refuses an epoch after its clock's time.
 * - `unitMs`: the length of one timestamp tick in ms, a positive integer (1 = Twitter, 10 = Sonyflake, 1000 = Baidu).
 * - `timestampBits` >= 1; `datacenterBits`, `workerBits`, `sequenceBits` in [0, 31]; all integers; sum = 63.
 * - The layout must run out (epochMs + 2^timestampBits * unitMs) no later than 8.64e15 ms (+275760-09-13, the last
 *   instant a JavaScript Date holds), so every timestamp it encodes is a safe integer and a valid Date.
 */
export interface LayoutSpec {
  /** Shown in errors and by `floe layouts`. Default `custom`. */
  name?: string;
  epochMs: number;
  unitMs: number;
  timestampBits: number;
  datacenterBits: number;
  workerBits: number;
  sequenceBits: number;
  /** Default `node-sequence`. */
  order?: FieldOrder;
}

/** A validated layout plus the derived shifts, maxima and limits. Create with `defineLayout`; immutable. */
export interface Layout {
  readonly name: string;
  readonly epochMs: number;
  readonly unitMs: number;
  readonly timestampBits: number;
  readonly datacenterBits: number;
  readonly workerBits: number;
  readonly sequenceBits: number;
  readonly order: FieldOrder;
  readonly timestampShift: number;
  readonly datacenterShift: number;
  readonly workerShift: number;
  readonly sequenceShift: number;
  /** Largest timestamp value in ticks since the epoch: 2^timestampBits - 1. */
  readonly maxTick: number;
  readonly maxDatacenter: number;
  readonly maxWorker: number;
  readonly maxSequence: number;
  /** How many generators can run at once: 2^(datacenterBits + workerBits). */
  readonly maxGenerators: number;
  /** The most IDs one generator can issue per second without borrowing: 2^sequenceBits * 1000 / unitMs. */
  readonly idsPerSecond: number;
  /** First instant (ms since the Unix epoch) the layout can no longer encode: epochMs + 2^timestampBits * unitMs. */
  readonly endOfLifeMs: number;
}

/** The last instant a JavaScript Date can hold (ECMA-262 time value limit). */
export const MAX_DATE_MS = 8.64e15;

export const ID_BITS = 63;

const validated = new WeakSet<object>();

/** Validate a layout spec and compute its derived fields. Throws `LayoutError`. */
export function defineLayout(spec: LayoutSpec): Layout {
  if (typeof spec !== 'object' || spec === null) throw new LayoutError('layout', 'an object', spec);
  const name = spec.name ?? 'custom';
  if (typeof name !== 'string' || name.length === 0 || name.length > 64) {
    throw new LayoutError('name', 'a string of 1..64 characters', name);
  }
  const order = spec.order ?? 'node-sequence';
  if (order !== 'node-sequence' && order !== 'sequence-node') {
    throw new LayoutError('order', "'node-sequence' or 'sequence-node'", order);
  }
  checkInt('epochMs', spec.epochMs, 0, MAX_DATE_MS - 1);
  checkInt('unitMs', spec.unitMs, 1, MAX_DATE_MS);
  checkInt('timestampBits', spec.timestampBits, 1, ID_BITS);
  checkInt('datacenterBits', spec.datacenterBits, 0, 31);
  checkInt('workerBits', spec.workerBits, 0, 31);
  checkInt('sequenceBits', spec.sequenceBits, 0, 31);
  const { epochMs, unitMs, timestampBits: tsBits, datacenterBits: dcBits, workerBits: wkBits } = spec;
  const seqBits = spec.sequenceBits;
  const sum = tsBits + dcBits + wkBits + seqBits;
  if (sum !== ID_BITS) {
    throw new LayoutError(
      'timestampBits + datacenterBits + workerBits + sequenceBits',
      'exactly 63',
      sum,
      `${tsBits}+${dcBits}+${wkBits}+${seqBits}`,
    );
  }
  const endOfLifeMs = epochMs + 2 ** tsBits * unitMs;
  if (endOfLifeMs > MAX_DATE_MS) {
    // Largest tsBits that still ends within the Date range, for the message.
    const maxBits = Math.floor(Math.log2((MAX_DATE_MS - epochMs) / unitMs));
    throw new LayoutError(
      'timestampBits',
      `at most ${maxBits} with unitMs ${unitMs} and this epoch`,
      tsBits,
      'the layout would outlive the JavaScript Date range (+275760-09-13)',
    );
  }
  const nodeSequence = order === 'node-sequence';
  const sequenceShift = nodeSequence ? 0 : wkBits + dcBits;
  const workerShift = nodeSequence ? seqBits : 0;
  const datacenterShift = workerShift + wkBits;
  const layout: Layout = Object.freeze({
    name,
    epochMs,
    unitMs,
    timestampBits: tsBits,
    datacenterBits: dcBits,
    workerBits: wkBits,
    sequenceBits: seqBits,
    order,
    timestampShift: ID_BITS - tsBits,
    datacenterShift,
    workerShift,
    sequenceShift,
    maxTick: 2 ** tsBits - 1,
    maxDatacenter: 2 ** dcBits - 1,
    maxWorker: 2 ** wkBits - 1,
    maxSequence: 2 ** seqBits - 1,
    maxGenerators: 2 ** (dcBits + wkBits),
    idsPerSecond: (2 ** seqBits * 1000) / unitMs,
    endOfLifeMs,
  });
  validated.add(layout);
  return layout;
}

/** Accept a layout from `defineLayout` as is; validate anything else. */
export function asLayout(layout: Layout | LayoutSpec): Layout {
  return validated.has(layout) ? (layout as Layout) : defineLayout(layout);
}

/** The ms (since the Unix epoch) at which tick `tick` of the layout begins. */
export function tickStartMs(layout: Layout, tick: number): number {
  return layout.epochMs + tick * layout.unitMs;
}

/** The tick (since the layout epoch) containing instant `ms`. Negative before the epoch. */
export function tickOf(layout: Layout, ms: number): number {
  return Math.floor((ms - layout.epochMs) / layout.unitMs);
}

function checkInt(field: string, value: unknown, min: number, max: number): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new LayoutError(field, `an integer in [${min}, ${max}]`, value);
  }
}

/**
 * What identifies how a layout maps (time, worker, sequence) to an ID: two layouts with the same fingerprint make the
 * same IDs. The cluster pins one per app (docs/leases.md, "One layout per app"), since floors are kept in
 * milliseconds and two layouts would map them to different ticks, so IDs of successive holders could collide.
 */
export function layoutFingerprint(l: Layout): string {
  return `e${l.epochMs}/u${l.unitMs}/t${l.timestampBits}/d${l.datacenterBits}/w${l.workerBits}/s${l.sequenceBits}/${l.order}`;
}
