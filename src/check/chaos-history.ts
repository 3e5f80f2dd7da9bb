/**
 * The chaos run's records and their checker (`npm run chaos`, scripts/chaos*.ts, docs/chaos.md). Pure: the records
 * arrive as bytes and text, are parsed here (a kill -9 may have torn the tail of any file: a torn record or line is
 * dropped), and the checker counts violations of Floe's promises over them.
 *
 * Every time is CLOCK_MONOTONIC in ms, read by the client processes and by the driver: one clock for every process
 * on the machine, whatever wall clock a client was made to believe (its skew is applied to the SDK's wall clock
 * only). So times from different processes compare directly.
 *
 * Per client process `<name>`:
 * - `ids-<name>.bin`: every ID it generated, BigInt64 little-endian, in the order `next()` returned them, written at
 *   the end of every burst (before the next one starts);
 * - `marks-<name>.bin`: Float64 records of MARK_FIELDS numbers `[kind, lease, count, t, x, w]` (see Mark), bracketing
 *   every burst of `next()` calls, so that each recorded ID has a known real-time interval in which it was issued;
 * - `leases-<name>.jsonl`: a `process` line, then a `begin` line per lease (before its first burst) and an `end`
 *   line when it ended without a kill.
 * The driver's `events.jsonl`: every client process's start, SIGSTOP/SIGCONT pause and exit (with whether the
 * driver killed it), in the driver's CLOCK_MONOTONIC readings.
 */
import { defineLayout, type LayoutSpec } from '../id/index.js';

// ---- record formats ------------------------------------------------------------------------

export const MARK_FIELDS = 6;
export const MARK_BYTES = MARK_FIELDS * 8;
export const MARK_KIND = { begin: 1, gap: 2, end: 3 } as const;

/**
 * One burst mark, as the client wrote it (`count` is the number of IDs the process had issued so far, all leases):
 * - `begin` `[1, lease, count, t, 0]`: written before the burst's first `next()`; `t` read before that call. Every
 *   `next()` call of a process is inside a burst, so no ID is issued without a begin mark on disk before it.
 * - `gap` `[2, lease, count, tBefore, tAfter]`: more than the client's gap threshold passed between two returns
 *   inside a burst (a SIGSTOP, a wait inside `next()`, the scheduler): the first `count` IDs had returned by
 *   `tBefore` (or the burst began then), ID number `count + 1` returned at `tAfter`. That one ID was issued somewhere
 *   in (tBefore, tAfter].
 * - `end` `[3, lease, count, t, ceilingMs]`: the burst is over; `t` read right after its last ID returned (the
 *   begin's `t` when it issued none); `ceilingMs` the lease's ceiling read after the burst (ceilings only rise, so
 *   it bounds every ID of the burst). Written after the burst's IDs, so an end mark on disk means its IDs are too.
 * Each record also carries `w`, the time it was written (see Mark.w).
 */
export interface Mark {
  kind: 'begin' | 'gap' | 'end';
  lease: number;
  count: number;
  t: number;
  x: number;
  /** When the mark was written (default `t`): for an end mark, after the burst's last `next()` call returned or
   * threw, so a burst with `t0 < stop` and `w > cont` was in flight across that pause. */
  w?: number;
}

/** The `begin` line of a lease, written after `leaseWorker()` returned and before the lease's first burst. */
export interface LeaseBeginLine {
  type: 'begin';
  /** Number of the lease within its process (0, 1, ...); marks name it. */
  lease: number;
  app: string;
  workerId: number;
  datacenterId: number;
  localWorkerId: number;
  token: number;
  /** The lease's floor (`lease.floorMs`): every ID's timestamp must be above it. */
  floorMs: number;
  /** `lease.resumedFromCache`: the lease continues a cached one (same token) without a new grant. */
  resumed: boolean;
  layout: LayoutSpec;
  /** The lease's TTL: a pause at least this long outlasts its deadline, whenever it was last renewed. */
  ttlMs?: number;
  /** IDs the process had issued before this lease. */
  idStart: number;
  /** CLOCK_MONOTONIC right after `leaseWorker()` returned: the grant happened before it. */
  acquiredMono: number;
  /** `lease.snowflake()` calls made for this lease, how many distinct generators they gave, and whether a call with
   * another layout was given a generator instead of refused (the SDK's rule: one generator per lease). */
  generatorsAsked: number;
  distinctGenerators: number;
  otherLayoutGiven: boolean;
}

/** The `end` line of a lease that ended while its process ran (released, lost, stopping). */
export interface LeaseEndLine {
  type: 'end';
  lease: number;
  idEnd: number;
  ceilingMs: number;
  ended: string;
}

/** Driver events (events.jsonl). `mono`, `stop`, `cont`: the driver's CLOCK_MONOTONIC. */
export type DriverEvent =
  | { type: 'start'; process: string; mono: number }
  | { type: 'pause'; process: string; stop: number; cont: number }
  | {
      type: 'exit';
      process: string;
      /** Read in the driver's `exit` handler: after the process died, so no ID of it is issued later. */
      mono: number;
      code: number | null;
      signal: string | null;
      /** `kill` (kill -9 by the driver), `term` (a graceful stop it asked for) or null (the process ended itself). */
      byDriver: 'kill' | 'term' | null;
    };

/** One client process's records, parsed. */
export interface ProcessHistory {
  name: string;
  ids: BigInt64Array;
  marks: Mark[];
  begins: LeaseBeginLine[];
  ends: LeaseEndLine[];
  /** Undefined when the driver recorded no exit (the checker then uses the history's `endMono`). */
  exit?: Extract<DriverEvent, { type: 'exit' }>;
  pauses: Array<{ stop: number; cont: number }>;
}

export interface ChaosHistory {
  processes: ProcessHistory[];
  /** When the records were read: the end of anything still unknown. */
  endMono: number;
}

/** The IDs of an `ids-*.bin` file; a torn last ID is dropped. */
export function parseIds(bytes: Uint8Array): BigInt64Array {
  const n = Math.floor(bytes.byteLength / 8);
  // Copy: the buffer may be shared or unaligned (Buffer pools).
  return new BigInt64Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + n * 8));
}

/** The marks of a `marks-*.bin` file; a torn last record is dropped. */
export function parseMarks(bytes: Uint8Array): Mark[] {
  const n = Math.floor(bytes.byteLength / MARK_BYTES);
  const f = new Float64Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + n * MARK_BYTES));
  const out: Mark[] = [];
  for (let i = 0; i < n; i++) {
    const o = i * MARK_FIELDS;
    const k = f[o];
    const kind =
      k === MARK_KIND.begin ? 'begin' : k === MARK_KIND.gap ? 'gap' : k === MARK_KIND.end ? 'end' : undefined;
    if (kind === undefined) throw new Error(`mark ${i}: unknown kind ${k}`);
    out.push({
      kind,
      lease: f[o + 1] as number,
      count: f[o + 2] as number,
      t: f[o + 3] as number,
      x: f[o + 4] as number,
      w: f[o + 5] as number,
    });
  }
  return out;
}

/** Encodes marks as `marks-*.bin` bytes (the client's writer and tests share it). */
export function encodeMarks(marks: readonly Mark[]): Uint8Array {
  const f = new Float64Array(marks.length * MARK_FIELDS);
  marks.forEach((m, i) => {
    f.set([MARK_KIND[m.kind], m.lease, m.count, m.t, m.x, m.w ?? m.t], i * MARK_FIELDS);
  });
  return new Uint8Array(f.buffer);
}

/** The JSON objects of a JSON-lines file; a torn (unparseable) line is dropped, which only a kill can leave. */
export function parseJsonLines(text: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // torn by a kill -9
    }
  }
  return out;
}

/** One process's history from its three files' contents and the driver's events. */
export function processHistory(
  name: string,
  files: { ids: Uint8Array; marks: Uint8Array; leases: string },
  events: readonly DriverEvent[],
): ProcessHistory {
  const lines = parseJsonLines(files.leases);
  const mine = events.filter((e) => e.process === name);
  return {
    name,
    ids: parseIds(files.ids),
    marks: parseMarks(files.marks),
    begins: lines.filter((l) => l.type === 'begin') as unknown as LeaseBeginLine[],
    ends: lines.filter((l) => l.type === 'end') as unknown as LeaseEndLine[],
    exit: mine.find((e): e is Extract<DriverEvent, { type: 'exit' }> => e.type === 'exit'),
    pauses: mine.flatMap((e) => (e.type === 'pause' ? [{ stop: e.stop, cont: e.cont }] : [])),
  };
}

// ---- the checker ---------------------------------------------------------------------------

export interface ChaosCheckResult {
  ids: number;
  processes: number;
  leases: number;
  // Violations (each must be 0):
  /** Equal IDs among everything recorded. */
  duplicates: number;
  /** A lease of a worker ID that issued IDs after a later lease of that worker ID was granted (P1). */
  overlappingHolders: number;
  /** A later lease of a worker ID with a token not above an earlier one's (equal only for a resumed cached lease). */
  tokenRegressions: number;
  /** An ID whose timestamp is at or below its lease's floor, above the ceiling the lease had, or whose worker or
   * datacenter field is not the lease's. */
  highWaterViolations: number;
  /** A lease with a higher token issuing a timestamp at or below one a lower-token lease of the worker ID issued
   * (P2), or granted a floor below it. */
  timestampReuse: number;
  /** IDs of one lease not strictly increasing (one lease, one generator). */
  nonIncreasing: number;
  /** A lease whose `lease.snowflake()` calls gave more than one generator, or a generator for another layout. */
  generatorContract: number;
  /** A client process that exited by itself with an error (an exception nobody expected). */
  clientFailures: number;
  /**
   * A lease that issued IDs after a SIGSTOP of its process at least its TTL long, beyond the one ID that may have
   * been checked before the stop and returned after it: its deadline had passed, so the generator must have thrown
   * at its next check, successor or none. Counted per (pause, lease).
   */
  issuedAfterPause: number;
  /** Records contradicting each other or the client's protocol. */
  recordErrors: number;
  // Coverage:
  lostLeases: number;
  resumedLeases: number;
  /** Leases whose process was killed before it wrote their end line. Each is in every check. */
  killedLeases: number;
  /** Of those, leases with a burst in flight at the kill: they end at the driver's kill time, not at a burst. */
  endedAtKill: number;
  /** Worker IDs (per app) issued under by more than one process. */
  reusedWorkerIds: number;
  /** Consecutive leases of one worker ID held by different processes. */
  handOvers: number;
  /**
   * Leases whose overlap is made of exactly one ID: a lease's last ID returned after a later lease was granted, every earlier ID
   * before, with a gap before that one return (docs/decisions/0002, "the window of one ID": a process paused between
   * the deadline check and the return). Not violations; its timestamp is still checked (P2).
   */
  oneIdWindows: number;
  /** Of those, the ones whose gap contains a SIGSTOP the driver recorded for that process. */
  oneIdWindowsInPause: number;
  /** Pauses of at least the TTL that stopped a lease's burst in flight (its end mark written after the SIGCONT). */
  pausesInBurst: number;
  examples: string[];
}

/** The sum of the violation counts (the run passes only at 0). */
export function chaosViolations(r: ChaosCheckResult): number {
  return (
    r.duplicates +
    r.overlappingHolders +
    r.tokenRegressions +
    r.highWaterViolations +
    r.timestampReuse +
    r.nonIncreasing +
    r.generatorContract +
    r.clientFailures +
    r.issuedAfterPause +
    r.recordErrors
  );
}

interface Burst {
  count0: number;
  t0: number;
  gaps: Mark[];
  /** Undefined: in flight when the process died. */
  end: Mark | undefined;
}

interface LeaseView {
  process: ProcessHistory;
  begin: LeaseBeginLine;
  end: LeaseEndLine | undefined;
  idStart: number;
  idEnd: number;
  bursts: Burst[];
  /** The last moment the lease may have issued an ID; undefined when it issued none. */
  lastUse: number | undefined;
  lastUseFrom: 'burst' | 'kill' | 'exit' | 'unknown' | undefined;
  /** The lease's last ID alone after a gap: every other ID returned by `before`, that one in (before, after]. */
  window: { before: number; after: number } | undefined;
  minTs: number;
  maxTs: number;
}

const label = (l: LeaseView) => `${l.process.name}#${l.begin.lease}(w${l.begin.workerId}/t${l.begin.token})`;
const ms = (t: number) => `${t.toFixed(3)} ms`;

export function checkChaosHistory(h: ChaosHistory): ChaosCheckResult {
  const examples: string[] = [];
  const note = (s: string) => {
    if (examples.length < 30) examples.push(s);
  };
  let recordErrors = 0;
  const recordError = (s: string) => {
    recordErrors++;
    note(`record: ${s}`);
  };
  let clientFailures = 0;
  const leases: LeaseView[] = [];

  for (const p of h.processes) {
    if (p.exit && p.exit.byDriver === null && (p.exit.code !== 0 || p.exit.signal !== null)) {
      clientFailures++;
      note(`process ${p.name} exited by itself: code ${p.exit.code}, signal ${p.exit.signal}`);
    }
    const own = [...p.begins].sort((a, b) => a.lease - b.lease);
    const views = new Map<number, LeaseView>();
    own.forEach((b, i) => {
      const end = p.ends.find((e) => e.lease === b.lease);
      const next = own[i + 1];
      let idEnd = end?.idEnd ?? next?.idStart ?? p.ids.length;
      if (next !== undefined && idEnd > next.idStart) {
        recordError(
          `${p.name}: lease ${b.lease} ends at ID ${idEnd}, after lease ${next.lease} began at ${next.idStart}`,
        );
        idEnd = next.idStart;
      }
      idEnd = Math.min(idEnd, p.ids.length);
      views.set(b.lease, {
        process: p,
        begin: b,
        end,
        idStart: b.idStart,
        idEnd: Math.max(idEnd, b.idStart),
        bursts: [],
        lastUse: undefined,
        lastUseFrom: undefined,
        window: undefined,
        minTs: Number.POSITIVE_INFINITY,
        maxTs: Number.NEGATIVE_INFINITY,
      });
    });

    // Bursts: begin (gap)* end, one at a time; only the process's very last one may be open (in flight at its death).
    // Each begins where the previous ended (no ID issued outside a burst), and its IDs are on disk once it ended.
    let open: { view: LeaseView; burst: Burst } | undefined;
    let issued = 0;
    p.marks.forEach((m, i) => {
      const view = views.get(m.lease);
      if (!view) {
        recordError(`${p.name}: mark ${i} names lease ${m.lease}, which has no begin line`);
        return;
      }
      if (m.kind === 'begin') {
        if (open) recordError(`${p.name}: burst begun at mark ${i} while another was open`);
        if (m.count !== issued)
          recordError(`${p.name}: burst at mark ${i} begins at ID ${m.count}, not ${issued}`);
        const burst: Burst = { count0: m.count, t0: m.t, gaps: [], end: undefined };
        view.bursts.push(burst);
        open = { view, burst };
      } else if (!open || open.view !== view) {
        recordError(`${p.name}: ${m.kind} mark ${i} outside a burst of lease ${m.lease}`);
      } else if (m.kind === 'gap') {
        open.burst.gaps.push(m);
      } else {
        open.burst.end = m;
        open = undefined;
        issued = m.count;
        if (m.count > p.ids.length)
          recordError(`${p.name}: burst ended at ID ${m.count}, only ${p.ids.length} on disk`);
      }
    });

    for (const view of views.values()) {
      const { bursts } = view;
      const last = bursts.at(-1);
      const inFlight = last !== undefined && last.end === undefined;
      const closed = bursts.filter((b) => b.end !== undefined);
      const issuing = closed.filter((b) => (b.end as Mark).count > b.count0);
      const recordedTo = closed.at(-1)?.end?.count ?? view.idStart;
      if (view.idEnd > recordedTo && !inFlight) {
        recordError(`${label(view)}: IDs ${recordedTo}..${view.idEnd} on disk outside any burst`);
      }
      if (inFlight) {
        // A burst in flight when the process died: its IDs (on disk or lost) were issued up to the process's death.
        if (view.end !== undefined) recordError(`${label(view)}: an end line, but a burst still open`);
        if (p.exit !== undefined && p.exit.byDriver !== 'kill')
          recordError(`${label(view)}: a burst in flight, but the process was not killed`);
        if (p.exit !== undefined) {
          view.lastUse = p.exit.mono;
          view.lastUseFrom = p.exit.byDriver === 'kill' ? 'kill' : 'exit';
        } else {
          view.lastUse = h.endMono;
          view.lastUseFrom = 'unknown';
          recordError(`${label(view)}: a burst in flight and no recorded exit`);
        }
      } else if (issuing.length > 0) {
        const b = issuing.at(-1) as Burst;
        const end = b.end as Mark;
        view.lastUse = end.t;
        view.lastUseFrom = 'burst';
        const g = b.gaps.at(-1);
        if (g !== undefined && g.count + 1 === end.count) view.window = { before: g.t, after: g.x };
      }
      if (view.end !== undefined && view.end.idEnd !== recordedTo) {
        recordError(
          `${label(view)}: end line at ID ${view.end.idEnd}, its last burst ended at ${recordedTo}`,
        );
      }
      if (p.exit !== undefined && view.lastUse !== undefined && view.lastUse > p.exit.mono) {
        recordError(
          `${label(view)}: last use ${ms(view.lastUse)} after its process exited at ${ms(p.exit.mono)}`,
        );
      }
      leases.push(view);
    }
  }

  // Per-lease ID checks: worker and datacenter fields, (floor, ceiling], strictly increasing; the timestamp range.
  let highWaterViolations = 0;
  let nonIncreasing = 0;
  let generatorContract = 0;
  for (const l of leases) {
    const b = l.begin;
    if (b.distinctGenerators > 1 || b.otherLayoutGiven) {
      generatorContract++;
      note(
        `${label(l)}: ${b.generatorsAsked} snowflake() calls gave ${b.distinctGenerators} generators` +
          (b.otherLayoutGiven ? ', and another layout was given one' : ''),
      );
    }
    const layout = defineLayout(b.layout);
    const ids = l.process.ids;
    const words = new Uint32Array(ids.buffer, ids.byteOffset, ids.length * 2);
    // The ceiling of each ID: its burst's end mark; IDs of a burst in flight: the end line's ceiling, if any.
    const ceilings: Array<{ to: number; ceiling: number }> = [];
    for (const burst of l.bursts) if (burst.end) ceilings.push({ to: burst.end.count, ceiling: burst.end.x });
    const lastCeiling = l.end?.ceilingMs ?? Number.POSITIVE_INFINITY;
    let ci = 0;
    let ceiling = ceilings.length > 0 ? (ceilings[0] as { ceiling: number }).ceiling : lastCeiling;
    const tickOf = fieldReader(layout.timestampShift, layout.timestampBits);
    const workerOf = fieldReader(layout.workerShift, layout.workerBits);
    const dcOf = fieldReader(layout.datacenterShift, layout.datacenterBits);
    const wantWorker = layout.datacenterBits > 0 ? b.localWorkerId : b.workerId;
    const wantDc = layout.datacenterBits > 0 ? b.datacenterId : 0;
    // Tens of millions of IDs: the 32-bit halves as numbers, no BigInt per ID (BigInts only for the examples).
    let prevHi = -1;
    let prevLo = -1;
    for (let i = l.idStart; i < l.idEnd; i++) {
      if (ci < ceilings.length && (ceilings[ci] as { to: number }).to <= i) {
        while (ci < ceilings.length && (ceilings[ci] as { to: number }).to <= i) ci++;
        ceiling = ci < ceilings.length ? (ceilings[ci] as { ceiling: number }).ceiling : lastCeiling;
      }
      const lo = words[2 * i] as number;
      const hi = words[2 * i + 1] as number;
      const ts = layout.epochMs + tickOf(hi, lo) * layout.unitMs;
      const worker = workerOf(hi, lo);
      const dc = dcOf(hi, lo);
      if (ts < l.minTs) l.minTs = ts;
      if (ts > l.maxTs) l.maxTs = ts;
      if (worker !== wantWorker || dc !== wantDc || !(ts > b.floorMs) || ts > ceiling) {
        highWaterViolations++;
        note(
          `${label(l)}: ID ${ids[i]} ts ${ts} worker ${worker} dc ${dc} (floor ${b.floorMs}, ceiling ${ceiling})`,
        );
      }
      if (hi < prevHi || (hi === prevHi && lo <= prevLo)) {
        nonIncreasing++;
        note(`${label(l)}: ID ${ids[i]} after ${ids[i - 1]}`);
      }
      prevHi = hi;
      prevLo = lo;
    }
  }

  // After a pause of at least the TTL, a lease active before it issues at most the one ID in flight across it.
  let issuedAfterPause = 0;
  let pausesInBurst = 0;
  for (const l of leases) {
    const ttl = l.begin.ttlMs;
    if (ttl === undefined) continue;
    const onDisk = l.idEnd; // IDs of a burst in flight: those that reached the file
    for (const pz of l.process.pauses) {
      if (pz.cont - pz.stop < ttl || !(l.begin.acquiredMono < pz.stop)) continue;
      let after = 0;
      let across = false;
      for (const burst of l.bursts) {
        const to = burst.end?.count ?? onDisk;
        if (burst.t0 < pz.stop && burst.end !== undefined && (burst.end.w ?? burst.end.t) >= pz.cont)
          pausesInBurst++;
        if (burst.t0 >= pz.cont) {
          after += to - burst.count0;
        } else if (burst.end !== undefined && burst.end.t > pz.stop) {
          // Began before the pause and its last ID returned after it: one gap spans the whole pause (nothing runs
          // while a process is stopped). A burst in flight at a kill has its gaps still in memory: not judged.
          const g = burst.gaps.find((m) => m.t <= pz.stop && m.x >= pz.cont);
          if (g !== undefined) {
            across = true;
            after += Math.max(0, to - g.count - 1); // the first after the gap may have been checked before
          } else if (burst.end !== undefined && burst.end.count > burst.count0) {
            // Its last ID returned after the stop (so after the SIGCONT), with no gap across the pause.
            recordError(`${label(l)}: a burst across the pause ${ms(pz.stop)}..${ms(pz.cont)} without a gap`);
          }
        }
      }
      if (after > 0) {
        issuedAfterPause++;
        note(
          `${label(l)}: ${after} ID(s) returned after a ${ms(pz.cont - pz.stop)} pause (${ms(pz.stop)}..${ms(pz.cont)}, TTL ${ttl} ms)${across ? ' beyond the one in flight' : ''}`,
        );
      }
    }
  }

  // Per (app, worker ID): P1 over real time, tokens, P2 over timestamps.
  let overlappingHolders = 0;
  let tokenRegressions = 0;
  let timestampReuse = 0;
  let reusedWorkerIds = 0;
  let handOvers = 0;
  let oneIdWindows = 0;
  let oneIdWindowsInPause = 0;
  const windowed = new Set<LeaseView>();
  const byWorker = new Map<string, LeaseView[]>();
  for (const l of leases) {
    if (l.lastUse === undefined) continue; // issued nothing
    const key = `${l.begin.app}/${l.begin.workerId}`;
    const list = byWorker.get(key) ?? [];
    list.push(l);
    byWorker.set(key, list);
  }
  for (const [w, list] of byWorker) {
    list.sort((a, b) => a.begin.acquiredMono - b.begin.acquiredMono);
    if (new Set(list.map((l) => l.process)).size > 1) reusedWorkerIds++;
    for (let i = 0; i < list.length; i++) {
      const a = list[i] as LeaseView;
      const after = list[i + 1];
      if (after !== undefined && after.process !== a.process) handOvers++;
      for (let j = i + 1; j < list.length; j++) {
        const b = list[j] as LeaseView;
        // Tokens follow grants: a lease granted later carries a higher token (the same one only when it resumed a
        // cached lease of another process, without a grant).
        const sameOk = b.begin.token === a.begin.token && b.begin.resumed && b.process !== a.process;
        if (b.begin.token < a.begin.token || (b.begin.token === a.begin.token && !sameOk)) {
          tokenRegressions++;
          note(`${w}: ${label(b)} acquired after ${label(a)}`);
        }
        // P1: a issued nothing after b was granted (b's acquire returned after its grant).
        const aLast = a.lastUse as number;
        const bStart = b.begin.acquiredMono;
        if (aLast > bStart) {
          const win = a.window;
          if (win !== undefined && a.lastUseFrom === 'burst' && win.before <= bStart) {
            // Counted once per lease, however many later leases it reaches into.
            if (!windowed.has(a)) {
              windowed.add(a);
              oneIdWindows++;
              if (a.process.pauses.some((p) => p.stop < win.after && p.cont > win.before))
                oneIdWindowsInPause++;
            }
            note(
              `${w}: one-ID window: ${label(a)}'s last ID returned at ${ms(win.after)} (the one before by ${ms(win.before)}), ${label(b)} acquired at ${ms(bStart)}`,
            );
          } else {
            overlappingHolders++;
            note(
              `${w}: ${label(a)} issued until ${ms(aLast)} (${a.lastUseFrom}), ${label(b)} acquired at ${ms(bStart)}`,
            );
          }
        }
      }
    }
    // P2, in token order: a higher token's timestamps (and granted floor) lie above every lower token's timestamps.
    const byToken = [...list].sort(
      (a, b) => a.begin.token - b.begin.token || a.begin.acquiredMono - b.begin.acquiredMono,
    );
    for (let i = 0; i < byToken.length; i++) {
      const a = byToken[i] as LeaseView;
      if (a.minTs > a.maxTs) continue; // no ID on disk
      for (let j = i + 1; j < byToken.length; j++) {
        const b = byToken[j] as LeaseView;
        if (b.minTs <= a.maxTs || b.begin.floorMs < a.maxTs) {
          timestampReuse++;
          note(
            `${w}: ${label(b)} floor ${b.begin.floorMs}, timestamps from ${b.minTs}; ${label(a)} issued up to ${a.maxTs}`,
          );
        }
      }
    }
  }

  // Duplicates over everything.
  let total = 0;
  for (const p of h.processes) total += p.ids.length;
  const all = new BigInt64Array(total);
  let off = 0;
  for (const p of h.processes) {
    all.set(p.ids, off);
    off += p.ids.length;
  }
  all.sort();
  let duplicates = 0;
  for (let i = 1; i < all.length; i++) {
    if (all[i] === all[i - 1]) {
      duplicates++;
      note(`duplicate ID ${all[i]}`);
    }
  }

  const killed = leases.filter((l) => l.end === undefined && l.process.exit?.byDriver === 'kill');
  return {
    ids: total,
    processes: h.processes.length,
    leases: leases.length,
    duplicates,
    overlappingHolders,
    tokenRegressions,
    highWaterViolations,
    timestampReuse,
    nonIncreasing,
    generatorContract,
    clientFailures,
    issuedAfterPause,
    recordErrors,
    lostLeases: leases.filter((l) => l.end?.ended.startsWith('lost')).length,
    resumedLeases: leases.filter((l) => l.begin.resumed).length,
    killedLeases: killed.length,
    endedAtKill: killed.filter((l) => l.lastUseFrom === 'kill').length,
    reusedWorkerIds,
    handOvers,
    oneIdWindows,
    oneIdWindowsInPause,
    pausesInBurst,
    examples,
  };
}

/**
 * A reader of bits [shift, shift + bits) of the 64-bit value hi * 2^32 + lo (lo, hi: its unsigned 32-bit words), as
 * a number: exact, since no field is wider than 53 bits, and far cheaper than BigInt for tens of millions of IDs.
 */
export function fieldReader(shift: number, bits: number): (hi: number, lo: number) => number {
  if (bits === 0) return () => 0;
  if (shift >= 32) {
    // The sign bit is 0, so hi < 2^31 and an unsigned shift leaves only this field when it is the top one.
    const k = shift - 32;
    if (k + bits >= 31) return (hi) => hi >>> k;
    const m = 2 ** bits - 1;
    return (hi) => (hi >>> k) & m;
  }
  if (shift + bits <= 32) {
    if (bits === 32) return (_hi, lo) => lo >>> 0;
    const m = 2 ** bits - 1;
    return (_hi, lo) => ((lo >>> shift) & m) >>> 0;
  }
  // Straddles the word boundary: the high word's low bits, then the low word's high bits.
  const hb = shift + bits - 32;
  const hm = hb >= 31 ? 0x7fffffff : 2 ** hb - 1;
  const mul = 2 ** (32 - shift);
  return (hi, lo) => (hi & hm) * mul + (lo >>> shift);
}
