/**
 * "Who issued this ID?" beyond the replicated state (issue 12): the lease state keeps each worker ID's last holder
 * only; the audit trail keeps every lease's end (`lease_released` / `lease_expired`, with the worker's high-water mark
 * then). Marks never go down and each lease issues timestamps only in (its floor, its final mark], with its floor at or
 * above the previous lease's final mark; so the lease that issued timestamp T is the first one (in mark order, then
 * time) whose final mark is at or above T.
 */
import type { ClickHouseAuditSink } from './clickhouse-sink.js';
import { sqlString } from './schema.js';

export interface AuditedHolder {
  app: string;
  workerId: number;
  nodeId: string;
  token: string;
  /** When the lease was granted (leader time), if its grant is in the trail. */
  grantedAtMs: number | undefined;
  /** When it ended (leader time) and how. */
  endedAtMs: number;
  ended: 'released' | 'expired';
  /** The worker's high-water mark when it ended: every timestamp the lease used is at or below it. */
  highWaterMs: number;
}

export async function earlierHolderFromAudit(
  sink: ClickHouseAuditSink,
  app: string,
  workerId: number,
  timestampMs: number,
): Promise<AuditedHolder | undefined> {
  if (!Number.isSafeInteger(workerId) || workerId < 0) throw new RangeError(`workerId ${workerId}`);
  if (!Number.isSafeInteger(timestampMs) || timestampMs < 0)
    throw new RangeError(`timestampMs ${timestampMs}`);
  const t = sink.qualifiedTable;
  const hw = `visitParamExtractUInt(detail, 'highWaterMs')`;
  const ends = await sink.query<{ node_id: string; token: string; ts_ms: string; type: string; hw: string }>(
    `SELECT node_id, toString(token) AS token, toString(ts_ms) AS ts_ms, type, toString(${hw}) AS hw
     FROM ${t} FINAL
     WHERE app = ${sqlString(app)} AND worker_id = ${workerId}
       AND type IN ('lease_released', 'lease_expired') AND ${hw} >= ${timestampMs}
     ORDER BY ${hw} ASC, ts_ms ASC LIMIT 1`,
  );
  const e = ends[0];
  if (!e) return undefined;
  const grants = await sink.query<{ ts_ms: string }>(
    `SELECT toString(ts_ms) AS ts_ms FROM ${t} FINAL
     WHERE app = ${sqlString(app)} AND worker_id = ${workerId} AND type = 'lease_acquired'
       AND token = ${BigInt(e.token).toString()} LIMIT 1`,
  );
  return {
    app,
    workerId,
    nodeId: e.node_id,
    token: e.token,
    grantedAtMs: grants[0] ? Number(grants[0].ts_ms) : undefined,
    endedAtMs: Number(e.ts_ms),
    ended: e.type === 'lease_released' ? 'released' : 'expired',
    highWaterMs: Number(e.hw),
  };
}
