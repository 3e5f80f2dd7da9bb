// The set of operations linearized so far on the current search path, with an O(1) hash and
// compact snapshots.
//
// Porcupine re-hashes and copies the whole bitset on every step; here:
// - each operation owns a random 32-bit "Zobrist" value and the hash is the XOR of the values of
//   the members, so set and clear update the hash in constant time;
// - operations are numbered in invoke order, so the members form a solid run of full words
//   (long-finished operations), a short ragged window, then empty words. A snapshot keeps only the
//   window: the index of the first word that is not full and the words up to the last non-empty
//   one. That representation is canonical, so snapshots compare exactly.

/** A cached set: the words from `base` on; every word before base is full, every word after empty. */
export interface BitsetSnapshot {
  base: number;
  words: Uint32Array;
}

const FULL = 0xffffffff;

export class Bitset {
  private readonly words: Uint32Array;
  hash = 0;
  /** Index of the first word that is not full (words.length if all are). */
  private firstNonFull = 0;
  /** Index of the last word that is not empty (-1 if none). */
  private lastNonEmpty = -1;

  constructor(
    readonly size: number,
    private readonly zobrist: Uint32Array,
  ) {
    this.words = new Uint32Array(Math.ceil(size / 32));
    // Pad the unused high bits of the last word so a complete set reads as full words.
    const spare = this.words.length * 32 - size;
    if (spare > 0) this.words[this.words.length - 1] = (FULL << (32 - spare)) >>> 0;
    this.advanceFirstNonFull();
  }

  has(i: number): boolean {
    return (this.words[i >>> 5]! & (1 << (i & 31))) !== 0;
  }

  set(i: number): void {
    if (this.has(i)) return;
    const w = i >>> 5;
    this.words[w]! |= 1 << (i & 31);
    this.hash = (this.hash ^ this.zobrist[i]!) >>> 0;
    if (w > this.lastNonEmpty) this.lastNonEmpty = w;
    if (w === this.firstNonFull) this.advanceFirstNonFull();
  }

  clear(i: number): void {
    if (!this.has(i)) return;
    const w = i >>> 5;
    this.words[w]! &= ~(1 << (i & 31));
    this.hash = (this.hash ^ this.zobrist[i]!) >>> 0;
    if (w < this.firstNonFull) this.firstNonFull = w;
    while (this.lastNonEmpty >= 0 && this.isEmptyWord(this.lastNonEmpty)) this.lastNonEmpty--;
  }

  snapshot(): BitsetSnapshot {
    const base = this.firstNonFull;
    return { base, words: this.words.slice(base, Math.max(base, this.lastNonEmpty + 1)) };
  }

  equalsSnapshot(s: BitsetSnapshot): boolean {
    const base = this.firstNonFull;
    if (s.base !== base || s.words.length !== Math.max(0, this.lastNonEmpty + 1 - base)) return false;
    const mine = this.words;
    for (let i = 0; i < s.words.length; i++) if (mine[base + i] !== s.words[i]) return false;
    return true;
  }

  private advanceFirstNonFull(): void {
    while (this.firstNonFull < this.words.length && this.words[this.firstNonFull] === FULL)
      this.firstNonFull++;
  }

  /** Empty apart from the padding bits of the last word. */
  private isEmptyWord(w: number): boolean {
    const v = this.words[w]!;
    if (w < this.words.length - 1) return v === 0;
    const spare = this.words.length * 32 - this.size;
    return spare === 0 ? v === 0 : (v & (FULL >>> spare)) === 0;
  }
}

/**
 * Deterministic per-operation hash values (a fixed-seed xorshift), so two runs over the same
 * history explore the same search tree and take the same time.
 */
export function zobristTable(size: number, seed = 0x9e3779b9): Uint32Array {
  const table = new Uint32Array(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    table[i] = x;
  }
  return table;
}
