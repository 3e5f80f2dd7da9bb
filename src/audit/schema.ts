/**
 * The audit table, portable to ClickHouse 18.16 (Debian's) and modern ClickHouse (24.x+):
 * no DateTime64 (a DateTime plus a UInt64 epoch-ms column), no LowCardinality, no TTL, no query
 * parameters (identifiers are checked, values escaped by `sqlString`). ReplacingMergeTree ordered by
 * `event_id`, so a replayed or retried row collapses into one at merge time; counting queries use
 * `count(DISTINCT event_id)` or `FINAL` (exact before merges too).
 */

export const DEFAULT_AUDIT_TABLE = 'floe_audit_events';

const IDENT = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/** Check a database/table name (we never quote arbitrary identifiers). */
export function checkIdentifier(what: string, name: string): string {
  if (!IDENT.test(name))
    throw new Error(
      `${what} must match ${IDENT.source} (letters, digits, underscore), got ${JSON.stringify(name)}`,
    );
  return name;
}

/** A ClickHouse string literal: single-quoted, backslash and quote escaped. */
export function sqlString(s: string): string {
  return `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

export interface ServerVersion {
  text: string;
  major: number;
  minor: number;
}

export function parseVersion(text: string): ServerVersion {
  const m = /^(\d+)\.(\d+)/.exec(text.trim());
  if (!m) throw new Error(`unrecognised ClickHouse version ${JSON.stringify(text)}`);
  return { text: text.trim(), major: Number(m[1]), minor: Number(m[2]) };
}

/** `insert_deduplication_token` (and dedup on a non-replicated MergeTree) exist from 22.2 on; not on 18.16. */
export function supportsDedupToken(v: ServerVersion): boolean {
  return v.major > 22 || (v.major === 22 && v.minor >= 2);
}

export const AUDIT_COLUMNS = [
  ['event_id', 'String'],
  ['type', 'String'],
  ['ts', 'DateTime'],
  ['ts_ms', 'UInt64'],
  ['app', 'String'],
  ['key', 'String'],
  ['node_id', 'String'],
  ['worker_id', 'Int32'],
  ['token', 'UInt64'],
  ['segment_start', 'UInt64'],
  ['segment_end', 'UInt64'],
  ['first_id', 'UInt64'],
  ['last_id', 'UInt64'],
  ['id_count', 'UInt64'],
  ['from_ms', 'UInt64'],
  ['to_ms', 'UInt64'],
  ['raft_index', 'UInt64'],
  ['raft_sub', 'UInt32'],
  ['detail', 'String'],
] as const;

/** The statements `floe audit init` runs, for this server version. */
export function schemaStatements(database: string, table: string, v: ServerVersion): string[] {
  const db = checkIdentifier('database', database);
  const t = checkIdentifier('table', table);
  const cols = AUDIT_COLUMNS.map(([n, ty]) => `  \`${n}\` ${ty}`).join(',\n');
  // With a dedup window, a retried batch carrying the same insert_deduplication_token is dropped at
  // insert time (modern servers); ReplacingMergeTree + count DISTINCT/FINAL covers every version.
  const settings = supportsDedupToken(v) ? '\nSETTINGS non_replicated_deduplication_window = 10000' : '';
  return [
    `CREATE DATABASE IF NOT EXISTS \`${db}\``,
    `CREATE TABLE IF NOT EXISTS \`${db}\`.\`${t}\` (\n${cols}\n) ENGINE = ReplacingMergeTree()\nPARTITION BY toYYYYMM(ts)\nORDER BY event_id${settings}`,
  ];
}
