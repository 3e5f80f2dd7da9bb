// The window of append messages sent to one follower and not yet acknowledged (flow control).
// A fixed-capacity ring: adding and freeing are O(1) amortised and never allocate after the first use.

export class Inflights {
  /** Number of messages in flight. */
  count = 0;
  /** Payload bytes in flight. */
  bytes = 0;
  private start = 0;
  // Allocated on first add: most progress objects (followers of a follower) never send anything.
  private lastIndexes: Float64Array | undefined;
  private sizes: Float64Array | undefined;

  /**
   * @param capacity most messages in flight (> 0)
   * @param maxBytes most payload bytes in flight; 0 = unbounded. One message may exceed it on its own
   *   (otherwise a single large entry could never be sent), after which the window is full.
   */
  constructor(
    readonly capacity: number,
    readonly maxBytes: number,
  ) {}

  /** Records a message whose last entry has index `lastIndex` carrying `bytes` of payload. */
  add(lastIndex: number, bytes: number): void {
    if (this.count === this.capacity) {
      throw new Error(`raft: inflights overflow (capacity ${this.capacity}); check full() before add()`);
    }
    if (this.lastIndexes === undefined || this.sizes === undefined) {
      this.lastIndexes = new Float64Array(this.capacity);
      this.sizes = new Float64Array(this.capacity);
    }
    let slot = this.start + this.count;
    if (slot >= this.capacity) slot -= this.capacity;
    this.lastIndexes[slot] = lastIndex;
    this.sizes[slot] = bytes;
    this.count++;
    this.bytes += bytes;
  }

  /** Frees every message whose last index is <= `index` (they are acknowledged). */
  freeLE(index: number): void {
    const idx = this.lastIndexes;
    const sizes = this.sizes;
    if (idx === undefined || sizes === undefined) return;
    while (this.count > 0 && (idx[this.start] as number) <= index) {
      this.bytes -= sizes[this.start] as number;
      this.start++;
      if (this.start === this.capacity) this.start = 0;
      this.count--;
    }
    if (this.count === 0) {
      this.start = 0;
      this.bytes = 0;
    }
  }

  /** Frees the oldest message (used when the follower is alive but the window seems lost). */
  freeFirst(): void {
    if (this.count === 0 || this.lastIndexes === undefined) return;
    this.freeLE(this.lastIndexes[this.start] as number);
  }

  full(): boolean {
    return this.count === this.capacity || (this.maxBytes > 0 && this.bytes >= this.maxBytes);
  }

  reset(): void {
    this.count = 0;
    this.bytes = 0;
    this.start = 0;
  }
}
