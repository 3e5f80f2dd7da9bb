import { describe, expect, it } from 'vitest';
import type { Entry } from '../raft/types.js';
import { chainNext, decodeOp, encodeOp, GENESIS_CHAIN, KvApp } from './kv-app.js';

const e = (index: number, term: number, op: Parameters<typeof encodeOp>[0]): Entry => ({
  type: 'normal',
  index,
  term,
  data: encodeOp(op),
});

describe('KvApp', () => {
  it('applies commands and survives a snapshot round trip', () => {
    const app = new KvApp();
    app.apply(e(1, 1, { id: 1, op: 'incr', key: 'a', by: 2 }));
    app.apply(e(2, 1, { id: 2, op: 'incr', key: 'a', by: 3 }));
    app.apply({ type: 'normal', index: 3, term: 2, data: new Uint8Array() }); // a leader's no-op
    app.apply({ type: 'conf', index: 4, term: 2, change: { type: 'addLearner', nodeId: 4 } });
    app.apply(e(5, 2, { id: 3, op: 'set', key: 'b', value: 9 }));
    expect(app.kv.get('a')).toBe(5);
    expect(app.kv.get('b')).toBe(9);
    expect(app.applied).toBe(5);
    const copy = KvApp.restore(app.serialize());
    expect(copy.applied).toBe(5);
    expect(copy.chain).toBe(app.chain);
    expect([...copy.kv]).toEqual([...app.kv]);
  });

  it('chains every entry: same entries give the same hash, any difference changes it', () => {
    const a = e(1, 1, { id: 1, op: 'incr', key: 'a', by: 1 });
    const b = e(1, 1, { id: 2, op: 'incr', key: 'a', by: 1 });
    expect(chainNext(GENESIS_CHAIN, a)).toBe(chainNext(GENESIS_CHAIN, a));
    expect(chainNext(GENESIS_CHAIN, a)).not.toBe(chainNext(GENESIS_CHAIN, b));
    expect(chainNext(GENESIS_CHAIN, a)).not.toBe(chainNext(GENESIS_CHAIN, { ...a, term: 2 }));
  });

  it('starts from the genesis state for the empty bootstrap snapshot', () => {
    const app = KvApp.restore(new Uint8Array());
    expect(app.applied).toBe(0);
    expect(app.chain).toBe(GENESIS_CHAIN);
  });

  it('decodes what it encodes and rejects foreign payloads', () => {
    expect(decodeOp(encodeOp({ id: 7, op: 'barrier' }))).toEqual({ id: 7, op: 'barrier' });
    expect(decodeOp(new Uint8Array())).toBeUndefined();
    expect(() => decodeOp(new TextEncoder().encode('"x"'))).toThrow(/not a command/);
  });
});
