import { hkdfSync } from 'node:crypto';
import Sqids from 'sqids';
import { InvalidIdError, InvalidShortCodeError, OptionError } from './errors.js';
import { IdPermutation } from './permutation.js';

/** The sqids default alphabet (62 URL-safe characters). */
export const SHORT_CODE_ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

export interface ShortCodecOptions {
  /**
   * With a secret, IDs are permuted (`IdPermutation`, width 63) and the alphabet is shuffled by a key derived from
   * the secret before encoding, so codes reveal neither order nor time and differ between deployments.
   * Without one, codes are plain sqids of the ID: short, but anyone can decode them.
   */
  secret?: string | Uint8Array;
  /** Characters to use (unique, single-byte, at least 3). Default `SHORT_CODE_ALPHABET`. */
  alphabet?: string;
  /** Pad codes to at least this length. Default 0. */
  minLength?: number;
}

const MAX_ID = (1n << 63n) - 1n;

/**
 * Short, URL-safe codes for 63-bit IDs, built on sqids (the ID travels as two numbers: its high 31 and low 32 bits).
 * `decode` accepts only codes `encode` could have produced (it re-encodes and compares), else throws
 * `InvalidShortCodeError`. Like the permutation this is obfuscation, not encryption.
 */
export class ShortCodec {
  private readonly sqids: Sqids;
  private readonly permutation: IdPermutation | undefined;

  constructor(options: ShortCodecOptions = {}) {
    const alphabet = options.alphabet ?? SHORT_CODE_ALPHABET;
    const minLength = options.minLength ?? 0;
    if (!Number.isInteger(minLength) || minLength < 0 || minLength > 255) {
      throw new OptionError('minLength', 'an integer in [0, 255]', minLength);
    }
    if (
      typeof alphabet !== 'string' ||
      alphabet.length < 3 ||
      alphabet.length > 256 ||
      new Set(alphabet).size !== alphabet.length
    ) {
      throw new OptionError('alphabet', 'a string of 3..256 unique characters', alphabet);
    }
    if (options.secret !== undefined) {
      this.permutation = new IdPermutation({ secret: options.secret });
      this.sqids = new Sqids({ alphabet: keyedShuffle(alphabet, options.secret), minLength });
    } else {
      this.sqids = new Sqids({ alphabet, minLength });
    }
  }

  /** The short code of `id` (an integer in [0, 2^63 - 1]). */
  encode(id: bigint): string {
    if (typeof id !== 'bigint' || id < 0n || id > MAX_ID) throw new InvalidIdError(id, 'out of range');
    const v = this.permutation ? this.permutation.encode(id) : id;
    return this.sqids.encode([Number(v >> 32n), Number(v & 0xffffffffn)]);
  }

  /** The ID behind a code produced by `encode` with the same options. */
  decode(code: string): bigint {
    if (typeof code !== 'string' || code.length === 0 || code.length > 64) {
      throw new InvalidShortCodeError(String(code), 'expected 1..64 characters');
    }
    const parts = this.sqids.decode(code);
    const [hi, lo] = parts;
    if (parts.length !== 2 || hi === undefined || lo === undefined || hi >= 2 ** 31 || lo >= 2 ** 32) {
      throw new InvalidShortCodeError(code, 'not a code of this codec');
    }
    if (this.sqids.encode(parts) !== code) throw new InvalidShortCodeError(code, 'not in canonical form');
    const v = (BigInt(hi) << 32n) | BigInt(lo);
    return this.permutation ? this.permutation.decode(v) : v;
  }
}

/** Fisher-Yates shuffle driven by bytes derived from the secret: the same secret always gives the same alphabet. */
function keyedShuffle(alphabet: string, secret: string | Uint8Array): string {
  const chars = [...alphabet];
  const bytes = new Uint8Array(
    hkdfSync('sha256', secret, 'floe/short-code-alphabet/v1', '', 4 * chars.length),
  );
  const view = new DataView(bytes.buffer);
  for (let i = chars.length - 1; i > 0; i--) {
    const j = view.getUint32(4 * i) % (i + 1);
    const t = chars[i] as string;
    chars[i] = chars[j] as string;
    chars[j] = t;
  }
  return chars.join('');
}
