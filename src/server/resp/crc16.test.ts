import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { crc16, keyHashSlot, SLOT_COUNT } from './crc16.js';

describe('CRC16-XMODEM and key slots', () => {
  it('matches the XMODEM check value for "123456789" (0x31C3)', () => {
    expect(crc16(Buffer.from('123456789'))).toBe(0x31c3);
  });

  it('maps keys to the slots Redis documents', () => {
    expect(keyHashSlot('foo')).toBe(12182);
    expect(keyHashSlot('123456789')).toBe(12739);
    expect(keyHashSlot('bar')).toBe(5061);
    expect(keyHashSlot('')).toBe(0);
  });

  it('hashes only the first non-empty {tag}', () => {
    expect(keyHashSlot('{user1000}.following')).toBe(keyHashSlot('{user1000}.followers'));
    expect(keyHashSlot('{user1000}.following')).toBe(keyHashSlot('user1000'));
    expect(keyHashSlot('foo{bar}{zap}')).toBe(keyHashSlot('bar'));
    // Empty tag: the whole key is hashed.
    expect(keyHashSlot('foo{}{bar}')).toBe(crc16(Buffer.from('foo{}{bar}')) % SLOT_COUNT);
    // The tag ends at the first '}' after the first '{'.
    expect(keyHashSlot('foo{{bar}}zap')).toBe(keyHashSlot('{bar'));
    // No closing brace: whole key.
    expect(keyHashSlot('foo{bar')).toBe(crc16(Buffer.from('foo{bar')) % SLOT_COUNT);
  });

  it('property: a key with tag t lands in the slot of t, and every slot is in range', () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1 }).filter((t) => !t.includes('}') && !t.includes('{')),
        fc.string(),
        fc.string().filter((p) => !p.includes('{')),
        (tag, suffix, prefix) => {
          const slot = keyHashSlot(`${prefix}{${tag}}${suffix}`);
          expect(slot).toBe(keyHashSlot(tag));
          expect(slot).toBeGreaterThanOrEqual(0);
          expect(slot).toBeLessThan(SLOT_COUNT);
        },
      ),
    );
  });

  it('string and byte keys agree (UTF-8)', () => {
    fc.assert(fc.property(fc.string(), (k) => keyHashSlot(k) === keyHashSlot(Buffer.from(k, 'utf8'))));
  });
});
