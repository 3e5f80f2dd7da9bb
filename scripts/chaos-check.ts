/**
 * The chaos run's checker: reads every client process's `ids-*.bin`, `bursts-*.bin` and `leases-*.jsonl` (see
 * chaos-client.ts) and the driver's `kills.jsonl`, and counts violations of what Floe promises (all must be 0):
 *
 * - duplicates: equal IDs among everything generated (one BigInt64Array of all IDs, sorted);
 * - overlappingHolders: two leases of one worker ID whose use intervals overlap. A lease's interval runs from its
 *   first use (read before its first `next()`) to its last use: the time recorded with the last burst of its IDs
 *   on disk. A lease with IDs but no burst time (none should exist) ends at its process's kill time, or at the end
 *   of the run. Times are CLOCK_MONOTONIC ms, one clock for every process on the machine, whatever wall clock a
 *   client believes;
 * - tokenRegressions: for one worker ID, a lease used later carrying a token not above the earlier one's;
 * - highWaterViolations: an ID whose timestamp is at or below its lease's high-water mark at grant time, or above
 *   the ceiling the lease allowed (when its end was recorded), or whose worker field is not the lease's worker ID;
 * - timestampReuse: a later holder of a worker ID issuing a timestamp at or below one an earlier holder issued;
 * - recordErrors: records that contradict each other (a last use after the process was killed).
 *
 * Killed leases (no `end` line) take part in every check: their IDs are on disk up to the burst in flight.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CHAOS_LAYOUTS, type ChaosLayoutName } from './chaos-layouts.js';

export interface LeaseRecord {
  client: string;
  workerId: number;
  token: number;
  highWaterMs: number;
  layout: ChaosLayoutName;
  idStart: number;
  idEnd: number | undefined;
  startMono: number;
  endMono: number | undefined;
  /** How endMono was found: the end line, the last burst of a killed lease, the kill time, or the run's end. */
  endFrom: 'end' | 'burst' | 'kill' | 'run-end' | undefined;
  ceilingMs: number | undefined;
  ended: string | undefined;
}

export interface CheckResult {
  ids: number;
  duplicates: number;
  overlappingHolders: number;
  tokenRegressions: number;
  highWaterViolations: number;
  timestampReuse: number;
  recordErrors: number;
  leases: number;
  lostLeases: number;
  /** Leases whose process was killed before it recorded their end; their IDs and last burst are checked. */
  killedLeases: number;
  reusedWorkerIds: number;
  examples: string[];
}

/** (ID count so far, last-use time) per burst, in file order; a torn last record is left out. */
function readBursts(path: string): Float64Array {
  if (!existsSync(path)) return new Float64Array(0);
  const raw = readFileSync(path);
  const n = Math.floor(raw.byteLength / 16) * 2;
  return new Float64Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + n * 8));
}

/** The last-use time of the IDs in [start, end): the time of the last burst ending after `start`, up to `end`. */
function lastBurstTime(bursts: Float64Array, start: number, end: number): number | undefined {
  let t: number | undefined;
  for (let i = 0; i < bursts.length; i += 2) {
    const count = bursts[i] as number;
    const prev = i >= 2 ? (bursts[i - 2] as number) : 0;
    if (prev >= end) break;
    if (count > start) t = bursts[i + 1] as number;
  }
  return t;
}

export function checkChaosRun(dir: string, runEndMono = Number.POSITIVE_INFINITY): CheckResult {
  const files = readdirSync(dir);
  const clients = files.filter((f) => f.startsWith('ids-') && f.endsWith('.bin')).map((f) => f.slice(4, -4));
  const kills = new Map<string, number>();
  if (existsSync(join(dir, 'kills.jsonl'))) {
    for (const line of readFileSync(join(dir, 'kills.jsonl'), 'utf8').split('\n')) {
      if (!line.trim()) continue;
      const k = JSON.parse(line) as { client: string; mono: number };
      kills.set(k.client, k.mono);
    }
  }
  const perClient = new Map<string, BigInt64Array>();
  const burstsOf = new Map<string, Float64Array>();
  let total = 0;
  for (const c of clients) {
    const raw = readFileSync(join(dir, `ids-${c}.bin`));
    const n = Math.floor(raw.byteLength / 8);
    const ids = new BigInt64Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + n * 8));
    perClient.set(c, ids);
    burstsOf.set(c, readBursts(join(dir, `bursts-${c}.bin`)));
    total += n;
  }
  const examples: string[] = [];
  const note = (s: string) => {
    if (examples.length < 20) examples.push(s);
  };
  let recordErrors = 0;

  const leases: LeaseRecord[] = [];
  for (const c of clients) {
    let text = '';
    try {
      text = readFileSync(join(dir, `leases-${c}.jsonl`), 'utf8');
    } catch {
      continue;
    }
    const open = new Map<number, LeaseRecord>();
    for (const line of text.split('\n')) {
      if (!line.trim()) continue;
      let r: Record<string, unknown>;
      try {
        r = JSON.parse(line) as Record<string, unknown>;
      } catch {
        continue; // a torn last line of a killed client
      }
      if (r.type === 'begin') {
        const rec: LeaseRecord = {
          client: c,
          workerId: r.workerId as number,
          token: r.token as number,
          highWaterMs: r.highWaterMs as number,
          layout: (r.layout as ChaosLayoutName | undefined) ?? 'floe',
          idStart: r.idStart as number,
          idEnd: undefined,
          startMono: r.startMono as number,
          endMono: undefined,
          endFrom: undefined,
          ceilingMs: undefined,
          ended: undefined,
        };
        open.set(rec.idStart, rec);
        leases.push(rec);
      } else if (r.type === 'end') {
        const rec = open.get(r.idStart as number);
        if (!rec) continue;
        rec.idEnd = r.idEnd as number;
        rec.endMono = r.endMono as number;
        rec.endFrom = 'end';
        rec.ceilingMs = r.ceilingMs as number;
        rec.ended = r.ended as string;
      }
    }
    // A lease without an end line (its process was killed) owns the IDs up to the next lease's start (or the end of
    // the file), and ends at the last burst of those IDs; with none, at the kill (or the run's end).
    const own = leases.filter((l) => l.client === c).sort((a, b) => a.idStart - b.idStart);
    const fileLen = perClient.get(c)?.length ?? 0;
    const bursts = burstsOf.get(c) ?? new Float64Array(0);
    const killedAt = kills.get(c);
    own.forEach((l, i) => {
      if (l.idEnd === undefined) l.idEnd = own[i + 1]?.idStart ?? fileLen;
      l.idEnd = Math.min(l.idEnd, fileLen);
      if (l.endMono !== undefined) return;
      const t = l.idEnd > l.idStart ? lastBurstTime(bursts, l.idStart, l.idEnd) : undefined;
      if (t !== undefined) {
        l.endMono = t;
        l.endFrom = 'burst';
      } else if (killedAt !== undefined) {
        l.endMono = killedAt;
        l.endFrom = 'kill';
      } else {
        l.endMono = runEndMono;
        l.endFrom = 'run-end';
      }
      if (killedAt !== undefined && l.endMono > killedAt) {
        recordErrors++;
        note(`lease ${c}/w${l.workerId}/t${l.token}: last use ${l.endMono} after the kill at ${killedAt}`);
      }
    });
  }

  // Per-lease ID checks: worker field, (high-water, ceiling] and the per-lease timestamp range.
  let highWaterViolations = 0;
  const tsRange = new Map<LeaseRecord, { min: number; max: number }>();
  for (const l of leases) {
    const ids = perClient.get(l.client);
    if (!ids) continue;
    const L = CHAOS_LAYOUTS[l.layout];
    const tsShift = L.timestampShift;
    const workerShift = L.workerShift;
    const words = new Uint32Array(ids.buffer, ids.byteOffset, ids.length * 2);
    let min = Number.POSITIVE_INFINITY;
    let max = Number.NEGATIVE_INFINITY;
    const end = Math.min(l.idEnd ?? ids.length, ids.length);
    for (let i = l.idStart; i < end; i++) {
      const lo = words[2 * i] as number;
      const hi = words[2 * i + 1] as number;
      // timestampShift is 22 for both chaos layouts: tick = hi * 2^10 + (lo >>> 22).
      const tick = hi * 2 ** (32 - tsShift) + (lo >>> tsShift);
      const ts = L.epochMs + tick * L.unitMs;
      const worker = (lo >>> workerShift) & L.maxWorker;
      if (ts < min) min = ts;
      if (ts > max) max = ts;
      const bad =
        worker !== l.workerId || ts <= l.highWaterMs || (l.ceilingMs !== undefined && ts > l.ceilingMs);
      if (bad) {
        highWaterViolations++;
        note(
          `lease ${l.client}/w${l.workerId}/t${l.token}: id ${ids[i]} ts ${ts} worker ${worker} (high-water ${l.highWaterMs}, ceiling ${l.ceilingMs})`,
        );
      }
    }
    if (end > l.idStart) tsRange.set(l, { min, max });
  }

  // Per worker ID: intervals, tokens, timestamp spaces.
  let overlappingHolders = 0;
  let tokenRegressions = 0;
  let timestampReuse = 0;
  let reusedWorkerIds = 0;
  const byWorker = new Map<number, LeaseRecord[]>();
  for (const l of leases) {
    if (!tsRange.has(l)) continue; // generated nothing
    const list = byWorker.get(l.workerId) ?? [];
    list.push(l);
    byWorker.set(l.workerId, list);
  }
  for (const [w, list] of byWorker) {
    list.sort((a, b) => a.startMono - b.startMono);
    if (new Set(list.map((l) => l.client)).size > 1) reusedWorkerIds++;
    for (let i = 0; i < list.length; i++) {
      const a = list[i] as LeaseRecord;
      for (let j = i + 1; j < list.length; j++) {
        const b = list[j] as LeaseRecord;
        if (a.token === b.token && a.client === b.client) continue;
        if (b.token <= a.token) {
          tokenRegressions++;
          note(`worker ${w}: ${b.client} token ${b.token} used after ${a.client} token ${a.token}`);
        }
        if (a.endMono !== undefined && b.startMono <= a.endMono) {
          overlappingHolders++;
          note(
            `worker ${w}: ${a.client}/t${a.token} used until ${a.endMono.toFixed(3)} ms (${a.endFrom}), ${b.client}/t${b.token} from ${b.startMono.toFixed(3)} ms`,
          );
        }
        const ra = tsRange.get(a);
        const rb = tsRange.get(b);
        if (ra && rb && b.token > a.token && rb.min <= ra.max) {
          timestampReuse++;
          note(`worker ${w}: t${b.token} issued ts ${rb.min} <= ${ra.max} issued under t${a.token}`);
        }
      }
    }
  }

  // Duplicates over everything.
  const all = new BigInt64Array(total);
  let off = 0;
  for (const ids of perClient.values()) {
    all.set(ids, off);
    off += ids.length;
  }
  all.sort();
  let duplicates = 0;
  for (let i = 1; i < all.length; i++) {
    if (all[i] === all[i - 1]) {
      duplicates++;
      note(`duplicate id ${all[i]}`);
    }
  }

  return {
    ids: total,
    duplicates,
    overlappingHolders,
    tokenRegressions,
    highWaterViolations,
    timestampReuse,
    recordErrors,
    leases: leases.length,
    lostLeases: leases.filter((l) => l.ended?.startsWith('lost')).length,
    killedLeases: leases.filter((l) => l.endFrom !== 'end').length,
    reusedWorkerIds,
    examples,
  };
}

/** The sum of every violation count (the run passes only at 0). */
export function violationsOf(r: CheckResult): number {
  return (
    r.duplicates +
    r.overlappingHolders +
    r.tokenRegressions +
    r.highWaterViolations +
    r.timestampReuse +
    r.recordErrors
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const dir = process.argv[2];
  if (!dir) {
    console.error('usage: tsx scripts/chaos-check.ts <run directory>');
    process.exit(2);
  }
  const r = checkChaosRun(dir);
  console.log(JSON.stringify(r));
  process.exit(violationsOf(r) > 0 ? 1 : 0);
}
