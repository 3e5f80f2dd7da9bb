// Wing & Gong's linearizability search with Lowe's memoisation, as in Porcupine
// (Horn & Kroening, "Faster linearizability checking via P-compositionality"):
//
// - the history is split into independent partitions (one per key) and each is checked alone;
// - a partition becomes a doubly linked list of call and return events sorted by time;
// - depth-first search: take the first call in the list that the model accepts, remove ("lift")
//   it and its return from the list, restart from the head. Reaching a return event means that
//   operation must already have been linearized, so the search backtracks ("unlift");
// - a cache of (set of linearized operations, model state) pairs prunes every state the search
//   has already explored; the set is a bitset with an O(1) hash (see bitset.ts).
//
// Two additions to Porcupine's search:
// - operations with an unknown outcome (returnTime = +Infinity) have no return event: they may be
//   linearized at any point after their invoke, or never. The search is done once every known
//   operation is linearized, tries known operations before unknown ones, and never linearizes an
//   unknown operation that leaves the state unchanged (it cannot help explain anything);
// - a read-only operation (Model.readOnly) that fits is taken at once with no alternatives tried,
//   a partial-order reduction that is sound because reads commute with everything after them.
// Both are checked against a brute-force search in property.test.ts.

import { Bitset, type BitsetSnapshot, zobristTable } from './bitset.js';
import {
  type CompleteModel,
  isUnknownOutcome,
  type Model,
  type Operation,
  UNKNOWN,
  withDefaults,
} from './model.js';

export type Verdict = 'ok' | 'illegal' | 'unknown';

export interface CheckOptions {
  /**
   * Time budget for the whole history in milliseconds. Default 60_000. Partitions are checked
   * smallest first; any not finished within the budget are reported 'unknown' (reason 'timeout'),
   * never 'ok'.
   */
  timeoutMs?: number;
  /**
   * Most cache entries one partition may hold before its check gives up as 'unknown'
   * (reason 'cache-limit'). Bounds memory. Default 2_000_000.
   */
  maxCacheEntries?: number;
  /** The clock the budget is measured on, in ms. Default performance.now (tests inject a fake). */
  now?: () => number;
}

export const DEFAULT_TIMEOUT_MS = 60_000;
export const DEFAULT_MAX_CACHE_ENTRIES = 2_000_000;

/** An operation with its position in the checked history and a one-line description. */
export interface DescribedOperation<I, O> {
  /** Index in the history passed to checkHistory (-1 if a custom partition made a new object). */
  index: number;
  op: Operation<I, O>;
  text: string;
}

/** Why a partition is not linearizable, as far as the search got. */
export interface PartitionFailure<I, O> {
  /** The longest linearizable prefix found, in linearization order. */
  longestPrefix: DescribedOperation<I, O>[];
  /** The model state after that prefix. */
  stateAfterPrefix: string;
  /** Operations with a known outcome that no order could add after the prefix. */
  notLinearized: number;
  /**
   * The operations that were candidates to come next (invoked before the earliest pending
   * return), each with why it could not: the model rejects it from stateAfterPrefix, or every
   * continuation after it failed later.
   */
  candidates: Array<DescribedOperation<I, O> & { reason: string }>;
  /** The pending operation that returned first: it had to be linearized before anything later. */
  mustPrecede?: DescribedOperation<I, O>;
}

export interface PartitionResult<I, O> {
  key: string;
  result: Verdict;
  /** 'timeout', 'cache-limit' or 'not-checked' (budget spent before it started) when result is 'unknown'. */
  reason?: 'timeout' | 'cache-limit' | 'not-checked';
  operations: number;
  unknownOutcomes: number;
  /**
   * When result is 'ok': how many unknown-outcome operations the linearization leaves out as never
   * applied (model.skippableUnknowns), so the search did not have to place them.
   */
  skippedUnknowns?: number;
  cacheEntries: number;
  elapsedMs: number;
  /** One valid order of the operations it linearized, when result is 'ok'. */
  linearization?: Operation<I, O>[];
  failure?: PartitionFailure<I, O>;
}

export interface CheckResult<I, O> {
  /** 'illegal' if any partition is; else 'unknown' if any partition ran out of budget; else 'ok'. */
  result: Verdict;
  model: string;
  operations: number;
  partitionsChecked: number;
  /** Every partition, sorted by key. */
  partitions: PartitionResult<I, O>[];
  /** The illegal partitions, sorted by key. */
  illegal: PartitionResult<I, O>[];
  elapsedMs: number;
}

/**
 * Decide whether history is linearizable with respect to model.
 * Throws RangeError on malformed operations (non-finite invoke time, return before invoke).
 */
export function checkHistory<S, I, O>(
  model: Model<S, I, O>,
  history: readonly Operation<I, O>[],
  options: CheckOptions = {},
): CheckResult<I, O> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxCacheEntries = options.maxCacheEntries ?? DEFAULT_MAX_CACHE_ENTRIES;
  if (!(timeoutMs > 0)) throw new RangeError(`timeoutMs must be > 0, got ${timeoutMs}`);
  if (!(maxCacheEntries >= 1)) throw new RangeError(`maxCacheEntries must be >= 1, got ${maxCacheEntries}`);

  const now = options.now ?? (() => performance.now());
  const started = now();
  const deadline = started + timeoutMs;
  const m = withDefaults(model);
  const indexOf = new Map<Operation<I, O>, number>();
  history.forEach((op, i) => {
    validateOperation(op, i);
    indexOf.set(op, i);
  });

  const parts = [...m.partition(history)].map(([key, ops]) => ({ key, ops }));
  // Smallest first: a huge partition that exhausts the budget must not starve the small ones.
  const order = [...parts].sort((a, b) => a.ops.length - b.ops.length || compareKeys(a.key, b.key));
  const results = new Map<string, PartitionResult<I, O>>();
  let checked = 0;
  for (const { key, ops } of order) {
    if (now() >= deadline) {
      results.set(key, {
        key,
        result: 'unknown',
        reason: 'not-checked',
        operations: ops.length,
        unknownOutcomes: ops.filter(isUnknownOutcome).length,
        cacheEntries: 0,
        elapsedMs: 0,
      });
      continue;
    }
    checked++;
    results.set(key, checkPartitionStaged(m, key, ops, indexOf, now, deadline, maxCacheEntries));
  }

  const partitions = parts.map((p) => results.get(p.key)!).sort((a, b) => compareKeys(a.key, b.key));
  const illegal = partitions.filter((p) => p.result === 'illegal');
  const anyUnknown = partitions.some((p) => p.result === 'unknown');
  return {
    result: illegal.length > 0 ? 'illegal' : anyUnknown ? 'unknown' : 'ok',
    model: m.name,
    operations: history.length,
    partitionsChecked: checked,
    partitions,
    illegal,
    elapsedMs: now() - started,
  };
}

function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function validateOperation(op: Operation<unknown, unknown>, i: number): void {
  if (!Number.isFinite(op.invokeTime)) {
    throw new RangeError(`operation #${i}: invokeTime must be a finite number, got ${op.invokeTime}`);
  }
  if (Number.isNaN(op.returnTime) || op.returnTime < op.invokeTime) {
    throw new RangeError(
      `operation #${i}: returnTime must be >= invokeTime (${op.invokeTime}) or +Infinity for an unknown outcome, got ${op.returnTime}`,
    );
  }
}

/**
 * First without the unknown-outcome operations the model calls skippable (half the remaining
 * budget), then, unless that proved 'ok', with every operation. Leaving out an operation whose
 * outcome is unknown is one of the choices the full search has, so a linearization of the
 * smaller history is one of the whole; an 'illegal' or 'unknown' there proves nothing.
 */
function checkPartitionStaged<S, I, O>(
  m: CompleteModel<S, I, O>,
  key: string,
  ops: readonly Operation<I, O>[],
  indexOf: ReadonlyMap<Operation<I, O>, number>,
  now: () => number,
  deadline: number,
  maxCacheEntries: number,
): PartitionResult<I, O> {
  const skippable = new Set(m.skippableUnknowns(ops).filter(isUnknownOutcome));
  if (skippable.size > 0) {
    const started = now();
    const smaller = ops.filter((op) => !skippable.has(op));
    const first = checkPartition(
      m,
      key,
      smaller,
      indexOf,
      now,
      started + (deadline - started) / 2,
      maxCacheEntries,
    );
    if (first.result === 'ok') {
      return {
        ...first,
        operations: ops.length,
        unknownOutcomes: ops.filter(isUnknownOutcome).length,
        skippedUnknowns: skippable.size,
      };
    }
  }
  return checkPartition(m, key, ops, indexOf, now, deadline, maxCacheEntries);
}

interface CacheEntry<S> {
  linearized: BitsetSnapshot;
  state: S;
}

/** The search over one partition. Node 0 is the head sentinel, node count+1 the tail sentinel. */
function checkPartition<S, I, O>(
  m: CompleteModel<S, I, O>,
  key: string,
  partitionOps: readonly Operation<I, O>[],
  indexOf: ReadonlyMap<Operation<I, O>, number>,
  now: () => number,
  deadline: number,
  maxCacheEntries: number,
): PartitionResult<I, O> {
  const started = now();
  // Numbered in invoke order, so finished operations fill the low words of the bitset.
  const ops = [...partitionOps].sort((a, b) => a.invokeTime - b.invokeTime);
  const n = ops.length;
  const unknown = new Uint8Array(n);
  let knownTotal = 0;
  for (let i = 0; i < n; i++) {
    if (isUnknownOutcome(ops[i]!)) unknown[i] = 1;
    else knownTotal++;
  }

  // Events: calls before returns at equal times, so operations that touch in time count as
  // concurrent (never a false 'illegal' from clock granularity).
  type Ev = { time: number; isReturn: boolean; op: number };
  const events: Ev[] = [];
  for (let i = 0; i < n; i++) {
    events.push({ time: ops[i]!.invokeTime, isReturn: false, op: i });
    if (!unknown[i]) events.push({ time: ops[i]!.returnTime, isReturn: true, op: i });
  }
  events.sort((a, b) => a.time - b.time || Number(a.isReturn) - Number(b.isReturn) || a.op - b.op);
  // Within a run of consecutive calls every call is a candidate at exactly the same moments, so
  // their order is free: try the ones that must return soonest first (unknown outcomes last).
  for (let i = 0; i < events.length; ) {
    let j = i;
    while (j < events.length && !events[j]!.isReturn) j++;
    if (j - i > 1) {
      const run = events
        .slice(i, j)
        .sort((a, b) => ops[a.op]!.returnTime - ops[b.op]!.returnTime || a.op - b.op);
      for (let k = 0; k < run.length; k++) events[i + k] = run[k]!;
    }
    i = j + 1;
  }

  const count = events.length;
  const HEAD = 0;
  const TAIL = count + 1;
  const next = new Int32Array(count + 2);
  const prev = new Int32Array(count + 2);
  const nodeOp = new Int32Array(count + 2).fill(-1);
  const nodeIsReturn = new Uint8Array(count + 2);
  const callNode = new Int32Array(n);
  const returnNode = new Int32Array(n).fill(-1);
  for (let k = 0; k < count; k++) {
    const ev = events[k]!;
    const node = k + 1;
    nodeOp[node] = ev.op;
    if (ev.isReturn) {
      nodeIsReturn[node] = 1;
      returnNode[ev.op] = node;
    } else {
      callNode[ev.op] = node;
    }
  }
  for (let node = 0; node <= count; node++) {
    next[node] = node + 1;
    prev[node + 1] = node;
  }
  nodeIsReturn[TAIL] = 1; // the tail stops every scan, like a return

  const unlink = (node: number) => {
    next[prev[node]!] = next[node]!;
    prev[next[node]!] = prev[node]!;
  };
  const relink = (node: number) => {
    next[prev[node]!] = node;
    prev[next[node]!] = node;
  };
  // Dancing links: a removed node keeps its own pointers, so restoring in reverse order is exact.
  const lift = (op: number) => {
    unlink(callNode[op]!);
    if (returnNode[op]! >= 0) unlink(returnNode[op]!);
  };
  const unlift = (op: number) => {
    if (returnNode[op]! >= 0) relink(returnNode[op]!);
    relink(callNode[op]!);
  };

  const bits = new Bitset(n, zobristTable(n));
  const cache = new Map<number, CacheEntry<S>[]>();
  let cacheEntries = 0;
  const cacheKey = (state: S) => (bits.hash ^ Math.imul(m.hash(state) | 0, 0x9e3779b1)) >>> 0;
  /** Adds (bits, state) to the cache; false if it was already there (already explored). */
  const cacheAdd = (state: S): boolean => {
    const k = cacheKey(state);
    let bucket = cache.get(k);
    if (!bucket) cache.set(k, (bucket = []));
    for (const e of bucket) if (bits.equalsSnapshot(e.linearized) && m.equal(e.state, state)) return false;
    bucket.push({ linearized: bits.snapshot(), state });
    cacheEntries++;
    return true;
  };

  const outputOf = (op: number) => (unknown[op] ? UNKNOWN : ops[op]!.output);
  const readOnly = new Uint8Array(n);
  for (let i = 0; i < n; i++) if (!unknown[i] && m.readOnly(ops[i]!.input, ops[i]!.output)) readOnly[i] = 1;
  const stackOps = new Int32Array(n);
  /** 1 where the choice was forced (see pass 0): its failure is its parent's failure. */
  const stackForced = new Uint8Array(n);
  const stackStates: S[] = [];
  let depth = 0;
  let knownLinearized = 0;
  let state = m.init();
  let entry = next[HEAD]!;
  // Each configuration scans the candidate window (calls before the first pending return) in passes:
  // 0: a known read-only operation (model.readOnly) the model accepts here. Taking it first is
  //    always safe (move it to the front of any linearization: real time still holds, and as it
  //    changes no state every later step still holds), so it is the only choice tried; if what
  //    follows fails, this configuration fails. This keeps reads concurrent with writes from
  //    multiplying the search.
  // 1: every known operation;  2: every unknown-outcome operation.
  let pass: 0 | 1 | 2 = 0;

  let best: { ops: number[]; known: number; state: S; candidates: number[]; mustPrecede: number } | undefined;
  const noteProgress = () => {
    if (best && knownLinearized <= best.known) return;
    const candidates: number[] = [];
    let node = next[HEAD]!;
    for (; !nodeIsReturn[node]; node = next[node]!)
      if (!unknown[nodeOp[node]!]) candidates.push(nodeOp[node]!);
    best = {
      ops: Array.from(stackOps.subarray(0, depth)),
      known: knownLinearized,
      state,
      candidates,
      mustPrecede: node === TAIL ? -1 : nodeOp[node]!,
    };
  };

  const finish = (result: Verdict, extra: Partial<PartitionResult<I, O>> = {}): PartitionResult<I, O> => ({
    key,
    result,
    operations: n,
    unknownOutcomes: n - knownTotal,
    cacheEntries,
    elapsedMs: now() - started,
    ...extra,
  });

  let iterations = 0;
  while (knownLinearized < knownTotal) {
    if ((++iterations & 1023) === 0) {
      if (now() >= deadline) return finish('unknown', { reason: 'timeout' });
      if (cacheEntries >= maxCacheEntries) return finish('unknown', { reason: 'cache-limit' });
    }
    if (nodeIsReturn[entry]) {
      if (pass < 2) {
        pass++;
        entry = next[HEAD]!;
        continue;
      }
      // Every candidate failed: this configuration cannot be completed. Undo the last choice that
      // had alternatives (forced choices fail with their parent).
      noteProgress();
      let op: number;
      do {
        if (depth === 0)
          return finish('illegal', { failure: describeFailure(m, ops, indexOf, best!, knownTotal) });
        op = stackOps[--depth]!;
        state = stackStates.pop()!;
        bits.clear(op);
        unlift(op);
        if (!unknown[op]) knownLinearized--;
      } while (stackForced[depth]);
      entry = next[callNode[op]!]!;
      pass = unknown[op] ? 2 : 1;
      continue;
    }
    const op = nodeOp[entry]!;
    if (pass === 2 ? !unknown[op] : unknown[op] || (pass === 0 && !readOnly[op])) {
      entry = next[entry]!;
      continue;
    }
    const stepped = m.step(state, ops[op]!.input, outputOf(op));
    if (!stepped.ok) {
      entry = next[entry]!;
      continue;
    }
    const unchanged = m.equal(stepped.state, state);
    if (pass === 0 && !unchanged) {
      throw new Error(
        `model ${m.name}: readOnly() is true for ${m.describeOperation(ops[op]!.input, ops[op]!.output)} but step changed the state`,
      );
    }
    // Taking an unknown operation that changes nothing here is never needed (it is optional).
    if (pass === 2 && unchanged) {
      entry = next[entry]!;
      continue;
    }
    bits.set(op);
    if (cacheAdd(stepped.state)) {
      stackForced[depth] = pass === 0 ? 1 : 0;
      stackOps[depth++] = op;
      stackStates.push(state);
      state = stepped.state;
      lift(op);
      if (!unknown[op]) knownLinearized++;
      entry = next[HEAD]!;
      pass = 0;
      continue;
    }
    bits.clear(op);
    if (pass === 0) {
      // The forced choice leads to an explored (failed) configuration, so this one fails too.
      entry = TAIL;
      pass = 2;
      continue;
    }
    entry = next[entry]!;
  }
  return finish('ok', { linearization: Array.from(stackOps.subarray(0, depth), (i) => ops[i]!) });
}

function describeFailure<S, I, O>(
  m: CompleteModel<S, I, O>,
  ops: readonly Operation<I, O>[],
  indexOf: ReadonlyMap<Operation<I, O>, number>,
  best: { ops: number[]; state: S; candidates: number[]; mustPrecede: number },
  knownTotal: number,
): PartitionFailure<I, O> {
  const describe = (i: number): DescribedOperation<I, O> =>
    describeOperation(m, ops[i]!, indexOf.get(ops[i]!) ?? -1);
  const knownInPrefix = best.ops.filter((i) => !isUnknownOutcome(ops[i]!)).length;
  const failure: PartitionFailure<I, O> = {
    longestPrefix: best.ops.map(describe),
    stateAfterPrefix: m.describeState(best.state),
    notLinearized: knownTotal - knownInPrefix,
    candidates: best.candidates.map((i) => {
      const stepped = m.step(best.state, ops[i]!.input, ops[i]!.output);
      const reason = stepped.ok
        ? `accepted from ${m.describeState(best.state)}, but every continuation after it fails`
        : `impossible from state ${m.describeState(best.state)}`;
      return { ...describe(i), reason };
    }),
  };
  if (best.mustPrecede >= 0) failure.mustPrecede = describe(best.mustPrecede);
  return failure;
}

export function describeOperation<S, I, O>(
  m: CompleteModel<S, I, O>,
  op: Operation<I, O>,
  index: number,
): DescribedOperation<I, O> {
  const unknownOutcome = isUnknownOutcome(op);
  const output = unknownOutcome ? UNKNOWN : op.output;
  const span = `[${op.invokeTime}, ${unknownOutcome ? 'unknown' : op.returnTime}]`;
  const where = op.source ?? `#${index}`;
  const text = `${where} client ${op.clientId} ${span} ${m.describeOperation(op.input, output)}`;
  return { index, op, text };
}
