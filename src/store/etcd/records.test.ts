import { describe, expect, it } from 'vitest';
import { encodeLeaseCommand } from '../../state/leases/codec.js';
import type { LeaseCommand } from '../../state/leases/types.js';
import { changesOf, EtcdKeys, type LoadedApp, machineOf, type StoredRecord } from './records.js';

const empty = (app: string): LoadedApp => ({
  app,
  meta: undefined,
  metaMod: '0',
  seqMod: '0',
  records: new Map(),
});

/** Applies `cmd` to `loaded` and folds the changes back in, as the etcd store does around its transaction. */
function step(loaded: LoadedApp, cmd: LeaseCommand, index: number) {
  const sm = machineOf([loaded], index - 1);
  const r = sm.apply(encodeLeaseCommand(cmd), { index, term: 0, leaderTimeMs: 1_000_000 });
  const ch = changesOf(sm, loaded);
  if (ch.meta) loaded.meta = { value: ch.meta, mod: String(index) };
  for (const rec of ch.records) loaded.records.set(rec.workerId, { value: rec, mod: String(index) });
  return { r, ch };
}

describe('etcd records through the lease state machine', () => {
  it('an acquire on a new app creates the pool and one record; a retry changes nothing', () => {
    const a = empty('orders');
    const { r, ch } = step(
      a,
      { op: 'acquire', app: 'orders', nodeId: 'n1', ttlMs: 5000, requestId: 'r', incarnation: 'i' },
      10,
    );
    expect(r).toMatchObject({ ok: true, workerId: 0, token: 10 });
    expect(ch.meta).toEqual({ bits: 10, datacenterBits: 0, layout: '' });
    expect(ch.records).toHaveLength(1);
    const again = step(
      a,
      { op: 'acquire', app: 'orders', nodeId: 'n1', ttlMs: 5000, requestId: 'r', incarnation: 'i' },
      11,
    );
    expect(again.r).toMatchObject({ ok: true, retried: true, token: 10 });
    expect(again.ch.meta).toBeUndefined();
    expect(again.ch.records).toEqual([]);
  });

  it('free IDs are reused longest-free first, and a returning holder gets its own ID back', () => {
    const a = empty('x');
    step(a, { op: 'configurePool', app: 'x', bits: 2, datacenterBits: 0 }, 1);
    for (let i = 0; i < 4; i++)
      step(a, { op: 'acquire', app: 'x', nodeId: `n${i}`, ttlMs: 5000, requestId: `r${i}` }, 2 + i);
    // Free 2 then 1 (2 has been free longer).
    step(a, { op: 'release', app: 'x', workerId: 2, token: 4, lastTimestampMs: 500 }, 20);
    step(a, { op: 'release', app: 'x', workerId: 1, token: 3, lastTimestampMs: 0 }, 21);
    const other = step(a, { op: 'acquire', app: 'x', nodeId: 'new', ttlMs: 5000, requestId: 'q' }, 30);
    expect(other.r).toMatchObject({ ok: true, workerId: 2, highWaterMs: 500, token: 30 });
    // The holder's previous record loses its nodeId (the state machine keeps nodeIds one-to-one).
    const back = step(a, { op: 'acquire', app: 'x', nodeId: 'n1', ttlMs: 5000, requestId: 'q2' }, 31);
    expect(back.r).toMatchObject({ ok: true, workerId: 1 });
    expect(
      step(a, { op: 'acquire', app: 'x', nodeId: 'z', ttlMs: 5000, requestId: 'q3' }, 32).r,
    ).toMatchObject({
      ok: false,
      code: 'pool_exhausted',
    });
  });

  it('keys keep apps apart even when names contain slashes', () => {
    const k = new EtcdKeys('/floe');
    expect(k.worker('a/w', 3)).toBe('/floe/apps/a%2Fw/w/0000003');
    expect(k.parse(k.worker('a/w', 3))).toEqual({ app: 'a/w', kind: 'worker', workerId: 3 });
    expect(k.parse(k.meta('a'))).toEqual({ app: 'a', kind: 'meta' });
    expect(k.parse(k.seq('a'))).toEqual({ app: 'a', kind: 'seq' });
    expect(k.worker('a', 3).startsWith(k.app('a/w'))).toBe(false);
  });

  it('a stored record round-trips every field', () => {
    const rec: StoredRecord = {
      workerId: 5,
      highWaterMs: 9,
      nodeId: 'n',
      live: true,
      token: 7,
      ttlMs: 1000,
      grantedAtMs: 1,
      renewedAtMs: 2,
      floorMs: 3,
      requestId: 'r',
      incarnation: 'i',
      freedAt: 4,
    };
    const a: LoadedApp = {
      ...empty('y'),
      meta: { value: { bits: 4, datacenterBits: 0, layout: 'L' }, mod: '1' },
      records: new Map([[5, { value: rec, mod: '2' }]]),
    };
    const sm = machineOf([a], 10);
    expect(changesOf(sm, a)).toEqual({ meta: undefined, records: [] });
    expect(sm.worker('y', 5)).toMatchObject({
      live: true,
      token: 7,
      floorMs: 3,
      highWaterMs: 9,
      nodeId: 'n',
    });
    expect(sm.pool('y')).toMatchObject({ bits: 4, layout: 'L', leased: 1 });
  });
});
