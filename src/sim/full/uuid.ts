import type { Prng } from '../prng.js';

/** A version-4 UUID drawn from a seeded stream (the simulator's stand-in for `crypto.randomUUID`). */
export function uuidOf(rng: Prng): string {
  const b = Buffer.alloc(16);
  for (let i = 0; i < 16; i += 4) b.writeUInt32BE(rng.nextU32(), i);
  b[6] = ((b[6] as number) & 0x0f) | 0x40;
  b[8] = ((b[8] as number) & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
