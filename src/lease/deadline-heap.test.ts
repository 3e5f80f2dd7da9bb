import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DeadlineHeap, type HeapEntry } from './deadline-heap.js';

interface Item extends HeapEntry {
  id: number;
}

const item = (id: number): Item => ({ id, key: 0, heapIndex: -1 });

describe('DeadlineHeap', () => {
  it('pops entries in key order', () => {
    const h = new DeadlineHeap<Item>();
    const keys = [50, 10, 40, 30, 20, 60, 0];
    for (const [i, k] of keys.entries()) h.push(item(i), k);
    const out: number[] = [];
    for (let e = h.pop(); e; e = h.pop()) out.push(e.key);
    expect(out).toEqual([...keys].sort((a, b) => a - b));
    expect(h.size).toBe(0);
  });

  it('removes and re-keys arbitrary entries', () => {
    const h = new DeadlineHeap<Item>();
    const items = Array.from({ length: 10 }, (_, i) => item(i));
    for (const [i, e] of items.entries()) h.push(e, i * 10);
    expect(h.remove(items[0]!)).toBe(true);
    expect(h.remove(items[0]!)).toBe(false);
    expect(items[0]!.heapIndex).toBe(-1);
    h.update(items[9]!, 1);
    expect(h.peek()).toBe(items[9]);
    h.update(items[9]!, 1000);
    expect(h.peek()).toBe(items[1]);
    h.checkInvariants();
  });

  it('refuses to push an entry twice, to update an absent one, and NaN keys', () => {
    const h = new DeadlineHeap<Item>();
    const a = item(1);
    h.push(a, 1);
    expect(() => h.push(a, 2)).toThrow(/already in a heap/);
    expect(() => h.update(item(2), 1)).toThrow(/not in this heap/);
    expect(() => h.push(item(3), Number.NaN)).toThrow(/NaN/);
  });

  it('clear() marks every entry as out of the heap', () => {
    const h = new DeadlineHeap<Item>();
    const items = [item(1), item(2), item(3)];
    for (const [i, e] of items.entries()) h.push(e, i);
    h.clear();
    expect(h.size).toBe(0);
    expect(items.every((e) => e.heapIndex === -1)).toBe(true);
    h.push(items[0]!, 5); // reusable after clear
    expect(h.peek()).toBe(items[0]);
  });

  it('behaves like a sorted list under random push/pop/remove/update (property)', () => {
    const op = fc.oneof(
      fc.record({ t: fc.constant('push' as const), key: fc.integer({ min: -50, max: 50 }) }),
      fc.record({ t: fc.constant('pop' as const) }),
      fc.record({ t: fc.constant('remove' as const), pick: fc.nat() }),
      fc.record({
        t: fc.constant('update' as const),
        pick: fc.nat(),
        key: fc.integer({ min: -50, max: 50 }),
      }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300, size: 'max' }), (ops) => {
        const h = new DeadlineHeap<Item>();
        const model = new Map<number, Item>(); // id -> item currently in the heap
        let nextId = 0;
        for (const o of ops) {
          const live = [...model.values()];
          switch (o.t) {
            case 'push': {
              const e = item(nextId++);
              h.push(e, o.key);
              model.set(e.id, e);
              break;
            }
            case 'pop': {
              const min = live.length === 0 ? undefined : Math.min(...live.map((e) => e.key));
              const e = h.pop();
              expect(e?.key).toBe(min);
              if (e) model.delete(e.id);
              break;
            }
            case 'remove': {
              if (live.length === 0) break;
              const e = live[o.pick % live.length]!;
              expect(h.remove(e)).toBe(true);
              model.delete(e.id);
              break;
            }
            case 'update': {
              if (live.length === 0) break;
              const e = live[o.pick % live.length]!;
              h.update(e, o.key);
              break;
            }
          }
          h.checkInvariants();
          expect(h.size).toBe(model.size);
          const min = model.size === 0 ? undefined : Math.min(...[...model.values()].map((e) => e.key));
          expect(h.peek()?.key).toBe(min);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('holds 100,000 deadlines and drains them in order', () => {
    const h = new DeadlineHeap<Item>();
    const n = 100_000;
    // A deterministic shuffle of keys.
    let s = 12345;
    for (let i = 0; i < n; i++) {
      s = (Math.imul(s, 1103515245) + 12345) >>> 0;
      h.push(item(i), s % 1_000_000);
    }
    expect(h.size).toBe(n);
    let prev = Number.NEGATIVE_INFINITY;
    let count = 0;
    let outOfOrder = 0;
    for (let e = h.pop(); e; e = h.pop()) {
      if (e.key < prev) outOfOrder++;
      prev = e.key;
      count++;
    }
    expect(outOfOrder).toBe(0);
    expect(count).toBe(n);
  });
});
