import { hkdfSync } from 'node:crypto';
import { IdPartRangeError, OptionError } from './errors.js';

export interface PermutationOptions {
  /** The key. Anyone holding it can undo the permutation; keep it secret and stable (changing it changes codes). */
  secret: string | Uint8Array;
  /** Size of the domain in bits: the permutation maps [0, 2^width) onto itself. In [2, 64]. Default 63 (IDs). */
  width?: number;
  /** Feistel rounds, in [4, 32]. Default 8. */
  rounds?: number;
}

/**
 * A keyed, reversible permutation of `width`-bit integers (default 63: every Snowflake ID maps to another valid ID
 * and back). It hides the order, time and worker of IDs from casual observers.
 *
 * It is obfuscation, NOT encryption: a balanced Feistel network over two ceil(width/2)-bit halves with a fast
 * integer-hash round function, keys derived once from the secret with HKDF-SHA256. It has no security proof;
 * someone with many (id, code) pairs may be able to recover the mapping. Do not rely on it to keep IDs secret from a
 * determined attacker. For an odd width the network runs over width + 1 bits and "cycle-walks" (re-applies itself)
 * until the result falls back into [0, 2^width): still a bijection, about two passes on average.
 */
export class IdPermutation {
  readonly width: number;
  readonly rounds: number;
  private readonly keys: Uint32Array;
  private readonly halfBig: bigint;
  private readonly halfMask: number;
  private readonly halfMaskBig: bigint;
  /** Values with a left half >= this are outside [0, 2^width) (odd widths): walk again. */
  private readonly leftLimit: number;
  private readonly maxValue: bigint;

  constructor(options: PermutationOptions) {
    const secret = options?.secret;
    if (!(typeof secret === 'string' || secret instanceof Uint8Array) || secret.length === 0) {
      throw new OptionError('secret', 'a non-empty string or Uint8Array', secret);
    }
    const width = options.width ?? 63;
    const rounds = options.rounds ?? 8;
    if (!Number.isInteger(width) || width < 2 || width > 64) {
      throw new OptionError('width', 'an integer in [2, 64]', width);
    }
    if (!Number.isInteger(rounds) || rounds < 4 || rounds > 32) {
      throw new OptionError('rounds', 'an integer in [4, 32]', rounds);
    }
    this.width = width;
    this.rounds = rounds;
    const half = Math.ceil(width / 2);
    this.halfBig = BigInt(half);
    this.halfMask = half === 32 ? 0xffffffff : 2 ** half - 1;
    this.halfMaskBig = BigInt(this.halfMask);
    this.leftLimit = 2 ** (width - half);
    this.maxValue = (1n << BigInt(width)) - 1n;
    const derived = new DataView(
      hkdfSync('sha256', secret, 'floe/id-permutation/v1', `width=${width};rounds=${rounds}`, 4 * rounds),
    );
    // Big-endian reads: the same secret gives the same permutation on every platform.
    this.keys = Uint32Array.from({ length: rounds }, (_, i) => derived.getUint32(4 * i));
  }

  /** Permute `value` (an integer in [0, 2^width)). */
  encode(value: bigint): bigint {
    this.check(value);
    let l = Number(value >> this.halfBig);
    let r = Number(value & this.halfMaskBig);
    const keys = this.keys;
    const mask = this.halfMask;
    const n = this.rounds;
    do {
      for (let i = 0; i < n; i++) {
        const t = r;
        r = ((l ^ mix(r ^ (keys[i] as number))) & mask) >>> 0;
        l = t;
      }
    } while (l >= this.leftLimit);
    return (BigInt(l) << this.halfBig) | BigInt(r);
  }

  /** Undo `encode`. */
  decode(value: bigint): bigint {
    this.check(value);
    let l = Number(value >> this.halfBig);
    let r = Number(value & this.halfMaskBig);
    const keys = this.keys;
    const mask = this.halfMask;
    do {
      for (let i = this.rounds - 1; i >= 0; i--) {
        const t = l;
        l = ((r ^ mix(l ^ (keys[i] as number))) & mask) >>> 0;
        r = t;
      }
    } while (l >= this.leftLimit);
    return (BigInt(l) << this.halfBig) | BigInt(r);
  }

  private check(value: bigint): void {
    if (typeof value !== 'bigint' || value < 0n || value > this.maxValue) {
      throw new IdPartRangeError('value', value, 0n, this.maxValue, `a ${this.width}-bit permutation`);
    }
  }
}

/** A 32-bit integer hash (xor-shift / multiply rounds): cheap, and every input bit affects every output bit. */
function mix(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return x >>> 0;
}
