import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { pack } from '../../node/envelope.js';
import { FloeStateMachine } from '../floe-state-machine.js';
import { buildCreate, encodeSequenceCommand } from './codec.js';
import { SequenceStateMachine } from './sequence-state-machine.js';
import type { SequenceCommand, SequenceResult } from './types.js';

let index = 0;
const ctx = () => ({ index: ++index, term: 1, leaderTimeMs: 0 });

function run(sm: SequenceStateMachine, cmd: SequenceCommand): SequenceResult {
  return sm.apply(encodeSequenceCommand(cmd), ctx());
}
function create(sm: SequenceStateMachine, key: string, o: Parameters<typeof buildCreate>[1] = {}) {
  const cmd = buildCreate(key, o);
  if ('ok' in cmd) throw new Error(cmd.message);
  return run(sm, cmd);
}
const alloc = (sm: SequenceStateMachine, key: string, count: number, exact = false) =>
  run(sm, { op: 'alloc', key, count, owner: 'n1', requestId: `r${index}`, exact });

describe('SequenceStateMachine', () => {
  it('creates with defaults (start 1, step 1000, strict) and allocates contiguous segments', () => {
    const sm = new SequenceStateMachine();
    expect(create(sm, 'orders')).toMatchObject({
      ok: true,
      created: true,
      info: {
        start: '1',
        max: '9223372036854775807',
        step: 1000,
        minStep: 1000,
        maxStep: 100000,
        mode: 'strict',
        next: '1',
      },
    });
    expect(alloc(sm, 'orders', 1000)).toMatchObject({ ok: true, start: '1', end: '1001', owner: 'n1' });
    expect(alloc(sm, 'orders', 5)).toMatchObject({ ok: true, start: '1001', end: '1006' });
    expect(sm.get('orders')).toMatchObject({ next: '1006', allocations: 2 });
  });

  it('a repeated create with the same configuration is harmless; another configuration is refused', () => {
    const sm = new SequenceStateMachine();
    create(sm, 'k', { step: 10 });
    alloc(sm, 'k', 10);
    expect(create(sm, 'k', { step: 10 })).toMatchObject({ ok: true, created: false, info: { next: '11' } });
    expect(create(sm, 'k', { step: 20 })).toMatchObject({ ok: false, code: 'exists' });
  });

  it('stops at max: a segment is cut at max + 1, then every alloc is refused as exhausted', () => {
    const sm = new SequenceStateMachine();
    create(sm, 'small', { start: 5, max: 12, step: 5 });
    expect(alloc(sm, 'small', 5)).toMatchObject({ start: '5', end: '10' });
    expect(alloc(sm, 'small', 5, true)).toMatchObject({ ok: false, code: 'exhausted' });
    expect(alloc(sm, 'small', 5)).toMatchObject({ start: '10', end: '13' });
    expect(alloc(sm, 'small', 1)).toMatchObject({
      ok: false,
      code: 'exhausted',
      message: /reached its max 12/,
    });
  });

  it('values near 2^63 − 1 stay exact (decimal strings, bigint inside)', () => {
    const sm = new SequenceStateMachine();
    create(sm, 'big', { start: '9223372036854775800' });
    expect(alloc(sm, 'big', 1000)).toMatchObject({
      start: '9223372036854775800',
      end: '9223372036854775808',
    });
    expect(alloc(sm, 'big', 1)).toMatchObject({ ok: false, code: 'exhausted' });
  });

  it('delete then re-create never repeats a value: the high-water mark survives as a tombstone', () => {
    const sm = new SequenceStateMachine();
    create(sm, 'k', { step: 10 });
    alloc(sm, 'k', 100);
    expect(run(sm, { op: 'delete', key: 'k' })).toMatchObject({ ok: true });
    expect(alloc(sm, 'k', 1)).toMatchObject({ ok: false, code: 'not_found' });
    expect(create(sm, 'k', { step: 10 })).toMatchObject({ ok: true, created: true, info: { next: '101' } });
    // A start above the tombstone wins.
    run(sm, { op: 'delete', key: 'k' });
    expect(create(sm, 'k', { start: 500 })).toMatchObject({ info: { next: '500' } });
  });

  it('refuses bad commands with the field named, before and at apply', () => {
    const sm = new SequenceStateMachine();
    expect(buildCreate('', {})).toMatchObject({ ok: false, message: /key must be a non-empty string/ });
    expect(buildCreate('x'.repeat(257), {})).toMatchObject({ ok: false, message: /longer than 256 bytes/ });
    expect(buildCreate('a\nb', {})).toMatchObject({ ok: false, message: /control characters/ });
    expect(buildCreate('k', { step: 0 })).toMatchObject({
      ok: false,
      message: /step must be an integer in \[1, 100000000\]/,
    });
    expect(buildCreate('k', { start: 10, max: 5 })).toMatchObject({
      ok: false,
      message: /start must be in \[0, 5\]/,
    });
    expect(buildCreate('k', { max: '9223372036854775808' })).toMatchObject({
      ok: false,
      message: /max must be in/,
    });
    expect(buildCreate('k', { start: 'abc' })).toMatchObject({
      ok: false,
      message: /start must be an integer/,
    });
    expect(buildCreate('k', { mode: 'fast' as 'node' })).toMatchObject({
      ok: false,
      message: /mode must be/,
    });
    expect(buildCreate('k', { step: 10, minStep: 20 })).toMatchObject({ ok: false, message: /minStep/ });
    create(sm, 'k');
    expect(alloc(sm, 'k', 0)).toMatchObject({ ok: false, code: 'invalid_argument', message: /count/ });
    expect(sm.apply(pack({ ns: 'seq', op: 'nope', key: 'k' }), ctx())).toMatchObject({ code: 'bad_command' });
    expect(sm.apply(new Uint8Array([0xc1]), ctx())).toMatchObject({ code: 'bad_command' });
  });

  it('snapshot and restore keep configuration, high-water marks and tombstones', () => {
    const sm = new SequenceStateMachine();
    create(sm, 'a', { step: 7, mode: 'node' });
    alloc(sm, 'a', 7);
    create(sm, 'b');
    alloc(sm, 'b', 3);
    run(sm, { op: 'delete', key: 'b' });
    const copy = new SequenceStateMachine();
    copy.restore(sm.snapshot());
    expect(copy.list()).toEqual(sm.list());
    expect(create(copy, 'b')).toMatchObject({ info: { next: '4' } });
  });

  it('FloeStateMachine routes ns "seq" and keeps a version-1 snapshot while no sequence exists', () => {
    const fsm = new FloeStateMachine();
    const empty = fsm.snapshot();
    const cmd = buildCreate('k', {});
    if ('ok' in cmd) throw new Error('bad');
    expect(fsm.apply(encodeSequenceCommand(cmd), ctx())).toMatchObject({ ok: true, created: true });
    const withSeq = fsm.snapshot();
    const restored = new FloeStateMachine();
    restored.restore(withSeq);
    expect(restored.sequences.get('k')).toMatchObject({ next: '1' });
    restored.restore(empty);
    expect(restored.sequences.size).toBe(0);
  });

  it('no value is ever allocated twice, across creates, deletes and snapshot restores (property)', () => {
    const op = fc.oneof(
      fc.record({
        t: fc.constant('alloc' as const),
        k: fc.integer({ min: 0, max: 2 }),
        n: fc.integer({ min: 1, max: 50 }),
      }),
      fc.record({
        t: fc.constant('create' as const),
        k: fc.integer({ min: 0, max: 2 }),
        start: fc.integer({ min: 0, max: 200 }),
      }),
      fc.record({ t: fc.constant('delete' as const), k: fc.integer({ min: 0, max: 2 }) }),
      fc.record({ t: fc.constant('restore' as const) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 80 }), (ops) => {
        let sm = new SequenceStateMachine();
        const seen = new Map<string, Set<bigint>>();
        for (const o of ops) {
          if (o.t === 'restore') {
            const next = new SequenceStateMachine();
            next.restore(sm.snapshot());
            sm = next;
          } else if (o.t === 'create') create(sm, `k${o.k}`, { start: o.start, max: 1000 });
          else if (o.t === 'delete') run(sm, { op: 'delete', key: `k${o.k}` });
          else {
            const r = alloc(sm, `k${o.k}`, o.n);
            if (!r.ok || r.op !== 'alloc') continue;
            const set = seen.get(r.key) ?? new Set<bigint>();
            seen.set(r.key, set);
            for (let v = BigInt(r.start); v < BigInt(r.end); v++) {
              if (set.has(v)) return false;
              set.add(v);
            }
          }
        }
        return true;
      }),
      { numRuns: 300 },
    );
  });
});
