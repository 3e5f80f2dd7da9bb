// Property tests: histories produced by really executing operations on the model are always
// linearizable, corrupting one read is always caught, and on small random histories the checker
// agrees with a brute-force search over every order.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkHistory } from './linearizability.js';
import { type Model, type Operation, UNKNOWN } from './model.js';
import { type CounterInput, counterModel } from './models/counter.js';
import { kvModel, type RegisterInput, type RegisterOutput, type RegisterValue } from './models/register.js';
import { checkUniqueIds, type IdInput, type IdOutput, increasingIdModel } from './models/unique-id.js';

const U = Number.POSITIVE_INFINITY;

/**
 * One planned call: it takes effect at slot (its linearization point), its interval stretches
 * `before`/`after` time units around that point, and its outcome may be hidden (unknown) or the
 * call may never reach the system at all (lost: unknown outcome, no effect).
 */
interface Planned<I> {
  key: string;
  input: I;
  before: number;
  after: number;
  fate: 'known' | 'unknown' | 'lost';
}

/** Execute planned calls in slot order on the model: the result is linearizable by construction. */
function execute<S, I, O>(model: Model<S, I, O>, plan: Planned<I>[], spacing: number): Operation<I, O>[] {
  const states = new Map<string, S>();
  return plan.map((p, slot) => {
    const point = slot * spacing;
    let output: O | null = null;
    if (p.fate !== 'lost') {
      const state = states.has(p.key) ? states.get(p.key)! : model.init();
      const out = realOutput(model, state, p.input);
      states.set(p.key, out.state);
      output = out.output as O;
    }
    return {
      clientId: `c${slot % 5}`,
      key: p.key,
      input: p.input,
      output: output as O,
      invokeTime: point - p.before,
      returnTime: p.fate === 'known' ? point + p.after : U,
    };
  });
}

/** The output a correct system gives: the first candidate output the model accepts. */
function realOutput<S, I, O>(model: Model<S, I, O>, state: S, input: I): { output: unknown; state: S } {
  // Ask the model with an unknown output to learn the next state, then derive the output from it.
  const next = model.step(state, input, UNKNOWN);
  if (!next.ok) throw new Error('model rejected an unknown outcome');
  const i = input as { op: string };
  if (model.name === 'kv') {
    if (i.op === 'read') return { output: state, state };
    if (i.op === 'write') return { output: null, state: next.state };
    return {
      output: !Object.is(next.state, state) || (input as unknown as { expected: unknown }).expected === state,
      state: next.state,
    };
  }
  if (model.name === 'counter') return { output: next.state, state: next.state };
  throw new Error(`no output rule for ${model.name}`);
}

const value = fc.constantFrom<RegisterValue>(0, 1, 2, 'a', null);
const registerInput: fc.Arbitrary<RegisterInput> = fc.oneof(
  fc.constant<RegisterInput>({ op: 'read' }),
  value.map<RegisterInput>((v) => ({ op: 'write', value: v })),
  fc.tuple(value, value).map<RegisterInput>(([expected, v]) => ({ op: 'cas', expected, value: v })),
);
const counterInput: fc.Arbitrary<CounterInput> = fc.oneof(
  fc.constant<CounterInput>({ op: 'get' }),
  fc.bigInt({ min: 1n, max: 5n }).map<CounterInput>((delta) => ({ op: 'incr', delta })),
);
const fate = fc.constantFrom<'known' | 'unknown' | 'lost'>(
  'known',
  'known',
  'known',
  'known',
  'unknown',
  'lost',
);

/** overlap=false: intervals never overlap (spacing 10, half-width < 5). */
function plans<I>(input: fc.Arbitrary<I>, overlap: boolean, maxLength: number): fc.Arbitrary<Planned<I>[]> {
  const width = overlap ? fc.integer({ min: 0, max: 60 }) : fc.integer({ min: 0, max: 4 });
  return fc.array(
    fc.record({ key: fc.constantFrom('k1', 'k2', 'k3'), input, before: width, after: width, fate }),
    { minLength: 1, maxLength },
  );
}

describe('histories from real executions are linearizable', () => {
  for (const overlap of [false, true]) {
    it(`kv, ${overlap ? 'overlapping' : 'sequential'} timing`, () => {
      fc.assert(
        fc.property(plans(registerInput, overlap, 80), (plan) => {
          const res = checkHistory(kvModel(), execute(kvModel(), plan, 10));
          expect(res.result).toBe('ok');
        }),
        { numRuns: 300 },
      );
    });
    it(`counter, ${overlap ? 'overlapping' : 'sequential'} timing`, () => {
      fc.assert(
        fc.property(plans(counterInput, overlap, 80), (plan) => {
          const res = checkHistory(counterModel(), execute(counterModel(), plan, 10));
          expect(res.result).toBe('ok');
        }),
        { numRuns: 300 },
      );
    });
  }
});

describe('a corrupted read is detected', () => {
  it('kv: a read returning a never-written value', () => {
    fc.assert(
      fc.property(plans(registerInput, true, 60), fc.nat(), (plan, pick) => {
        const history = execute(kvModel(), plan, 10);
        const reads = history.filter((op) => op.input.op === 'read' && op.returnTime !== U);
        fc.pre(reads.length > 0);
        const victim = reads[pick % reads.length]!;
        const corrupted = history.map((op) => (op === victim ? { ...op, output: 'never-written' } : op));
        const res = checkHistory(kvModel(), corrupted);
        expect(res.result).toBe('illegal');
        expect(res.illegal.map((p) => p.key)).toEqual([victim.key]);
      }),
      { numRuns: 300 },
    );
  });

  it('counter: a get returning a value the counter never held', () => {
    fc.assert(
      fc.property(plans(counterInput, true, 60), fc.nat(), (plan, pick) => {
        const history = execute(counterModel(), plan, 10);
        const gets = history.filter((op) => op.input.op === 'get' && op.returnTime !== U);
        fc.pre(gets.length > 0);
        const victim = gets[pick % gets.length]!;
        const corrupted = history.map((op) => (op === victim ? { ...op, output: -1n } : op));
        expect(checkHistory(counterModel(), corrupted).result).toBe('illegal');
      }),
      { numRuns: 300 },
    );
  });
});

/**
 * The definition, executed literally: try every next operation allowed by real time (no pending
 * known operation returned before it was invoked); unknown operations are optional.
 */
function bruteForce<S, I, O>(model: Model<S, I, O>, ops: Operation<I, O>[]): boolean {
  const search = (state: S, remaining: Operation<I, O>[]): boolean => {
    if (remaining.every((op) => op.returnTime === U)) return true;
    return remaining.some((op) => {
      if (remaining.some((o) => o !== op && o.returnTime !== U && o.returnTime < op.invokeTime)) return false;
      const out = model.step(state, op.input, op.returnTime === U ? UNKNOWN : op.output);
      return (
        out.ok &&
        search(
          out.state,
          remaining.filter((o) => o !== op),
        )
      );
    });
  };
  return search(model.init(), ops);
}

const smallTime = fc.integer({ min: 0, max: 12 });
function randomOps<I, O>(input: fc.Arbitrary<I>, output: fc.Arbitrary<O>) {
  return fc
    .array(
      fc.record({ input, output, t0: smallTime, len: fc.integer({ min: 0, max: 8 }), unknown: fc.boolean() }),
      { minLength: 1, maxLength: 7 },
    )
    .map((xs) =>
      xs.map(
        (x, i): Operation<I, O> => ({
          clientId: i,
          input: x.input,
          output: x.output,
          invokeTime: x.t0,
          returnTime: x.unknown && i % 3 === 0 ? U : x.t0 + x.len,
        }),
      ),
    );
}

describe('agrees with brute force on small random histories', () => {
  // Both verdicts must actually occur, or the comparison proves little.
  it('kv', () => {
    const output = fc.oneof(value, fc.boolean());
    const seen = { ok: 0, illegal: 0 };
    fc.assert(
      fc.property(randomOps(registerInput, output as fc.Arbitrary<RegisterOutput>), (ops) => {
        const legal = bruteForce(kvModel(), ops);
        seen[legal ? 'ok' : 'illegal']++;
        expect(checkHistory(kvModel(), ops).result).toBe(legal ? 'ok' : 'illegal');
      }),
      { numRuns: 2500 },
    );
    expect(seen.ok).toBeGreaterThan(50);
    expect(seen.illegal).toBeGreaterThan(50);
  });

  it('counter', () => {
    const seen = { ok: 0, illegal: 0 };
    fc.assert(
      fc.property(randomOps(counterInput, fc.bigInt({ min: 0n, max: 8n })), (ops) => {
        const legal = bruteForce(counterModel(), ops);
        seen[legal ? 'ok' : 'illegal']++;
        expect(checkHistory(counterModel(), ops).result).toBe(legal ? 'ok' : 'illegal');
      }),
      { numRuns: 2500 },
    );
    expect(seen.ok).toBeGreaterThan(50);
    expect(seen.illegal).toBeGreaterThan(50);
  });
});

describe('unique IDs: the search and the direct check agree', () => {
  it('increasing mode', () => {
    const seen = { ok: 0, illegal: 0 };
    const ops = fc.array(
      fc.record({
        id: fc.bigInt({ min: 0n, max: 20n }),
        t0: fc.integer({ min: 0, max: 30 }),
        len: fc.nat(10),
      }),
      { minLength: 1, maxLength: 25 },
    );
    fc.assert(
      fc.property(ops, (xs) => {
        const history = xs.map(
          (x, i): Operation<IdInput, IdOutput> => ({
            clientId: i,
            input: { op: 'issue' },
            output: x.id,
            invokeTime: x.t0,
            returnTime: x.t0 + x.len,
          }),
        );
        const direct = checkUniqueIds(history, { mode: 'increasing' }).result;
        seen[direct]++;
        const searched = checkHistory(increasingIdModel(), history).result;
        expect(searched).toBe(direct);
      }),
      { numRuns: 500 },
    );
    expect(seen.ok).toBeGreaterThan(25);
    expect(seen.illegal).toBeGreaterThan(25);
  });
});
