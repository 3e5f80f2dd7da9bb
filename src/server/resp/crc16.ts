/**
 * Redis Cluster's key → slot mapping: CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0, no reflection,
 * no final XOR) of the key, modulo 16384. When the key contains a non-empty `{...}` hash tag, only the part
 * between the first `{` and the first `}` after it is hashed, so `{app}.a` and `{app}.b` share a slot.
 */

/** Number of hash slots in a Redis cluster. */
export const SLOT_COUNT = 16384;

const TABLE = buildTable();

function buildTable(): Uint16Array {
  const table = new Uint16Array(256);
  for (let byte = 0; byte < 256; byte++) {
    let crc = byte << 8;
    for (let bit = 0; bit < 8; bit++)
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[byte] = crc;
  }
  return table;
}

/** CRC16-XMODEM of `bytes[start, end)`. `crc16(Buffer.from('123456789')) === 0x31c3`. */
export function crc16(bytes: Uint8Array, start = 0, end = bytes.length): number {
  let crc = 0;
  for (let i = start; i < end; i++) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >>> 8) ^ bytes[i]!) & 0xff]!;
  return crc;
}

/** The cluster slot of a key (0..16383), honouring `{hash tags}` exactly as Redis does. */
export function keyHashSlot(key: Uint8Array | string): number {
  const bytes = typeof key === 'string' ? Buffer.from(key, 'utf8') : key;
  const open = bytes.indexOf(0x7b); // '{'
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1); // '}'
    // An empty tag ("{}") or no closing brace: hash the whole key.
    if (close !== -1 && close !== open + 1) return crc16(bytes, open + 1, close) & (SLOT_COUNT - 1);
  }
  return crc16(bytes) & (SLOT_COUNT - 1);
}
