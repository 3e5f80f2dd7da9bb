// A read/write/compare-and-set register per key: the model of a linearizable key-value store.

import type { HistoryRecord, RecordDecoder } from '../history-file.js';
import { describeValue, isUnknownOutcome, type Model, UNKNOWN, type Unknown } from '../model.js';
import { hashPrimitive } from './hash.js';

/** null is "absent": the initial value by default, and what a read of a missing key returns. */
export type RegisterValue = string | number | boolean | null;

export type RegisterInput =
  | { op: 'read' }
  | { op: 'write'; value: RegisterValue }
  /** Sets value only if the register holds expected. */
  | { op: 'cas'; expected: RegisterValue; value: RegisterValue };

/**
 * read: the value read. write: ignored (use null). cas: true if it swapped, false if the register
 * did not hold expected.
 */
export type RegisterOutput = RegisterValue;

export interface RegisterModelOptions {
  /** Value of every key before any write. Default null (absent). */
  initial?: RegisterValue;
}

/** One register per key (operations are partitioned by key). */
export function kvModel(
  options: RegisterModelOptions = {},
): Model<RegisterValue, RegisterInput, RegisterOutput> {
  const initial = options.initial ?? null;
  return {
    name: 'kv',
    init: () => initial,
    step(state, input, output) {
      switch (input.op) {
        case 'read':
          return output === UNKNOWN || output === state ? { ok: true, state } : { ok: false };
        case 'write':
          return { ok: true, state: input.value };
        case 'cas': {
          const matches = state === input.expected;
          // An unknown CAS applied at this point did whatever the state dictates.
          if (output === UNKNOWN) return { ok: true, state: matches ? input.value : state };
          if (output === true) return matches ? { ok: true, state: input.value } : { ok: false };
          if (output === false) return matches ? { ok: false } : { ok: true, state };
          return { ok: false }; // a CAS answers true or false; anything else is a bug
        }
      }
    },
    equal: Object.is,
    hash: hashPrimitive,
    // Reads and failed CAS never change the register.
    readOnly: (input, output) => input.op === 'read' || (input.op === 'cas' && output === false),
    // A write (or CAS) of unknown outcome matters only if someone saw its value: a read returned
    // it, or a successful CAS expected it. Workloads write unique values, so most timed-out writes
    // are invisible, and leaving them out keeps a leader change from multiplying the search.
    skippableUnknowns(partition) {
      const seen = new Set<RegisterValue>();
      for (const op of partition) {
        if (isUnknownOutcome(op)) continue;
        if (op.input.op === 'read') seen.add(op.output);
        else if (op.input.op === 'cas' && op.output === true) seen.add(op.input.expected);
      }
      return partition.filter(
        (op) => isUnknownOutcome(op) && op.input.op !== 'read' && !seen.has(op.input.value),
      );
    },
    describeOperation: describeRegisterOperation,
    describeState: describeValue,
  };
}

export function describeRegisterOperation(input: RegisterInput, output: RegisterOutput | Unknown): string {
  const out = output === UNKNOWN ? '?' : describeValue(output);
  switch (input.op) {
    case 'read':
      return `read() -> ${out}`;
    case 'write':
      return `write(${describeValue(input.value)})${output === UNKNOWN ? ' -> ?' : ''}`;
    case 'cas':
      return `cas(${describeValue(input.expected)} -> ${describeValue(input.value)}) -> ${out}`;
  }
}

function registerValue(v: unknown, what: string): RegisterValue {
  if (v === undefined || v === null) return null;
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
  throw new Error(`${what} must be a string, number, boolean or null, got ${describeValue(v)}`);
}

/**
 * Records: {op:'read', output: v}, {op:'write', input: v}, {op:'cas', input: {expected, value},
 * output: true|false}.
 */
export const decodeRegisterRecord: RecordDecoder<RegisterInput, RegisterOutput> = (r: HistoryRecord) => {
  const known = r.returnTime !== null;
  switch (r.op) {
    case 'read':
      return { input: { op: 'read' }, output: known ? registerValue(r.output, 'read output') : null };
    case 'write':
      return { input: { op: 'write', value: registerValue(r.input, 'write input') }, output: null };
    case 'cas': {
      const inp = r.input as { expected?: unknown; value?: unknown } | null;
      if (typeof inp !== 'object' || inp === null || !('expected' in inp) || !('value' in inp)) {
        throw new Error(`cas input must be {"expected": v, "value": v}, got ${describeValue(r.input)}`);
      }
      if (known && typeof r.output !== 'boolean') {
        throw new Error(`cas output must be true or false, got ${describeValue(r.output)}`);
      }
      return {
        input: {
          op: 'cas',
          expected: registerValue(inp.expected, 'cas expected'),
          value: registerValue(inp.value, 'cas value'),
        },
        output: known ? (r.output as boolean) : null,
      };
    }
    default:
      throw new Error(`kv op must be "read", "write" or "cas", got ${JSON.stringify(r.op)}`);
  }
};
