/**
 * A reply as a value, independent of the protocol version: the encoder (`encode.ts`) writes it as RESP2 or RESP3.
 * Handlers build replies with the `R` helpers below and never think about wire bytes; where RESP2 has no type
 * for a RESP3 one, the encoder uses what Redis itself sends to a RESP2 client (map → flat array, set → array,
 * boolean → 0/1, double → bulk string, null → `$-1`/`*-1`, verbatim → bulk, push → array).
 */
export type Reply =
  | { readonly kind: 'simple'; readonly value: string }
  /** `value` is the whole error line without the leading `-`, e.g. `ERR syntax error` or `MOVED 1 h:p`. */
  | { readonly kind: 'error'; readonly value: string }
  | { readonly kind: 'integer'; readonly value: number | bigint }
  | { readonly kind: 'bulk'; readonly value: string | Uint8Array }
  /** RESP3 `=` (e.g. INFO's text); a plain bulk string in RESP2. */
  | { readonly kind: 'verbatim'; readonly format: string; readonly value: string }
  /** Null bulk string: RESP2 `$-1`, RESP3 `_`. */
  | { readonly kind: 'null' }
  /** Null array: RESP2 `*-1`, RESP3 `_`. */
  | { readonly kind: 'nullArray' }
  | { readonly kind: 'array'; readonly items: readonly Reply[] }
  | { readonly kind: 'set'; readonly items: readonly Reply[] }
  /** Out-of-band message (pub/sub): RESP3 `>`, an array in RESP2. */
  | { readonly kind: 'push'; readonly items: readonly Reply[] }
  /** RESP3 `%`; a flat `[k1, v1, k2, v2, ...]` array in RESP2. */
  | { readonly kind: 'map'; readonly entries: readonly (readonly [Reply, Reply])[] }
  | { readonly kind: 'bool'; readonly value: boolean }
  | { readonly kind: 'double'; readonly value: number }
  /**
   * A number inside a field/value record: a bulk string in RESP2 (as HGETALL values are), an integer in RESP3
   * (so typed clients get numbers). Use it through `R.record`.
   */
  | { readonly kind: 'fieldNumber'; readonly value: number | bigint }
  /** Several replies written back to back (SUBSCRIBE answers once per channel). */
  | { readonly kind: 'multi'; readonly items: readonly Reply[] }
  /** Pre-encoded bytes for hot constant replies (`+PONG`, `+OK`). */
  | { readonly kind: 'raw'; readonly resp2: Buffer; readonly resp3: Buffer };

/** A field value in a record: strings and buffers are bulk strings, numbers follow `fieldNumber`. */
export type FieldValue = string | Uint8Array | number | bigint | Reply | null | undefined;

function raw(both: string): Reply {
  const b = Buffer.from(both, 'latin1');
  return { kind: 'raw', resp2: b, resp3: b };
}

function isReply(v: FieldValue): v is Reply {
  return typeof v === 'object' && v !== null && !(v instanceof Uint8Array) && 'kind' in v;
}

/** Reply constructors. */
export const R = {
  OK: raw('+OK\r\n'),
  PONG: raw('+PONG\r\n'),
  NULL: { kind: 'null' } as Reply,
  NULL_ARRAY: { kind: 'nullArray' } as Reply,
  EMPTY_ARRAY: { kind: 'array', items: [] } as Reply,
  simple: (value: string): Reply => ({ kind: 'simple', value }),
  error: (value: string): Reply => ({ kind: 'error', value }),
  int: (value: number | bigint): Reply => ({ kind: 'integer', value }),
  bulk: (value: string | Uint8Array): Reply => ({ kind: 'bulk', value }),
  verbatim: (value: string, format = 'txt'): Reply => ({ kind: 'verbatim', format, value }),
  array: (items: readonly Reply[]): Reply => ({ kind: 'array', items }),
  set: (items: readonly Reply[]): Reply => ({ kind: 'set', items }),
  push: (items: readonly Reply[]): Reply => ({ kind: 'push', items }),
  multi: (items: readonly Reply[]): Reply => ({ kind: 'multi', items }),
  bool: (value: boolean): Reply => ({ kind: 'bool', value }),
  double: (value: number): Reply => ({ kind: 'double', value }),
  /** An array of bulk strings. */
  bulks: (items: readonly (string | Uint8Array)[]): Reply => ({
    kind: 'array',
    items: items.map((v) => ({ kind: 'bulk', value: v })),
  }),
  map: (entries: readonly (readonly [Reply, Reply])[]): Reply => ({ kind: 'map', entries }),
  /**
   * A field/value record (keys are bulk strings): a flat list in RESP2 like HGETALL, a map in RESP3.
   * Numbers become `fieldNumber` (bulk in RESP2, integer in RESP3); `undefined` fields are left out;
   * `null` is a null bulk string.
   */
  record: (fields: Iterable<readonly [string, FieldValue]>): Reply => {
    const entries: [Reply, Reply][] = [];
    for (const [k, v] of fields) {
      if (v === undefined) continue;
      entries.push([{ kind: 'bulk', value: k }, fieldValue(v)]);
    }
    return { kind: 'map', entries };
  },
  /** Like `record`, but every value is a bulk string in both protocols (what Redis Sentinel sends). */
  stringRecord: (fields: Iterable<readonly [string, string | number]>): Reply => {
    const entries: [Reply, Reply][] = [];
    for (const [k, v] of fields)
      entries.push([
        { kind: 'bulk', value: k },
        { kind: 'bulk', value: String(v) },
      ]);
    return { kind: 'map', entries };
  },
};

function fieldValue(v: Exclude<FieldValue, undefined>): Reply {
  if (v === null) return R.NULL;
  if (typeof v === 'number' || typeof v === 'bigint') return { kind: 'fieldNumber', value: v };
  if (typeof v === 'string' || v instanceof Uint8Array) return { kind: 'bulk', value: v };
  if (isReply(v)) return v;
  return R.NULL;
}
