// A counter per key: INCRBY returning the new value, and GET. bigint, because Floe's sequences
// are 64-bit and a JavaScript number loses integers past 2^53.

import type { HistoryRecord, RecordDecoder } from '../history-file.js';
import { describeValue, type Model, UNKNOWN, type Unknown } from '../model.js';
import { hashPrimitive } from './hash.js';

export type CounterInput = { op: 'incr'; delta: bigint } | { op: 'get' };
/** incr: the value after adding delta. get: the current value. */
export type CounterOutput = bigint;

export interface CounterModelOptions {
  /** Value of every counter before any increment. Default 0n. */
  initial?: bigint;
}

export function counterModel(options: CounterModelOptions = {}): Model<bigint, CounterInput, CounterOutput> {
  const initial = options.initial ?? 0n;
  return {
    name: 'counter',
    init: () => initial,
    step(state, input, output) {
      const next = input.op === 'incr' ? state + input.delta : state;
      return output === UNKNOWN || output === next ? { ok: true, state: next } : { ok: false };
    },
    equal: (a, b) => a === b,
    hash: hashPrimitive,
    readOnly: (input) => input.op === 'get',
    describeOperation: describeCounterOperation,
    describeState: (s) => s.toString(),
  };
}

export function describeCounterOperation(input: CounterInput, output: CounterOutput | Unknown): string {
  const out = output === UNKNOWN ? '?' : output.toString();
  return input.op === 'incr' ? `incr(${input.delta}) -> ${out}` : `get() -> ${out}`;
}

/** A JSON number (a safe integer) or a decimal string, as a bigint. */
export function toBigInt(v: unknown, what: string): bigint {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
  if (typeof v === 'string' && /^-?\d+$/.test(v)) return BigInt(v);
  throw new Error(
    `${what} must be an integer (a safe-integer number or a decimal string), got ${describeValue(v)}`,
  );
}

/** Records: {op:'incr', input: delta (default 1), output: newValue}, {op:'get', output: value}. */
export const decodeCounterRecord: RecordDecoder<CounterInput, CounterOutput> = (r: HistoryRecord) => {
  if (r.op !== 'incr' && r.op !== 'get') {
    throw new Error(`counter op must be "incr" or "get", got ${JSON.stringify(r.op)}`);
  }
  const output = r.returnTime !== null ? toBigInt(r.output, `${r.op} output`) : 0n;
  switch (r.op) {
    case 'incr':
      return { input: { op: 'incr', delta: r.input == null ? 1n : toBigInt(r.input, 'incr input') }, output };
    case 'get':
      return { input: { op: 'get' }, output };
  }
};
