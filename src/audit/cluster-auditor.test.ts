import { describe, expect, it } from 'vitest';
import { FakeLog } from '../state/leases/test-helpers.js';
import { buildCreate, encodeSequenceCommand, SequenceStateMachine } from '../state/sequences/index.js';
import { ClusterAuditor } from './cluster-auditor.js';
import { type AuditEvent, auditEventId } from './events.js';

function setup(o: {
  leading: boolean;
  ringSize?: number;
  reEmitChunk?: number;
  defer?: (fn: () => void) => void;
}) {
  const log = new FakeLog();
  const seqs = new SequenceStateMachine();
  const emitted: AuditEvent[] = [];
  let roleCb: (leading: boolean) => void = () => {};
  const auditor = new ClusterAuditor({
    audit: { emit: (e) => emitted.push(e) },
    leases: log.sm,
    sequences: seqs,
    onRoleChange: (cb) => {
      roleCb = cb;
      return () => {};
    },
    isLeader: () => o.leading,
    cluster: 'c1',
    ...(o.ringSize === undefined ? {} : { ringSize: o.ringSize }),
    ...(o.reEmitChunk === undefined ? {} : { reEmitChunk: o.reEmitChunk }),
    ...(o.defer === undefined ? {} : { defer: o.defer }),
  });
  return { log, seqs, emitted, auditor, role: (leading: boolean) => roleCb(leading) };
}

describe('ClusterAuditor', () => {
  it('the leader emits each applied lease event once, with the log index as its id and the leader time as its time', () => {
    const s = setup({ leading: true });
    const a = s.log.grant('orders', 'host-a');
    s.log.run({
      op: 'renew',
      app: 'orders',
      workerId: a.workerId,
      token: a.token,
      boundMs: s.log.timeMs + 60_000,
    });
    s.log.run({ op: 'release', app: 'orders', workerId: a.workerId, token: a.token, lastTimestampMs: 5 });
    expect(s.emitted.map((e) => [e.type, auditEventId(e)])).toEqual([
      ['lease_acquired', 'r/c1/1/0'],
      ['lease_renewed', 'r/c1/2/0'],
      ['lease_released', 'r/c1/3/0'],
    ]);
    expect(s.emitted.map((e) => ('holder' in e ? e.holder : ''))).toEqual(['host-a', 'host-a', 'host-a']);
    expect(s.emitted[0]?.tsMs).toBe(1_700_000_001_000);
  });

  it('several events of one entry get sub-indexes; segment allocations are events too', () => {
    const s = setup({ leading: true });
    const a = s.log.grant('orders', 'a');
    const b = s.log.grant('orders', 'b');
    s.log.run({
      op: 'expire',
      items: [
        ['orders', a.workerId, a.token],
        ['orders', b.workerId, b.token],
      ],
    });
    const create = buildCreate('invoices', {});
    if ('ok' in create) throw new Error(create.message);
    s.seqs.apply(encodeSequenceCommand(create), s.log.ctx());
    s.seqs.apply(
      encodeSequenceCommand({
        op: 'alloc',
        key: 'invoices',
        count: 100,
        owner: 'node-1',
        requestId: 'r',
        exact: false,
      }),
      s.log.ctx(),
    );
    expect(s.emitted.map((e) => `${e.type} ${auditEventId(e)}`)).toEqual([
      'lease_acquired r/c1/1/0',
      'lease_acquired r/c1/2/0',
      'lease_expired r/c1/3/0',
      'lease_expired r/c1/3/1',
      'segment_allocated r/c1/5/0',
    ]);
    expect(s.emitted[4]).toMatchObject({ key: 'invoices', node: 'node-1', start: '1', end: '101' });
  });

  it('a follower emits nothing until it becomes leader, then everything it applied (the old leader may not have shipped it)', () => {
    const s = setup({ leading: false });
    s.log.grant('orders', 'a');
    s.log.grant('orders', 'b');
    expect(s.emitted).toEqual([]);
    s.role(true);
    expect(s.emitted.map(auditEventId)).toEqual(['r/c1/1/0', 'r/c1/2/0']);
    s.log.grant('orders', 'c');
    expect(s.emitted.map(auditEventId)).toEqual(['r/c1/1/0', 'r/c1/2/0', 'r/c1/3/0']);
    s.role(false);
    s.log.grant('orders', 'd');
    expect(s.emitted).toHaveLength(3);
    expect(s.auditor.stats).toMatchObject({ emitted: 1, reEmitted: 2, leaderships: 1 });
  });

  it('keeps at most ringSize events for a new leader', () => {
    const s = setup({ leading: false, ringSize: 3 });
    for (let i = 0; i < 10; i++) s.log.grant('orders', `n${i}`);
    s.role(true);
    expect(s.emitted.map(auditEventId)).toEqual(['r/c1/8/0', 'r/c1/9/0', 'r/c1/10/0']);
  });

  it('round 4: a new leader re-emits its ring in chunks, one per turn of the event loop, and stops if it steps down', () => {
    const later: (() => void)[] = [];
    const s = setup({ leading: false, reEmitChunk: 2, defer: (fn) => later.push(fn) });
    for (let i = 0; i < 5; i++) s.log.grant('orders', `n${i}`);
    s.role(true);
    expect(s.emitted).toHaveLength(2); // the rest waits for the next turns: the node keeps ticking meanwhile
    later.shift()?.();
    expect(s.emitted).toHaveLength(4);
    s.role(false);
    later.shift()?.();
    expect(s.emitted).toHaveLength(4);
  });
});
