import { describe, expect, it } from 'vitest';
import { checkHistory } from '../linearizability.js';
import type { Operation } from '../model.js';
import { formatCheckResult } from '../report.js';
import { type CounterInput, type CounterOutput, counterModel, decodeCounterRecord } from './counter.js';

type Op = Operation<CounterInput, CounterOutput>;
const U = Number.POSITIVE_INFINITY;
const incr = (result: bigint, t0: number, t1: number, delta = 1n, key = 'n'): Op => ({
  clientId: 'c',
  key,
  input: { op: 'incr', delta },
  output: result,
  invokeTime: t0,
  returnTime: t1,
});
const get = (value: bigint, t0: number, t1: number, key = 'n'): Op => ({
  clientId: 'c',
  key,
  input: { op: 'get' },
  output: value,
  invokeTime: t0,
  returnTime: t1,
});
const check = (h: Op[]) => checkHistory(counterModel(), h).result;

describe('counter model', () => {
  it('accepts sequential increments', () => {
    expect(check([incr(1n, 0, 1), incr(3n, 2, 3, 2n), get(3n, 4, 5)])).toBe('ok');
  });

  it('accepts concurrent increments in either order', () => {
    expect(check([incr(2n, 0, 10), incr(1n, 1, 9), get(2n, 11, 12)])).toBe('ok');
    expect(check([incr(1n, 0, 10), incr(2n, 1, 9), get(2n, 11, 12)])).toBe('ok');
  });

  it('rejects two increments returning the same value', () => {
    expect(check([incr(1n, 0, 10), incr(1n, 1, 9)])).toBe('illegal');
  });

  it('rejects an increment that went backwards in real time', () => {
    expect(check([incr(2n, 0, 1), incr(1n, 2, 3)])).toBe('illegal');
  });

  it('rejects a get that misses a completed increment', () => {
    expect(check([incr(1n, 0, 1), get(0n, 2, 3)])).toBe('illegal');
  });

  it('explains a gap by an unknown increment, and only after its invoke', () => {
    const lost: Op = { ...incr(0n, 5, U), output: 0n };
    expect(check([incr(1n, 0, 1), lost, incr(3n, 10, 11)])).toBe('ok');
    expect(check([incr(1n, 0, 1), incr(3n, 2, 3), { ...lost, invokeTime: 5 }])).toBe('illegal');
    // ... and it may also never have happened.
    expect(check([incr(1n, 0, 1), lost, incr(2n, 10, 11)])).toBe('ok');
  });

  it('handles values past 2^53 exactly', () => {
    const big = 2n ** 60n;
    const m = counterModel({ initial: big });
    expect(checkHistory(m, [incr(big + 1n, 0, 1), get(big + 1n, 2, 3)]).result).toBe('ok');
    expect(checkHistory(m, [incr(big + 2n, 0, 1)]).result).toBe('illegal');
  });

  it('checks each key on its own and names the bad one', () => {
    const res = checkHistory(counterModel(), [
      incr(1n, 0, 1, 1n, 'a'),
      incr(1n, 0, 1, 1n, 'b'),
      get(0n, 2, 3, 'b'),
    ]);
    expect(res.result).toBe('illegal');
    expect(res.partitions.map((p) => [p.key, p.result])).toEqual([
      ['a', 'ok'],
      ['b', 'illegal'],
    ]);
    expect(formatCheckResult(res)).toMatch(/key "b": not linearizable/);
  });

  it('decodes records, including decimal strings and unknown outcomes', () => {
    const base = { clientId: 'c', key: 'n', invokeTime: 0 };
    expect(
      decodeCounterRecord({ ...base, op: 'incr', input: '5', output: '9007199254740993', returnTime: 1 }),
    ).toEqual({
      input: { op: 'incr', delta: 5n },
      output: 9007199254740993n,
    });
    expect(decodeCounterRecord({ ...base, op: 'incr', output: 1, returnTime: 1 }).input).toEqual({
      op: 'incr',
      delta: 1n,
    });
    expect(decodeCounterRecord({ ...base, op: 'get', output: 'garbage', returnTime: null }).input).toEqual({
      op: 'get',
    });
    expect(() => decodeCounterRecord({ ...base, op: 'get', output: 1.5, returnTime: 1 })).toThrow(
      /get output must be an integer/,
    );
    expect(() => decodeCounterRecord({ ...base, op: 'decr', returnTime: 1 })).toThrow(
      /counter op must be "incr" or "get"/,
    );
  });
});
