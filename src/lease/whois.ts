import { decode, type Layout } from '../id/index.js';
import type { LeaseStateMachine } from '../state/leases/index.js';

/** What the cluster knows about who issued an ID, per app whose pool has its worker ID. */
export interface WhoisCandidate {
  app: string;
  workerId: number;
  /**
   * holder: the current or last holder of the worker ID issued it (its IDs lie in (floor, bound]);
   * earlier: an earlier holder did (the state keeps the last one; the audit trail has the rest);
   * never: no holder may have issued it (the worker ID was never leased, or the timestamp is above
   * every bound the cluster granted for it).
   */
  verdict: 'holder' | 'earlier' | 'never';
  reason: string;
  holder?: {
    nodeId: string;
    token: number;
    live: boolean;
    grantedAtMs: number;
    /** The holder's IDs have timestamps in (floorMs, boundMs]. */
    floorMs: number;
    boundMs: number;
  };
}

export interface WhoisAnswer {
  id: string;
  layout: string;
  timestampMs: number;
  time: string;
  datacenter: number;
  worker: number;
  sequence: number;
  candidates: WhoisCandidate[];
  /** A plain sentence: the best answer. */
  summary: string;
}

/**
 * "Who issued this ID?" from the replicated lease state (docs/whois.md). The ID is decoded with
 * `layout`; the worker ID in a pool is (datacenter << workerBits) | worker. Every app whose pool is
 * large enough is a candidate (or only `app`). Decided by timestamps: a holder issues only
 * timestamps above the high-water mark at its grant (floor) and at most its promised bound.
 */
export function whois(
  state: LeaseStateMachine,
  id: bigint,
  layout: Layout,
  app?: string,
  nowMs = Date.now(),
): WhoisAnswer {
  const parts = decode(id, layout);
  const ts = parts.timestamp;
  const poolWorker = parts.datacenter * 2 ** layout.workerBits + parts.worker;
  const apps = app !== undefined ? [app] : state.poolList().map((p) => p.app);
  const candidates: WhoisCandidate[] = [];
  for (const a of apps) {
    const pool = state.pool(a);
    if (!pool) {
      if (app !== undefined)
        candidates.push({
          app: a,
          workerId: poolWorker,
          verdict: 'never',
          reason: `app ${a} has no worker-ID pool`,
        });
      continue;
    }
    if (poolWorker >= pool.size) {
      if (app !== undefined)
        candidates.push({
          app: a,
          workerId: poolWorker,
          verdict: 'never',
          reason: `worker ID ${poolWorker} is outside app ${a}'s pool of ${pool.size}`,
        });
      continue;
    }
    const w = state.worker(a, poolWorker);
    if (!w) {
      candidates.push({
        app: a,
        workerId: poolWorker,
        verdict: 'never',
        reason: `worker ID ${poolWorker} of app ${a} was never leased`,
      });
      continue;
    }
    const holder = {
      nodeId: w.nodeId,
      token: w.token,
      live: w.live,
      grantedAtMs: w.grantedAtMs,
      floorMs: w.floorMs,
      boundMs: w.highWaterMs,
    };
    if (ts > w.highWaterMs)
      candidates.push({
        app: a,
        workerId: poolWorker,
        verdict: 'never',
        reason: `timestamp ${ts} is above every bound the cluster granted for worker ID ${poolWorker} (${w.highWaterMs})${
          ts > nowMs ? ', and in the future' : ''
        }`,
      });
    else if (ts > w.floorMs)
      candidates.push({
        app: a,
        workerId: poolWorker,
        verdict: 'holder',
        reason: `issued by ${w.live ? 'the current' : 'the last'} holder of worker ID ${poolWorker} (token ${w.token})`,
        holder,
      });
    else
      candidates.push({
        app: a,
        workerId: poolWorker,
        verdict: 'earlier',
        reason: `issued by a holder before token ${w.token} (timestamps up to ${w.floorMs}); the audit trail has it`,
      });
  }
  const best =
    candidates.find((c) => c.verdict === 'holder') ?? candidates.find((c) => c.verdict === 'earlier');
  const summary = best
    ? `${best.app}: ${best.reason}${best.holder ? `: ${best.holder.nodeId || '(an instance since moved on)'}` : ''}`
    : candidates.length === 0
      ? `no app's pool has worker ID ${poolWorker}: Floe could not have issued ${id}`
      : `Floe could not have issued ${id}: ${candidates.map((c) => c.reason).join('; ')}`;
  return {
    id: String(id),
    layout: layout.name,
    timestampMs: ts,
    time: parts.time.toISOString(),
    datacenter: parts.datacenter,
    worker: parts.worker,
    sequence: parts.sequence,
    candidates,
    summary,
  };
}
