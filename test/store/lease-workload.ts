import { randomUUID } from 'node:crypto';

/**
 * Lease holders over HTTP, the way the SDK holds a lease (deadline from the send time of the last
 * acknowledged call, minus a margin), recording every grant; and a checker over the record.
 * One process, one monotonic clock: intervals of different holders compare exactly.
 */
export interface Grant {
  holder: string;
  workerId: number;
  token: number;
  /** The worker's floor at grant (the holder issues only timestamps above it). */
  floorMs: number;
  /** Highest bound the holder was acknowledged (its IDs stay at or below it). */
  maxBoundMs: number;
  sendAt: number;
  respAt: number;
  /** When the holder stopped using it (release sent, refusal seen, or its deadline). */
  endAt: number;
}

export interface WorkloadResult {
  grants: Grant[];
  ops: number;
  errors: Map<string, number>;
}

const now = () => performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function post(
  endpoints: () => string[],
  path: string,
  body: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const eps = endpoints();
  let lastErr: unknown;
  for (let i = 0; i < eps.length; i++) {
    const ep = eps[(Math.floor(Math.random() * eps.length) + i) % eps.length]!;
    try {
      const res = await fetch(`http://${ep}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(4000),
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    } catch (err) {
      lastErr = err;
    }
  }
  throw lastErr ?? new Error('no Floe node running');
}

/** Runs `holders` holders on `app` until `durationMs` has passed. */
export async function runHolders(opts: {
  endpoints: () => string[];
  app: string;
  holders: number;
  durationMs: number;
  ttlMs: number;
  renewEveryMs?: number;
}): Promise<WorkloadResult> {
  const grants: Grant[] = [];
  const errors = new Map<string, number>();
  let ops = 0;
  const endAt = now() + opts.durationMs;
  const margin = 500;
  const err = (k: string) => errors.set(k, (errors.get(k) ?? 0) + 1);
  const holder = async (name: string) => {
    const incarnation = randomUUID();
    let held: (Grant & { deadline: number }) | undefined;
    let requestId = randomUUID();
    while (now() < endAt) {
      if (!held) {
        const sendAt = now();
        const bound = Date.now() + 1000;
        try {
          const r = await post(opts.endpoints, `/v1/apps/${opts.app}/workers/acquire`, {
            nodeId: name,
            ttlMs: opts.ttlMs,
            requestId,
            incarnation,
            boundMs: bound,
          });
          ops++;
          if (r.status === 200) {
            const g = r.json as { workerId: number; token: number; highWaterMs: number };
            held = {
              holder: name,
              workerId: g.workerId,
              token: g.token,
              floorMs: g.highWaterMs,
              maxBoundMs: bound,
              sendAt,
              respAt: now(),
              endAt: 0,
              deadline: sendAt + opts.ttlMs - margin,
            };
            requestId = randomUUID();
          } else {
            err(`acquire ${r.status} ${String(r.json.error)}`);
            await sleep(200);
          }
        } catch (e) {
          err(`acquire ${(e as Error).message}`);
          await sleep(200);
        }
        continue;
      }
      await sleep(opts.renewEveryMs ?? 300);
      if (now() >= held.deadline) {
        held.endAt = held.deadline;
        grants.push(held);
        held = undefined;
        err('abandoned at deadline');
        continue;
      }
      if (Math.random() < 0.05) {
        // Stop using it, then release.
        held.endAt = now();
        grants.push(held);
        const h = held;
        held = undefined;
        try {
          await post(opts.endpoints, `/v1/apps/${opts.app}/workers/${h.workerId}/release`, {
            token: h.token,
            lastTimestampMs: h.maxBoundMs,
          });
          ops++;
        } catch (e) {
          err(`release ${(e as Error).message}`);
        }
        continue;
      }
      const sendAt = now();
      const bound = Date.now() + 1000;
      try {
        const r = await post(opts.endpoints, `/v1/apps/${opts.app}/workers/${held.workerId}/renew`, {
          token: held.token,
          boundMs: bound,
        });
        ops++;
        if (r.status === 200) {
          held.deadline = Math.max(held.deadline, sendAt + opts.ttlMs - margin);
          held.maxBoundMs = Math.max(held.maxBoundMs, bound);
        } else if (r.status === 409 || r.status === 410) {
          held.endAt = Math.min(now(), held.deadline);
          grants.push(held);
          held = undefined;
          err(`renew ${r.status} ${String(r.json.error)}`);
        } else err(`renew ${r.status} ${String(r.json.error)}`);
      } catch (e) {
        err(`renew ${(e as Error).message}`);
      }
    }
    if (held) {
      held.endAt = Math.min(now(), held.deadline);
      grants.push(held);
    }
  };
  await Promise.all(Array.from({ length: opts.holders }, (_, i) => holder(`h${i}`)));
  return { grants, ops, errors };
}

/** Double holders, tokens out of order, floors below an earlier holder's bound. Empty = fine. */
export function checkGrants(grants: Grant[]): string[] {
  const problems: string[] = [];
  const byWorker = new Map<number, Grant[]>();
  for (const g of grants) {
    const l = byWorker.get(g.workerId) ?? [];
    l.push(g);
    byWorker.set(g.workerId, l);
  }
  for (const [w, list] of byWorker) {
    list.sort((a, b) => a.respAt - b.respAt);
    for (let i = 0; i < list.length; i++) {
      for (let j = i + 1; j < list.length; j++) {
        const a = list[i]!;
        const b = list[j]!;
        if (a.token === b.token) {
          problems.push(`worker ${w}: token ${a.token} granted twice (${a.holder}, ${b.holder})`);
          continue;
        }
        if (a.respAt < b.sendAt && a.token > b.token)
          problems.push(`worker ${w}: token ${b.token} granted after token ${a.token}`);
        if (a.endAt > b.respAt)
          problems.push(
            `worker ${w}: ${a.holder} (token ${a.token}) held it until ${a.endAt.toFixed(0)} but ${b.holder} (token ${b.token}) got it at ${b.respAt.toFixed(0)}`,
          );
        if (a.endAt <= b.respAt && b.floorMs < a.maxBoundMs)
          problems.push(
            `worker ${w}: floor ${b.floorMs} of token ${b.token} is below bound ${a.maxBoundMs} of token ${a.token}`,
          );
      }
    }
  }
  return problems;
}
