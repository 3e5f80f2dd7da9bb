// The checker's vocabulary: what an operation in a history is, and what a sequential
// specification ("model") of the system under test must provide.

/**
 * The output of an operation whose outcome is unknown (a timeout, a dropped connection, a client
 * killed mid-call). Such an operation may have taken effect at any single point after its invoke,
 * or never; the checker passes UNKNOWN as its output so the model accepts any output.
 */
export const UNKNOWN: unique symbol = Symbol('floe.check.unknown');
export type Unknown = typeof UNKNOWN;

/** One completed (or abandoned) call against the system under test. */
export interface Operation<Input, Output> {
  /** Who issued it; only used in reports (real-time order alone decides linearizability). */
  clientId: string | number;
  /**
   * The object the operation touches (a register key, a counter name, an ID namespace).
   * Operations on different keys are checked independently (P-compositionality). Default ''.
   */
  key?: string;
  input: Input;
  /** Ignored when the outcome is unknown (returnTime is +Infinity). */
  output: Output;
  /** When the call was sent; any unit, from one monotonic clock shared by every client. */
  invokeTime: number;
  /**
   * When the response arrived, in the same unit as invokeTime (>= invokeTime).
   * +Infinity means the outcome is unknown: see UNKNOWN.
   */
  returnTime: number;
  /** Where it was recorded (e.g. "client-3.jsonl:17"); shown in reports instead of the index. */
  source?: string;
}

export type StepResult<State> = { ok: true; state: State } | { ok: false };

/**
 * A sequential specification. Everything but init and step has a default (see withDefaults).
 * The checker searches for an order of the operations that respects real time and in which
 * every step returns ok.
 */
export interface Model<State, Input, Output> {
  /** Shown in reports, e.g. 'kv'. */
  readonly name: string;
  init(): State;
  /**
   * Apply input to state. Return ok:false when the observed output is impossible from state.
   * output is UNKNOWN for an operation whose outcome is unknown: return ok:true with the state it
   * would leave (any output is acceptable). Must not mutate state: the search backtracks.
   */
  step(state: State, input: Input, output: Output | Unknown): StepResult<State>;
  /** State equality for the search cache. Default: Object.is (right for primitive states only). */
  equal?(a: State, b: State): boolean;
  /**
   * A 32-bit hash consistent with equal, to spread the cache. Default: 0 (every state in one bucket,
   * correct but slower).
   */
  hash?(state: State): number;
  /**
   * True if this operation (with this known output) leaves every state it is legal in unchanged,
   * like a read or a failed compare-and-set. The checker then linearizes it as soon as it fits,
   * without trying alternatives, which keeps read-heavy histories fast. Must never be true for an
   * operation that can change some state (the check then fails with an error when it sees one).
   * Default: always false.
   */
  readOnly?(input: Input, output: Output): boolean;
  /**
   * The unknown-outcome operations of one partition that no known output can depend on, such as
   * writes of unique values that nobody read. The checker first searches without them: leaving
   * out an operation whose outcome is unknown is always a legal choice (it may never have taken
   * effect), so 'ok' there is 'ok' for the whole partition. Only if that search fails does it
   * search with them. Returning too many only costs time; it can never change a verdict.
   * Default: none (one search with every operation).
   */
  skippableUnknowns?(partition: readonly Operation<Input, Output>[]): Operation<Input, Output>[];
  /** Split a history into independent sub-histories. Default: group by operation key. */
  partition?(history: readonly Operation<Input, Output>[]): Map<string, Operation<Input, Output>[]>;
  /** One line per operation in reports, e.g. "cas(1 -> 2) -> true". */
  describeOperation?(input: Input, output: Output | Unknown): string;
  describeState?(state: State): string;
}

/** A model with every optional member filled in. */
export type CompleteModel<State, Input, Output> = Required<Model<State, Input, Output>>;

export function withDefaults<S, I, O>(model: Model<S, I, O>): CompleteModel<S, I, O> {
  return {
    name: model.name,
    init: () => model.init(),
    step: (s, i, o) => model.step(s, i, o),
    equal: model.equal ? (a, b) => model.equal!(a, b) : Object.is,
    hash: model.hash ? (s) => model.hash!(s) : () => 0,
    readOnly: model.readOnly ? (i, o) => model.readOnly!(i, o) : () => false,
    skippableUnknowns: model.skippableUnknowns ? (p) => model.skippableUnknowns!(p) : () => [],
    partition: model.partition ? (h) => model.partition!(h) : partitionByKey,
    describeOperation: model.describeOperation
      ? (i, o) => model.describeOperation!(i, o)
      : (i, o) => `${describeValue(i)} -> ${o === UNKNOWN ? '?' : describeValue(o)}`,
    describeState: model.describeState ? (s) => model.describeState!(s) : describeValue,
  };
}

/** The default partition: one sub-history per key, in first-seen order. */
export function partitionByKey<I, O>(history: readonly Operation<I, O>[]): Map<string, Operation<I, O>[]> {
  const byKey = new Map<string, Operation<I, O>[]>();
  for (const op of history) {
    const key = op.key ?? '';
    let ops = byKey.get(key);
    if (!ops) byKey.set(key, (ops = []));
    ops.push(op);
  }
  return byKey;
}

export function isUnknownOutcome(op: Operation<unknown, unknown>): boolean {
  return op.returnTime === Number.POSITIVE_INFINITY;
}

/** Compact, bigint-safe rendering for reports. */
export function describeValue(v: unknown): string {
  if (v === UNKNOWN) return '?';
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'string') return JSON.stringify(v);
  if (v === undefined) return 'undefined';
  try {
    return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? x.toString() : x)) ?? String(v);
  } catch {
    return String(v);
  }
}

/**
 * A sequential specification whose steps may have several outcomes (e.g. a lossy operation).
 * step returns every possible next state; an empty list means the output is impossible.
 */
export interface NondeterministicModel<State, Input, Output> {
  readonly name: string;
  init(): State[];
  step(state: State, input: Input, output: Output | Unknown): State[];
  equal?(a: State, b: State): boolean;
  hash?(state: State): number;
  // No readOnly here: a read narrows the set of possible states, so taking it early is not safe.
  partition?(history: readonly Operation<Input, Output>[]): Map<string, Operation<Input, Output>[]>;
  describeOperation?(input: Input, output: Output | Unknown): string;
  describeState?(state: State): string;
}

/**
 * Turn a nondeterministic model into a deterministic one whose state is the set of states the
 * system could be in (the powerset construction): a step is legal when at least one state allows it.
 * This keeps the search itself simple and lets the cache compare whole sets.
 */
export function determinize<S, I, O>(nd: NondeterministicModel<S, I, O>): Model<readonly S[], I, O> {
  const equal = nd.equal ? (a: S, b: S) => nd.equal!(a, b) : Object.is;
  const hash = nd.hash ? (s: S) => nd.hash!(s) : () => 0;
  const dedupe = (states: S[]): S[] => {
    const out: S[] = [];
    for (const s of states) if (!out.some((t) => equal(s, t))) out.push(s);
    return out;
  };
  const model: Model<readonly S[], I, O> = {
    name: nd.name,
    init: () => dedupe(nd.init()),
    step(states, input, output) {
      const next = dedupe(states.flatMap((s) => nd.step(s, input, output)));
      return next.length > 0 ? { ok: true, state: next } : { ok: false };
    },
    // Sets are compared regardless of order, so the hash must be order-independent too.
    equal: (a, b) => a.length === b.length && a.every((s) => b.some((t) => equal(s, t))),
    hash: (states) => states.reduce((h, s) => (h + hash(s)) | 0, 0) >>> 0,
    describeState: (states) => `{${states.map((s) => (nd.describeState ?? describeValue)(s)).join(', ')}}`,
  };
  if (nd.partition) model.partition = (h) => nd.partition!(h);
  if (nd.describeOperation) model.describeOperation = (i, o) => nd.describeOperation!(i, o);
  return model;
}
