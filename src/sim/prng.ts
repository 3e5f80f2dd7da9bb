// The simulator's only source of randomness. One seed drives a whole run; every subsystem
// (network, faults, workload, each node's election timer) gets its own stream forked from that
// seed by name, so adding a draw in one subsystem does not reshuffle the others.
// Generator: xoshiro128** (Blackman & Vigna), state seeded through a splitmix32-style mixer.

const GOLDEN = 0x9e3779b9;

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/** A 32-bit finalizer (avalanches every input bit into every output bit). */
export function mix32(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/** FNV-1a over a label, used to name forked streams. */
function labelHash(label: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < label.length; i++) {
    h = Math.imul(h ^ label.charCodeAt(i), 0x01000193);
  }
  return h >>> 0;
}

/** Largest seed accepted: seeds are plain non-negative integers that fit a double exactly. */
export const MAX_SEED = Number.MAX_SAFE_INTEGER;

export class Prng {
  private s0 = 0;
  private s1 = 0;
  private s2 = 0;
  private s3 = 0;
  /** The two 32-bit halves of the seed this stream was built from (kept for fork()). */
  private readonly lo: number;
  private readonly hi: number;

  /** `seed` must be an integer in [0, MAX_SEED]. */
  constructor(seed: number) {
    if (!Number.isSafeInteger(seed) || seed < 0) {
      throw new RangeError(`prng: seed must be an integer in [0, ${MAX_SEED}], got ${seed}`);
    }
    this.lo = seed >>> 0;
    this.hi = Math.floor(seed / 0x100000000) >>> 0;
    let x = mix32(this.lo ^ mix32(this.hi ^ GOLDEN));
    const next = (): number => {
      x = (x + GOLDEN) >>> 0;
      return mix32(x);
    };
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next();
    // xoshiro's one forbidden state; the mixer makes it practically unreachable, but be exact.
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1;
  }

  /** An independent stream for a named subsystem; does not advance this stream. */
  fork(label: string): Prng {
    const h = labelHash(label);
    const lo = mix32(this.lo ^ h);
    const hi = mix32(this.hi ^ rotl(h, 13) ^ GOLDEN) & 0x1fffff; // keep within 53 bits
    return new Prng(hi * 0x100000000 + lo);
  }

  /** Next 32 uniformly random bits as an unsigned integer. */
  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5) >>> 0, 7), 9) >>> 0;
    const t = (this.s1 << 9) >>> 0;
    this.s2 = (this.s2 ^ this.s0) >>> 0;
    this.s3 = (this.s3 ^ this.s1) >>> 0;
    this.s1 = (this.s1 ^ this.s2) >>> 0;
    this.s0 = (this.s0 ^ this.s3) >>> 0;
    this.s2 = (this.s2 ^ t) >>> 0;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** Uniform integer in [0, n). `n` must be an integer in [1, 2^32]. Unbiased (rejection sampling). */
  int(n: number): number {
    if (!Number.isInteger(n) || n < 1 || n > 0x100000000) {
      throw new RangeError(`prng: int(n) needs an integer n in [1, 2^32], got ${n}`);
    }
    if (n === 1) return 0;
    // Reject the top partial bucket so every residue is equally likely.
    const limit = 0x100000000 - (0x100000000 % n);
    for (;;) {
      const r = this.nextU32();
      if (r < limit) return r % n;
    }
  }

  /** Uniform integer in [lo, hi] (both inclusive). */
  range(lo: number, hi: number): number {
    if (hi < lo) throw new RangeError(`prng: range(${lo}, ${hi}) is empty`);
    return lo + this.int(hi - lo + 1);
  }

  /** Uniform float in [0, 1). */
  float(): number {
    return this.nextU32() / 0x100000000;
  }

  /** True with probability p (p <= 0 never, p >= 1 always; no draw is skipped either way). */
  chance(p: number): boolean {
    return this.float() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('prng: pick() from an empty list');
    return items[this.int(items.length)] as T;
  }

  /** Picks a key with probability proportional to its weight; zero weights are never picked. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K {
    const keys = Object.keys(weights) as K[];
    let total = 0;
    for (const k of keys) total += Math.max(0, weights[k]);
    if (total <= 0) throw new RangeError('prng: weighted() needs at least one positive weight');
    let r = this.float() * total;
    for (const k of keys) {
      const w = Math.max(0, weights[k]);
      if (r < w) return k;
      r -= w;
    }
    // Floating-point residue: fall back to the last positive weight.
    for (let i = keys.length - 1; i >= 0; i--) {
      const k = keys[i] as K;
      if (weights[k] > 0) return k;
    }
    throw new Error('unreachable');
  }

  /** Fisher–Yates shuffle of a copy. */
  shuffled<T>(items: readonly T[]): T[] {
    const out = items.slice();
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      const t = out[i] as T;
      out[i] = out[j] as T;
      out[j] = t;
    }
    return out;
  }

  /** A RaftConfig.random-compatible function drawing from this stream. */
  asRandomInt(): (n: number) => number {
    return (n: number) => this.int(n);
  }
}
