/**
 * An intrusive indexed binary min-heap keyed by a number (a monotonic-clock deadline).
 *
 * Each entry remembers its own position (`heapIndex`, -1 when not in a heap), so removing or
 * re-keying an arbitrary entry is O(log n) with no search and no allocation: the lease service
 * keeps one entry per live lease for as long as the lease lives, and a renewal never pushes a
 * new element (no heap growth, no garbage per renewal).
 *
 * Entries with equal keys come out in an order that depends only on the sequence of operations
 * (deterministic, but not insertion order).
 */
export interface HeapEntry {
  /** The entry's key (smallest first). Written only by the heap. */
  key: number;
  /** Position in the heap's array, -1 when the entry is in no heap. Written only by the heap. */
  heapIndex: number;
}

export class DeadlineHeap<T extends HeapEntry> {
  private readonly items: T[] = [];

  get size(): number {
    return this.items.length;
  }

  /** The entry with the smallest key, without removing it. */
  peek(): T | undefined {
    return this.items[0];
  }

  has(entry: T): boolean {
    return entry.heapIndex >= 0 && this.items[entry.heapIndex] === entry;
  }

  /** Adds an entry that is in no heap. Throws if it already is (a bug in the caller). */
  push(entry: T, key: number): void {
    if (entry.heapIndex !== -1) throw new Error('DeadlineHeap.push: entry is already in a heap');
    checkKey(key);
    entry.key = key;
    entry.heapIndex = this.items.length;
    this.items.push(entry);
    this.siftUp(entry.heapIndex);
  }

  /** Removes and returns the entry with the smallest key. */
  pop(): T | undefined {
    const top = this.items[0];
    if (top === undefined) return undefined;
    this.removeAt(0);
    return top;
  }

  /** Removes an entry wherever it is. Returns false if it was not in this heap. */
  remove(entry: T): boolean {
    if (!this.has(entry)) return false;
    this.removeAt(entry.heapIndex);
    return true;
  }

  /** Changes an entry's key (up or down) and restores heap order. The entry must be in this heap. */
  update(entry: T, key: number): void {
    if (!this.has(entry)) throw new Error('DeadlineHeap.update: entry is not in this heap');
    checkKey(key);
    const old = entry.key;
    entry.key = key;
    if (key < old) this.siftUp(entry.heapIndex);
    else if (key > old) this.siftDown(entry.heapIndex);
  }

  /** Empties the heap; every entry is marked as in no heap. */
  clear(): void {
    for (const e of this.items) e.heapIndex = -1;
    this.items.length = 0;
  }

  /** Entries in heap-array order (not sorted). For diagnostics and tests. */
  entries(): readonly T[] {
    return this.items;
  }

  /** Throws if heap order or the entries' positions are broken. For tests. */
  checkInvariants(): void {
    for (let i = 0; i < this.items.length; i++) {
      const e = this.items[i]!;
      if (e.heapIndex !== i) throw new Error(`entry at ${i} says it is at ${e.heapIndex}`);
      if (i > 0) {
        const parent = this.items[(i - 1) >> 1]!;
        if (parent.key > e.key) throw new Error(`heap order broken at ${i}: ${parent.key} > ${e.key}`);
      }
    }
  }

  private removeAt(i: number): void {
    const items = this.items;
    const gone = items[i]!;
    const last = items.pop()!;
    gone.heapIndex = -1;
    if (i === items.length) return; // removed the last slot
    items[i] = last;
    last.heapIndex = i;
    // The moved entry may belong above or below its new slot.
    if (i > 0 && items[(i - 1) >> 1]!.key > last.key) this.siftUp(i);
    else this.siftDown(i);
  }

  private siftUp(i: number): void {
    const items = this.items;
    const e = items[i]!;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = items[p]!;
      if (parent.key <= e.key) break;
      items[i] = parent;
      parent.heapIndex = i;
      i = p;
    }
    items[i] = e;
    e.heapIndex = i;
  }

  private siftDown(i: number): void {
    const items = this.items;
    const n = items.length;
    const e = items[i]!;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      let c = l;
      if (r < n && items[r]!.key < items[l]!.key) c = r;
      const child = items[c]!;
      if (child.key >= e.key) break;
      items[i] = child;
      child.heapIndex = i;
      i = c;
    }
    items[i] = e;
    e.heapIndex = i;
  }
}

function checkKey(key: number): void {
  // NaN would silently break heap order (every comparison is false).
  if (Number.isNaN(key)) throw new RangeError('DeadlineHeap: key must be a number, got NaN');
}
