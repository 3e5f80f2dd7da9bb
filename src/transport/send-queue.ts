/**
 * Encoded frames waiting for a peer's socket, bounded by count and by bytes. A frame that would cross
 * either bound is refused (the caller drops it): memory per peer never exceeds the bounds.
 */
export class SendQueue {
  private items: Uint8Array[] = [];
  private head = 0;
  private bytes = 0;

  constructor(
    private readonly maxMessages: number,
    private readonly maxBytes: number,
  ) {}

  get length(): number {
    return this.items.length - this.head;
  }

  get byteLength(): number {
    return this.bytes;
  }

  /** Appends unless that would exceed a bound; returns whether it did. */
  push(frame: Uint8Array): boolean {
    if (this.length >= this.maxMessages || this.bytes + frame.length > this.maxBytes) return false;
    this.items.push(frame);
    this.bytes += frame.length;
    return true;
  }

  shift(): Uint8Array | undefined {
    if (this.head >= this.items.length) return undefined;
    const frame = this.items[this.head]!;
    this.items[this.head] = EMPTY; // let the frame be collected before the array is compacted
    this.head++;
    this.bytes -= frame.length;
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      // Compact once the consumed prefix dominates: amortised O(1) per item.
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return frame;
  }

  /** Empties the queue; returns how many frames were discarded. */
  clear(): number {
    const n = this.length;
    this.items = [];
    this.head = 0;
    this.bytes = 0;
    return n;
  }
}

const EMPTY = new Uint8Array(0);
