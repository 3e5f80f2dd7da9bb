import { describe, expect, it } from 'vitest';
import { AuditEventError, auditEventId, auditEventToRow, pluginRecordToEvent } from './events.js';

describe('audit events', () => {
  it('cluster events take their id from the Raft log index and sub-index', () => {
    const a = auditEventId({
      type: 'lease_acquired',
      app: 'x',
      workerId: 3,
      holder: 'n1',
      token: 7,
      raftIndex: 42n,
    });
    const b = auditEventId({
      type: 'lease_acquired',
      app: 'x',
      workerId: 3,
      holder: 'n1',
      token: 7,
      raftIndex: '42',
      tsMs: 99, // a second leader re-emitting at another time: same id
    });
    expect(a).toBe('r//42/0');
    expect(b).toBe(a);
    expect(
      auditEventId({
        type: 'lease_expired',
        app: 'x',
        workerId: 3,
        holder: 'n1',
        token: 7,
        raftIndex: 42,
        raftSub: 1,
      }),
    ).toBe('r//42/1');
  });

  it('non-cluster events derive a stable id from what identifies them', () => {
    const e = {
      type: 'sdk_issued',
      app: 'a/b',
      worker: 5,
      token: 9n,
      first: 1n << 62n,
      last: (1n << 62n) + 9n,
      count: 10,
    } as const;
    expect(auditEventId(e)).toBe(`k/a%2Fb//5/9/${1n << 62n}/${(1n << 62n) + 9n}`);
    expect(auditEventId({ ...e })).toBe(auditEventId(e));
    expect(
      auditEventId({
        type: 'ids_range',
        key: 'k',
        node: 'n',
        segment: 100,
        first: 100,
        last: 199,
        count: 100,
      }),
    ).toBe('i/k/n/100/100');
  });

  it('rows carry 64-bit values as decimal strings and time as seconds + ms', () => {
    const r = auditEventToRow({
      type: 'sdk_issued',
      worker: 1,
      token: '18446744073709551615',
      first: 1n,
      last: 2n,
      count: 2,
      tsMs: 1_764_081_600_123,
    });
    expect(r.ts).toBe(1_764_081_600);
    expect(r.ts_ms).toBe('1764081600123');
    expect(r.token).toBe('18446744073709551615');
    expect(r.worker_id).toBe(1);
    expect(r.event_id).toMatch(/^k\//);
  });

  it('malformed events are refused naming the field', () => {
    expect(() =>
      auditEventToRow({ type: 'sdk_issued', worker: 1, token: -1, first: 1, last: 1, count: 1 }),
    ).toThrow(/token out of the UInt64 range: -1/);
    expect(() =>
      auditEventToRow({ type: 'sdk_issued', worker: 1, token: 1, first: 1.5, last: 1, count: 1 }),
    ).toThrow(AuditEventError);
    expect(() =>
      auditEventToRow({ type: 'segment_allocated', key: 'k', node: 'n', start: 10, end: 5 }),
    ).toThrow(/end \(5\) < start \(10\)/);
    expect(() => auditEventToRow({ type: 'nope' } as never)).toThrow(/unknown type "nope"/);
    expect(() =>
      auditEventToRow({ type: 'lease_renewed', workerId: 1, holder: 'h', token: 1 } as never),
    ).toThrow(/app is required/);
  });

  it('maps the strategies audit plugin record to an SDK summary', () => {
    const e = pluginRecordToEvent({
      type: 'issued',
      bizType: 'order',
      first: '10',
      last: '19',
      count: 10,
      fromMs: 1000,
      toMs: 2000,
      app: 'shop',
      workerId: 4,
      token: 8n,
    });
    expect(e).toMatchObject({
      type: 'sdk_issued',
      app: 'shop',
      bizType: 'order',
      worker: 4,
      token: 8n,
      count: 10,
    });
    expect(auditEventToRow(e).worker_id).toBe(4);
    expect(() => pluginRecordToEvent({ type: 'other' })).toThrow(/expected type "issued"/);
  });
});
