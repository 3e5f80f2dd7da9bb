// Small, stable 32-bit hashes for model states (the cache only needs them to spread buckets).

/** FNV-1a over a string's UTF-16 code units. */
export function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Hash of a primitive value; distinct types hash apart (1 and "1" are different states). */
export function hashPrimitive(v: string | number | boolean | bigint | null): number {
  return hashString(`${v === null ? 'null' : typeof v}:${String(v)}`);
}
