// What a raw RESP lease holder checks in WORKER.ACQUIRE / WORKER.RENEW replies, and how it counts its deadline: pure
// functions, used by the simulator's RESP lease clients (resp-lease-workload.ts) and tested on their own.
//
// A lease record is a flat field/value list in RESP2 (bulk strings, numbers as decimal strings, like HGETALL):
// worker_id, datacenter_id, token, expires_at_ms, high_water_ms, ttl_ms, app, node_id, then extras (local_worker_id,
// bound_ms, pool_bits; an acquire adds request_id, incarnation and layout, a renew adds logged). A reply that does not
// parse as one, or does not answer its own request, is never used (docs/leases.md, "Holding a lease without the SDK").

import type { RespValue } from './resp-client.js';

/** The fields of a RESP2 lease record, or undefined when the reply is not a record of bulk strings. */
export function recordOf(v: RespValue): Map<string, string> | undefined {
  if (v.type !== 'array' || v.value === null || v.value.length % 2 !== 0) return undefined;
  const m = new Map<string, string>();
  for (let i = 0; i < v.value.length; i += 2) {
    const k = v.value[i];
    const x = v.value[i + 1];
    if (k?.type !== 'bulk' || k.value === null || x?.type !== 'bulk' || x.value === null) return undefined;
    if (m.has(k.value)) return undefined;
    m.set(k.value, x.value);
  }
  return m;
}

/** A non-negative decimal integer field (a safe integer), else undefined. */
function intField(r: Map<string, string>, k: string): number | undefined {
  const s = r.get(k);
  if (s === undefined || !/^\d+$/.test(s)) return undefined;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : undefined;
}

/** A lease as the holder uses it, taken from a checked acquire reply. */
export interface HeldGrant {
  workerId: number;
  datacenterId: number;
  localWorkerId: number;
  token: number;
  /** IDs must have timestamps strictly above it. */
  floorMs: number;
  /** The committed bound: no timestamp above it before a renewal commits a higher one. */
  boundMs: number;
  ttlMs: number;
}

export interface AcquireAsked {
  app: string;
  nodeId: string;
  requestId: string;
  incarnation: string;
  ttlMs: number;
  /** The layout fingerprint sent as LAYOUT. */
  layout: string;
  /** The BOUND sent. */
  boundMs: number;
}

/** The grant an acquire reply carries, or why it does not answer `asked` (a string: never used). */
export function checkAcquireReply(asked: AcquireAsked, r: Map<string, string>): HeldGrant | string {
  const echo: Array<[string, string]> = [
    ['app', asked.app],
    ['node_id', asked.nodeId],
    ['request_id', asked.requestId],
    ['incarnation', asked.incarnation],
    ['ttl_ms', String(asked.ttlMs)],
    // The app's pinned layout: ours, since we named one (another would mean IDs of two layouts on one worker ID).
    ['layout', asked.layout],
  ];
  for (const [k, want] of echo) {
    if (r.get(k) !== want)
      return `${k} is ${JSON.stringify(r.get(k))}, the request's is ${JSON.stringify(want)}`;
  }
  const g = numbers(r);
  if (typeof g === 'string') return g;
  if (g.token <= 0) return `token ${g.token} is not a grant's log index`;
  // bound_ms is what the grant committed (the BOUND asked, or the mark if that was higher): the holder's ceiling.
  return g;
}

export interface RenewAsked {
  app: string;
  workerId: number;
  token: number;
  ttlMs: number;
  /** The BOUND sent, if any. */
  boundMs?: number;
}

/** The committed bound a renew reply carries, or why it does not answer `asked`. */
export function checkRenewReply(asked: RenewAsked, r: Map<string, string>): { boundMs: number } | string {
  const echo: Array<[string, string]> = [
    ['app', asked.app],
    ['worker_id', String(asked.workerId)],
    ['token', String(asked.token)],
    ['ttl_ms', String(asked.ttlMs)],
  ];
  for (const [k, want] of echo) {
    if (r.get(k) !== want)
      return `${k} is ${JSON.stringify(r.get(k))}, the request's is ${JSON.stringify(want)}`;
  }
  const bound = intField(r, 'bound_ms');
  if (bound === undefined) return `bound_ms ${JSON.stringify(r.get('bound_ms'))} is not a number`;
  if (asked.boundMs !== undefined && bound < asked.boundMs)
    return `bound_ms ${bound} is below the BOUND ${asked.boundMs} the renewal asked to commit`;
  return { boundMs: bound };
}

function numbers(r: Map<string, string>): HeldGrant | string {
  const out: Record<string, number> = {};
  for (const [k, f] of [
    ['workerId', 'worker_id'],
    ['datacenterId', 'datacenter_id'],
    ['localWorkerId', 'local_worker_id'],
    ['token', 'token'],
    ['floorMs', 'high_water_ms'],
    ['boundMs', 'bound_ms'],
    ['ttlMs', 'ttl_ms'],
  ] as const) {
    const n = intField(r, f);
    if (n === undefined) return `${f} ${JSON.stringify(r.get(f))} is not a number`;
    out[k] = n;
  }
  return out as unknown as HeldGrant;
}

/**
 * The safety margin a raw holder keeps before sent + TTL: the SDK's default (TTL/10 + 100 ms), which covers a clock
 * rate gap of up to 10% between holder and leader (docs/decisions/0002-lease-safety.md) plus scheduling slack.
 */
export function safetyMarginMs(ttlMs: number): number {
  return Math.floor(ttlMs / 10) + 100;
}

/**
 * The holder's deadlines after an acquire or renewal sent at (`sentMono`, `sentWall`) was acknowledged: TTL minus the
 * margin from the send (never from the answer), on the monotonic clock and on the wall clock (a suspended machine's
 * monotonic clock stops; its wall clock does not), never earlier than the deadlines it already had.
 */
export function deadlinesAfterAck(
  prev: { mono: number; wall: number } | undefined,
  sentMono: number,
  sentWall: number,
  ttlMs: number,
): { mono: number; wall: number } {
  const m = safetyMarginMs(ttlMs);
  return {
    mono: Math.max(prev?.mono ?? Number.NEGATIVE_INFINITY, sentMono + ttlMs - m),
    wall: Math.max(prev?.wall ?? Number.NEGATIVE_INFINITY, sentWall + ttlMs - m),
  };
}

/**
 * Whether an ID may be issued at (`mono`, `wall`): both deadlines ahead by more than `spanMs`, the longest the ID
 * core's fast path goes on after a check (one tick).
 */
export function mayIssue(
  d: { mono: number; wall: number },
  mono: number,
  wall: number,
  spanMs: number,
): boolean {
  return mono < d.mono - spanMs && wall < d.wall - spanMs;
}

/** The renewal's BOUND: a new window when the committed bound is within half a window of the clock, else none. */
export function renewBound(committedBoundMs: number, wallMs: number, windowMs: number): number | undefined {
  return committedBoundMs - wallMs < windowMs / 2 ? Math.ceil(wallMs + windowMs) : undefined;
}
