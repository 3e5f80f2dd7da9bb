// A min-heap of timed events. Ties on time are broken by insertion order, so the schedule is a
// pure function of the order in which events were pushed: no hidden nondeterminism.

interface Slot<T> {
  at: number;
  seq: number;
  event: T;
}

export class EventQueue<T> {
  private readonly heap: Slot<T>[] = [];
  private seq = 0;

  get size(): number {
    return this.heap.length;
  }

  push(at: number, event: T): void {
    const slot: Slot<T> = { at, seq: this.seq++, event };
    const h = this.heap;
    h.push(slot);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!less(slot, h[parent] as Slot<T>)) break;
      h[i] = h[parent] as Slot<T>;
      i = parent;
    }
    h[i] = slot;
  }

  /** Time of the earliest event, or undefined when empty. */
  peekTime(): number | undefined {
    return this.heap[0]?.at;
  }

  pop(): { at: number; event: T } | undefined {
    const h = this.heap;
    const top = h[0];
    if (top === undefined) return undefined;
    const last = h.pop() as Slot<T>;
    if (h.length > 0) {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= h.length) break;
        const r = l + 1;
        const child = r < h.length && less(h[r] as Slot<T>, h[l] as Slot<T>) ? r : l;
        if (!less(h[child] as Slot<T>, last)) break;
        h[i] = h[child] as Slot<T>;
        i = child;
      }
      h[i] = last;
    }
    return { at: top.at, event: top.event };
  }
}

function less<T>(a: Slot<T>, b: Slot<T>): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}
