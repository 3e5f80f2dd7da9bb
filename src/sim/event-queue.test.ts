import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EventQueue } from './event-queue.js';

describe('EventQueue', () => {
  it('pops by time, then by insertion order for equal times', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 20 }), { maxLength: 200 }), (times) => {
        const q = new EventQueue<number>();
        for (const [i, t] of times.entries()) q.push(t, i);
        const out: Array<[number, number]> = [];
        for (let e = q.pop(); e !== undefined; e = q.pop()) out.push([e.at, e.event]);
        const expected = times
          .map((t, i): [number, number] => [t, i])
          .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
        expect(out).toEqual(expected);
      }),
    );
  });

  it('reports its size and earliest time', () => {
    const q = new EventQueue<string>();
    expect(q.peekTime()).toBeUndefined();
    q.push(5, 'b');
    q.push(2, 'a');
    expect(q.size).toBe(2);
    expect(q.peekTime()).toBe(2);
    expect(q.pop()?.event).toBe('a');
    expect(q.pop()?.event).toBe('b');
    expect(q.pop()).toBeUndefined();
  });
});
