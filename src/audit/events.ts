/**
 * Audit events (issue 12, "Audit trail"): what Floe records, and how each event becomes one row of
 * the `floe_audit_events` table (src/audit/schema.ts).
 *
 * Every event has a stable `event_id` (a string, so 64-bit values never pass through a float):
 * - cluster events (anything applied from the Raft log) carry the log index and a sub-index for the
 *   n-th event one entry produced: `r/<cluster>/<index>/<sub>`. A new leader that re-emits an event
 *   the old leader already wrote produces the same id, and the ReplacingMergeTree keeps one row;
 * - other events derive their id from what identifies them (e.g. an SDK summary from its
 *   app, worker, token, first and last ID), so a replayed or retried batch dedups the same way.
 */

export type LeaseEventType = 'lease_acquired' | 'lease_renewed' | 'lease_released' | 'lease_expired';
export type AuditEventType = LeaseEventType | 'segment_allocated' | 'ids_range' | 'sdk_issued' | 'id_issued';

export const AUDIT_EVENT_TYPES: readonly AuditEventType[] = [
  'lease_acquired',
  'lease_renewed',
  'lease_released',
  'lease_expired',
  'segment_allocated',
  'ids_range',
  'sdk_issued',
  'id_issued',
];

/** A 64-bit unsigned value: a safe integer number, a bigint, or a decimal string. */
export type U64 = number | bigint | string;

interface EventBase {
  /** When it happened (Unix ms). `emit` fills it with Date.now() when absent. */
  tsMs?: number;
  /** Raft log index of the entry that produced it (cluster events): the event id is derived from it. */
  raftIndex?: U64;
  /** The n-th event produced by that one entry (default 0). */
  raftSub?: number;
  /** Cluster name in the event id, so several clusters can share a table (default ''). */
  cluster?: string;
  /** An explicit event id (overrides the derived one). */
  eventId?: string;
  /** Free-form extra data, stored as JSON in the `detail` column. */
  detail?: Record<string, unknown>;
}

/** A worker-ID lease changed hands or was extended: who (holder), which worker ID, which token. */
export interface LeaseAuditEvent extends EventBase {
  type: LeaseEventType;
  app: string;
  workerId: number;
  /** The holder's node id (who held or holds the lease). */
  holder: string;
  /** Fencing token of the lease. */
  token: U64;
  /** The lease's deadline after this event (Unix ms), when known. */
  expiresAtMs?: number;
}

/** A segment [start, end) of a sequence/standalone key was allocated to a node. */
export interface SegmentAuditEvent extends EventBase {
  type: 'segment_allocated';
  key: string;
  node: string;
  start: U64;
  /** Exclusive. */
  end: U64;
}

/** Standalone IDs handed out by a node from one segment: [first, last], count values. */
export interface IdRangeAuditEvent extends EventBase {
  type: 'ids_range';
  key: string;
  node: string;
  /** The segment's start (identifies the segment). */
  segment: U64;
  first: U64;
  last: U64;
  count: U64;
}

/** SDK issuance summary over an interval: worker, token, first and last ID, how many. */
export interface SdkIssuedAuditEvent extends EventBase {
  type: 'sdk_issued';
  app?: string;
  /** Business type (strategies' bizType), when the summary is per type. */
  bizType?: string;
  holder?: string;
  /** The leased worker ID (absent only when the recorder did not know it: stored as -1). */
  worker?: number;
  token: U64;
  first: U64;
  last: U64;
  count: U64;
  fromMs?: number;
  toMs?: number;
}

/** One ID (opt-in per-ID rows). */
export interface IdIssuedAuditEvent extends EventBase {
  type: 'id_issued';
  id: U64;
  /** Business type or standalone key. */
  key?: string;
  app?: string;
  node?: string;
  worker?: number;
  token?: U64;
}

export type AuditEvent =
  | LeaseAuditEvent
  | SegmentAuditEvent
  | IdRangeAuditEvent
  | SdkIssuedAuditEvent
  | IdIssuedAuditEvent;

/** One row of `floe_audit_events`, as sent in JSONEachRow (UInt64 as decimal strings). */
export interface AuditRow {
  event_id: string;
  type: string;
  /** DateTime as Unix seconds (18.16 reads no ISO strings with milliseconds). */
  ts: number;
  ts_ms: string;
  app: string;
  key: string;
  node_id: string;
  worker_id: number;
  token: string;
  segment_start: string;
  segment_end: string;
  first_id: string;
  last_id: string;
  id_count: string;
  from_ms: string;
  to_ms: string;
  raft_index: string;
  raft_sub: number;
  detail: string;
}

/** An event that cannot become a row: names the event type and the field. */
export class AuditEventError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
    this.name = 'AuditEventError';
  }
}

const U64_MAX = (1n << 64n) - 1n;

function u64(type: string, field: string, v: unknown): string {
  // Fast paths (no BigInt): a non-negative safe integer, a short decimal string.
  if (typeof v === 'number' && v >= 0 && Number.isSafeInteger(v)) return String(v);
  if (typeof v === 'string' && v.length < 20 && /^[0-9]+$/.test(v))
    return v.length > 1 && v[0] === '0' ? String(BigInt(v)) : v;
  let b: bigint;
  if (typeof v === 'bigint') b = v;
  else if (typeof v === 'number' && Number.isSafeInteger(v)) b = BigInt(v);
  else if (typeof v === 'string' && /^[0-9]{1,20}$/.test(v)) b = BigInt(v);
  else
    throw new AuditEventError(
      field,
      `audit event ${type}: ${field} must be an unsigned 64-bit integer (safe number, bigint or decimal string), got ${typeof v === 'string' ? JSON.stringify(v) : String(v)}`,
    );
  if (b < 0n || b > U64_MAX)
    throw new AuditEventError(field, `audit event ${type}: ${field} out of the UInt64 range: ${b}`);
  return b.toString();
}

function optU64(type: string, field: string, v: unknown): string {
  return v === undefined || v === null ? '0' : u64(type, field, v);
}

function str(type: string, field: string, v: unknown, required: boolean): string {
  if (v === undefined || v === null) {
    if (required) throw new AuditEventError(field, `audit event ${type}: ${field} is required`);
    return '';
  }
  if (typeof v !== 'string')
    throw new AuditEventError(field, `audit event ${type}: ${field} must be a string`);
  return v;
}

function workerId(type: string, v: unknown, required: boolean): number {
  if (v === undefined || v === null) {
    if (required) throw new AuditEventError('workerId', `audit event ${type}: workerId is required`);
    return -1;
  }
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 2 ** 31 - 1)
    throw new AuditEventError('workerId', `audit event ${type}: worker id must be an integer >= 0, got ${v}`);
  return v;
}

const part = (s: string) => encodeURIComponent(s);

/** The event's stable id (see the file header). Throws AuditEventError on a malformed event. */
export function auditEventId(e: AuditEvent): string {
  if (e.eventId !== undefined) {
    if (typeof e.eventId !== 'string' || e.eventId === '')
      throw new AuditEventError('eventId', `audit event ${e.type}: eventId must be a non-empty string`);
    return e.eventId;
  }
  if (e.raftIndex !== undefined) {
    const sub = e.raftSub ?? 0;
    if (!Number.isInteger(sub) || sub < 0 || sub > 0xffffffff)
      throw new AuditEventError('raftSub', `audit event ${e.type}: raftSub must be an integer in [0, 2^32)`);
    return `r/${part(e.cluster ?? '')}/${u64(e.type, 'raftIndex', e.raftIndex)}/${sub}`;
  }
  switch (e.type) {
    case 'lease_acquired':
    case 'lease_renewed':
    case 'lease_released':
    case 'lease_expired':
      return `l/${e.type}/${part(e.app)}/${e.workerId}/${u64(e.type, 'token', e.token)}/${e.tsMs ?? 0}`;
    case 'segment_allocated':
      return `s/${part(e.key)}/${part(e.node)}/${u64(e.type, 'start', e.start)}`;
    case 'ids_range':
      return `i/${part(e.key)}/${part(e.node)}/${u64(e.type, 'segment', e.segment)}/${u64(e.type, 'first', e.first)}`;
    case 'sdk_issued':
      return `k/${part(e.app ?? '')}/${part(e.bizType ?? '')}/${e.worker ?? -1}/${u64(e.type, 'token', e.token)}/${u64(e.type, 'first', e.first)}/${u64(e.type, 'last', e.last)}`;
    case 'id_issued':
      return `d/${part(e.key ?? '')}/${u64(e.type, 'id', e.id)}`;
    default:
      throw new AuditEventError(
        'type',
        `audit event: unknown type ${JSON.stringify((e as { type: unknown }).type)}`,
      );
  }
}

function msField(type: string, field: string, v: unknown): string {
  if (v === undefined || v === null) return '0';
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
    throw new AuditEventError(
      field,
      `audit event ${type}: ${field} must be Unix milliseconds, got ${String(v)}`,
    );
  return String(v);
}

/** The row for an event. Throws AuditEventError (naming the field) on a malformed event. */
export function auditEventToRow(e: AuditEvent): AuditRow {
  if (typeof e !== 'object' || e === null)
    throw new AuditEventError('event', 'audit event must be an object');
  const t = e.type;
  if (!AUDIT_EVENT_TYPES.includes(t))
    throw new AuditEventError('type', `audit event: unknown type ${JSON.stringify(t)}`);
  const tsMs = e.tsMs ?? Date.now();
  if (!Number.isSafeInteger(tsMs) || tsMs < 0)
    throw new AuditEventError('tsMs', `audit event ${t}: tsMs must be Unix milliseconds, got ${tsMs}`);
  const row: AuditRow = {
    event_id: '',
    type: t,
    ts: Math.floor(tsMs / 1000),
    ts_ms: String(tsMs),
    app: '',
    key: '',
    node_id: '',
    worker_id: -1,
    token: '0',
    segment_start: '0',
    segment_end: '0',
    first_id: '0',
    last_id: '0',
    id_count: '0',
    from_ms: '0',
    to_ms: '0',
    raft_index: e.raftIndex === undefined ? '0' : u64(t, 'raftIndex', e.raftIndex),
    raft_sub: e.raftSub ?? 0,
    detail: e.detail === undefined ? '' : JSON.stringify(e.detail),
  };
  switch (e.type) {
    case 'lease_acquired':
    case 'lease_renewed':
    case 'lease_released':
    case 'lease_expired':
      row.app = str(t, 'app', e.app, true);
      row.node_id = str(t, 'holder', e.holder, true);
      row.worker_id = workerId(t, e.workerId, true);
      row.token = u64(t, 'token', e.token);
      row.to_ms = msField(t, 'expiresAtMs', e.expiresAtMs);
      break;
    case 'segment_allocated':
      row.key = str(t, 'key', e.key, true);
      row.node_id = str(t, 'node', e.node, true);
      row.segment_start = u64(t, 'start', e.start);
      row.segment_end = u64(t, 'end', e.end);
      if (BigInt(row.segment_end) < BigInt(row.segment_start))
        throw new AuditEventError(
          'end',
          `audit event ${t}: end (${row.segment_end}) < start (${row.segment_start})`,
        );
      break;
    case 'ids_range':
      row.key = str(t, 'key', e.key, true);
      row.node_id = str(t, 'node', e.node, true);
      row.segment_start = u64(t, 'segment', e.segment);
      row.first_id = u64(t, 'first', e.first);
      row.last_id = u64(t, 'last', e.last);
      row.id_count = u64(t, 'count', e.count);
      break;
    case 'sdk_issued':
      row.app = str(t, 'app', e.app, false);
      row.key = str(t, 'bizType', e.bizType, false);
      row.node_id = str(t, 'holder', e.holder, false);
      row.worker_id = workerId(t, e.worker, false);
      row.token = u64(t, 'token', e.token);
      row.first_id = u64(t, 'first', e.first);
      row.last_id = u64(t, 'last', e.last);
      row.id_count = u64(t, 'count', e.count);
      row.from_ms = msField(t, 'fromMs', e.fromMs);
      row.to_ms = msField(t, 'toMs', e.toMs);
      break;
    case 'id_issued':
      row.key = str(t, 'key', e.key, false);
      row.app = str(t, 'app', e.app, false);
      row.node_id = str(t, 'node', e.node, false);
      row.worker_id = workerId(t, e.worker, false);
      row.token = optU64(t, 'token', e.token);
      row.first_id = row.last_id = u64(t, 'id', e.id);
      row.id_count = '1';
      break;
  }
  row.event_id = auditEventId({ ...e, tsMs } as AuditEvent);
  return row;
}

/**
 * Maps the strategies' audit plugin record (`{type:'issued', bizType, first, last, count, fromMs,
 * toMs, ...source()}` where source() gives e.g. `{app, workerId, token, holder}`) to an SDK
 * issuance event. With per-ID records (first === last, count 1) it is still a summary of one.
 */
export function pluginRecordToEvent(r: Record<string, unknown>): SdkIssuedAuditEvent {
  if (r.type !== 'issued')
    throw new AuditEventError('type', `audit plugin record: expected type "issued", got ${String(r.type)}`);
  const worker = r.workerId ?? r.worker;
  return {
    type: 'sdk_issued',
    app: typeof r.app === 'string' ? r.app : undefined,
    bizType: typeof r.bizType === 'string' ? r.bizType : undefined,
    holder: typeof r.holder === 'string' ? r.holder : typeof r.nodeId === 'string' ? r.nodeId : undefined,
    worker: typeof worker === 'number' ? worker : undefined,
    token: (r.token ?? 0) as U64,
    first: r.first as U64,
    last: r.last as U64,
    count: r.count as U64,
    fromMs: typeof r.fromMs === 'number' ? r.fromMs : undefined,
    toMs: typeof r.toMs === 'number' ? r.toMs : undefined,
    tsMs: typeof r.toMs === 'number' ? r.toMs : undefined,
  };
}
