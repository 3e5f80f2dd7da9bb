import { describe, expect, it } from 'vitest';
import { AuditChannel } from './channel.js';
import type { AuditEvent } from './events.js';

const ev = (i: number): AuditEvent => ({ type: 'id_issued', id: i });

describe('AuditChannel', () => {
  it('queues up to its bound, then hands events to overflow (never drops)', () => {
    const over: AuditEvent[] = [];
    const c = new AuditChannel({ maxQueued: 3, overflow: (e) => over.push(e) });
    for (let i = 0; i < 5; i++) c.emit(ev(i));
    expect(c.size).toBe(3);
    expect(over.map((e) => (e as { id: number }).id)).toEqual([3, 4]);
    expect(c.take(2).map((e) => (e as { id: number }).id)).toEqual([0, 1]);
    expect(c.emitted).toBe(5);
    expect(c.overflowed).toBe(2);
    expect(typeof over[0]!.tsMs).toBe('number');
  });

  it('emit never throws, even when overflow does', () => {
    const errors: unknown[] = [];
    const c = new AuditChannel({
      maxQueued: 1,
      overflow: () => {
        throw new Error('disk gone');
      },
      onError: (err) => errors.push(err),
    });
    c.emit(ev(1));
    expect(() => c.emit(ev(2))).not.toThrow();
    expect(String(errors[0])).toMatch(/disk gone/);
  });

  it('wakes the waiter when a batch is ready, or on timeout', async () => {
    const c = new AuditChannel({ maxQueued: 100, overflow: () => {} });
    const w = c.wait(3, 60_000);
    c.emit(ev(1));
    c.emit(ev(2));
    c.emit(ev(3));
    await w;
    expect(c.size).toBe(3);
    await c.wait(10, 5); // timeout path
  });
});
