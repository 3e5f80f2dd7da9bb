import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Members of the cluster call each other's HTTP API as themselves (a node's own lease client for
 * server-side Snowflake): `x-floe-member: <nodeId>.<unix ms>.<hex HMAC-SHA256>` of
 * (nodeId, time, method, path) under the cluster secret. Accepted within MEMBER_CLOCK_SKEW_MS of the
 * receiver's clock. A member may acquire, renew, release and read leases of any app; nothing else.
 * As with Basic auth on plain HTTP, someone who can read the traffic can replay a request (here
 * for a minute, to the same path): use TLS between hosts.
 */
export const MEMBER_HEADER = 'x-floe-member';
export const MEMBER_CLOCK_SKEW_MS = 60_000;

function mac(secret: string, nodeId: number, ts: number, method: string, path: string): string {
  return createHmac('sha256', secret)
    .update(`floe-member\n${nodeId}\n${ts}\n${method.toUpperCase()}\n${path}`)
    .digest('hex');
}

export function memberHeader(
  secret: string,
  nodeId: number,
  method: string,
  path: string,
  nowMs = Date.now(),
): string {
  return `${nodeId}.${nowMs}.${mac(secret, nodeId, nowMs, method, path)}`;
}

/** The member id the header proves, or undefined. `path` is the request's path without the query. */
export function verifyMemberHeader(
  secret: string,
  header: string,
  method: string,
  path: string,
  nowMs = Date.now(),
): number | undefined {
  const m = /^(\d{1,10})\.(\d{1,16})\.([0-9a-f]{64})$/.exec(header);
  if (!m) return undefined;
  const nodeId = Number(m[1]);
  const ts = Number(m[2]);
  if (Math.abs(nowMs - ts) > MEMBER_CLOCK_SKEW_MS) return undefined;
  return safeEqual(m[3]!, mac(secret, nodeId, ts, method, path)) ? nodeId : undefined;
}

/**
 * A member's proof that it names `uid` as the cluster's UUID: HMAC-SHA256 of (nodeId, uid) under the cluster secret.
 * A leader that knows no UUID adopts a member's only with it, so an address that reaches another cluster's node (a
 * reused IP, a typo) cannot hand this cluster that cluster's UUID (review 2 of the cluster identity, finding 1).
 */
export function clusterUidProof(secret: string, nodeId: number, uid: string): string {
  return createHmac('sha256', secret).update(`floe-cluster-uid\n${nodeId}\n${uid}`).digest('hex');
}

export function verifyClusterUidProof(secret: string, nodeId: number, uid: string, proof: unknown): boolean {
  return typeof proof === 'string' && safeEqual(proof, clusterUidProof(secret, nodeId, uid));
}

/** Compares a presented proof with the expected one in constant time (for equal lengths). */
export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
