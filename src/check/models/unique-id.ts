// A unique-ID issuer: Floe's core promise. Two properties, per key (ID namespace):
// - distinct: no ID is returned twice;
// - increasing: additionally, every ID is greater than every ID returned by an operation that
//   completed before this one was invoked (the strictly-increasing sequence mode).
//
// "increasing" is exactly linearizability against a register holding the largest ID issued so far
// (order the operations by ID: real-time order is respected iff the property holds), so it is also
// offered as a Model for checkHistory. checkUniqueIds decides both properties directly in
// O(n log n), which scales to millions of IDs and names the offending pair.
//
// A call that returns a batch of IDs is recorded as one operation per ID, all with the call's times.

import type { HistoryRecord, RecordDecoder } from '../history-file.js';
import { type Model, type Operation, UNKNOWN, type Unknown } from '../model.js';
import { toBigInt } from './counter.js';
import { hashPrimitive } from './hash.js';

export type IdInput = { op: 'issue' };
/** The ID returned. */
export type IdOutput = bigint;

/** State: the largest ID issued so far (null before the first). */
export function increasingIdModel(): Model<bigint | null, IdInput, IdOutput> {
  return {
    name: 'increasing-ids',
    init: () => null,
    step(state, _input, output) {
      // An unknown issue may have consumed an ID nobody saw: it constrains nothing.
      if (output === UNKNOWN) return { ok: true, state };
      return state === null || output > state ? { ok: true, state: output } : { ok: false };
    },
    equal: (a, b) => a === b,
    hash: (s) => hashPrimitive(s),
    describeOperation: describeIdOperation,
    describeState: (s) => (s === null ? 'none issued' : `max issued ${s}`),
  };
}

export function describeIdOperation(_input: IdInput, output: IdOutput | Unknown): string {
  return `issue() -> ${output === UNKNOWN ? '?' : output.toString()}`;
}

/** Records: {op:'issue', output: id} with id a safe-integer number or a decimal string. */
export const decodeIdRecord: RecordDecoder<IdInput, IdOutput> = (r: HistoryRecord) => {
  if (r.op !== 'issue') throw new Error(`id op must be "issue", got ${JSON.stringify(r.op)}`);
  return { input: { op: 'issue' }, output: r.returnTime === null ? 0n : toBigInt(r.output, 'issue output') };
};

export type UniqueIdMode = 'distinct' | 'increasing';

export interface IdViolation {
  kind: 'duplicate' | 'not-increasing';
  key: string;
  /** The offending operation. */
  op: Operation<IdInput, IdOutput>;
  /** duplicate: an earlier operation that returned the same ID. not-increasing: the operation with
   * the largest ID among those that completed before op was invoked. */
  other: Operation<IdInput, IdOutput>;
  text: string;
}

export interface UniqueIdOptions {
  /** Default 'distinct'. */
  mode?: UniqueIdMode;
  /** Violations kept in the result (all are counted). Default 100. */
  maxViolations?: number;
}

export interface UniqueIdResult {
  result: 'ok' | 'illegal';
  mode: UniqueIdMode;
  keys: number;
  /** IDs checked (operations with a known outcome). */
  issued: number;
  violationCount: number;
  violations: IdViolation[];
}

const describeOp = (op: Operation<IdInput, IdOutput>) =>
  `client ${op.clientId} [${op.invokeTime}, ${op.returnTime}] -> ${op.output}`;

export function checkUniqueIds(
  history: readonly Operation<IdInput, IdOutput>[],
  options: UniqueIdOptions = {},
): UniqueIdResult {
  const mode = options.mode ?? 'distinct';
  const maxViolations = options.maxViolations ?? 100;
  if (mode !== 'distinct' && mode !== 'increasing') {
    throw new RangeError(`mode must be 'distinct' or 'increasing', got ${String(mode)}`);
  }
  const byKey = new Map<string, Operation<IdInput, IdOutput>[]>();
  let issued = 0;
  for (const op of history) {
    if (op.returnTime === Number.POSITIVE_INFINITY) continue; // unknown: no ID observed
    if (!(op.returnTime >= op.invokeTime)) {
      throw new RangeError(`operation returned at ${op.returnTime}, before its invoke at ${op.invokeTime}`);
    }
    issued++;
    const key = op.key ?? '';
    let ops = byKey.get(key);
    if (!ops) byKey.set(key, (ops = []));
    ops.push(op);
  }

  const violations: IdViolation[] = [];
  let violationCount = 0;
  const report = (v: Omit<IdViolation, 'text'>, text: string) => {
    violationCount++;
    if (violations.length < maxViolations) violations.push({ ...v, text });
  };

  for (const [key, ops] of byKey) {
    const firstHolder = new Map<bigint, Operation<IdInput, IdOutput>>();
    for (const op of [...ops].sort((a, b) => a.invokeTime - b.invokeTime)) {
      const prev = firstHolder.get(op.output);
      if (prev) {
        report(
          { kind: 'duplicate', key, op, other: prev },
          `key ${JSON.stringify(key)}: ID ${op.output} issued twice: ${describeOp(prev)} and ${describeOp(op)}`,
        );
      } else {
        firstHolder.set(op.output, op);
      }
    }
    if (mode === 'increasing') {
      const byReturn = [...ops].sort((a, b) => a.returnTime - b.returnTime);
      const byInvoke = [...ops].sort((a, b) => a.invokeTime - b.invokeTime);
      let done = 0;
      let maxOp: Operation<IdInput, IdOutput> | undefined;
      for (const op of byInvoke) {
        // Strictly before: an operation returning at the very instant op is invoked is concurrent.
        while (done < byReturn.length && byReturn[done]!.returnTime < op.invokeTime) {
          const c = byReturn[done++]!;
          if (!maxOp || c.output > maxOp.output) maxOp = c;
        }
        // Equal to the max is a duplicate, already reported above.
        if (maxOp && op.output < maxOp.output) {
          report(
            { kind: 'not-increasing', key, op, other: maxOp },
            `key ${JSON.stringify(key)}: ID ${op.output} (${describeOp(op)}) is not greater than ` +
              `ID ${maxOp.output} returned before it was invoked (${describeOp(maxOp)})`,
          );
        }
      }
    }
  }
  return {
    result: violationCount === 0 ? 'ok' : 'illegal',
    mode,
    keys: byKey.size,
    issued,
    violationCount,
    violations,
  };
}

export function formatUniqueIdResult(r: UniqueIdResult, maxLines = 20): string {
  const head =
    r.result === 'ok'
      ? `IDS OK (${r.mode}): ${r.issued} IDs over ${r.keys} keys`
      : `IDS VIOLATED (${r.mode}): ${r.violationCount} violations among ${r.issued} IDs over ${r.keys} keys`;
  const lines = [head, ...r.violations.slice(0, maxLines).map((v) => `  ${v.text}`)];
  if (r.violationCount > maxLines) lines.push(`  ... ${r.violationCount - maxLines} more`);
  return lines.join('\n');
}
