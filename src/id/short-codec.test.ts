import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidIdError, InvalidShortCodeError, OptionError } from './errors.js';
import { ShortCodec } from './short-codec.js';

const MAX63 = (1n << 63n) - 1n;

describe('ShortCodec', () => {
  const keyed = new ShortCodec({ secret: 'k1' });
  const plain = new ShortCodec();

  it('round-trips 63-bit IDs, keyed and plain, with short URL-safe codes', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: MAX63 }), (id) => {
        for (const codec of [keyed, plain]) {
          const code = codec.encode(id);
          expect(code).toMatch(/^[A-Za-z0-9]{2,16}$/);
          expect(codec.decode(code)).toBe(id);
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('keyed codes differ per secret and do not decode under another secret to the same id', () => {
    const other = new ShortCodec({ secret: 'k2' });
    const id = 2124365429366599680n;
    expect(keyed.encode(id)).not.toBe(other.encode(id));
    expect(keyed.encode(id)).not.toBe(plain.encode(id));
    let decodedSame = 0;
    for (let i = 0n; i < 200n; i++) {
      try {
        if (other.decode(keyed.encode(id + i)) === id + i) decodedSame++;
      } catch (err) {
        expect(err).toBeInstanceOf(InvalidShortCodeError);
      }
    }
    expect(decodedSame).toBe(0);
  });

  it('keyed codes of consecutive IDs look unrelated', () => {
    const a = keyed.encode(1000n);
    const b = keyed.encode(1001n);
    let samePrefix = 0;
    while (samePrefix < Math.min(a.length, b.length) && a[samePrefix] === b[samePrefix]) samePrefix++;
    expect(samePrefix).toBeLessThan(3);
  });

  it('honours minLength and a custom alphabet', () => {
    const c = new ShortCodec({ minLength: 20, alphabet: 'abcdefghijklmnopqrstuvwxyz' });
    const code = c.encode(5n);
    expect(code.length).toBeGreaterThanOrEqual(20);
    expect(code).toMatch(/^[a-z]+$/);
    expect(c.decode(code)).toBe(5n);
  });

  it('refuses codes it did not make, saying why', () => {
    expect(() => keyed.decode('')).toThrow(InvalidShortCodeError);
    expect(() => keyed.decode('')).toThrow(/invalid short code "": expected 1..64 characters/);
    expect(() => keyed.decode('!!!')).toThrow(InvalidShortCodeError);
    expect(() => plain.decode(new ShortCodec().encode(1n).slice(0, 1))).toThrow(InvalidShortCodeError);
    // Three numbers instead of two.
    expect(() => plain.decode('86Rf07xd4z')).toThrow(
      /invalid short code "86Rf07xd4z": not a code of this codec/,
    );
  });

  it('gives the same codes for the same secret on every platform and release (golden values)', () => {
    expect(new ShortCodec({ secret: 'golden' }).encode(2124365429366599680n)).toBe('it9rxUJgvLUAw');
    expect(new ShortCodec().encode(2124365429366599680n)).toBe('Mjk7VunoxMJWl');
  });

  it('refuses ids and options out of range', () => {
    expect(() => keyed.encode(-1n)).toThrow(InvalidIdError);
    expect(() => keyed.encode(MAX63 + 1n)).toThrow(/an id is an integer in \[0, 2\^63 - 1\]/);
    expect(() => new ShortCodec({ alphabet: 'aa' })).toThrow(OptionError);
    expect(() => new ShortCodec({ alphabet: 'abca' })).toThrow(
      /alphabet = "abca"; allowed: a string of 3..256 unique characters/,
    );
    expect(() => new ShortCodec({ minLength: -1 })).toThrow(
      /minLength = -1; allowed: an integer in \[0, 255\]/,
    );
  });
});
