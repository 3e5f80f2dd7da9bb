/**
 * The chaos run's records on disk (formats: src/check/chaos-history.ts): the client's writer, written through so a
 * kill -9 loses nothing that was used, the driver's event log, and the reader the checker runs on.
 */
import {
  appendFileSync,
  closeSync,
  existsSync,
  openSync,
  readdirSync,
  readFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import {
  type ChaosHistory,
  type DriverEvent,
  encodeMarks,
  type LeaseBeginLine,
  type LeaseEndLine,
  type Mark,
  parseJsonLines,
  processHistory,
} from '../src/check/chaos-history.js';
import { hrtimeMonotonic } from '../src/client/index.js';

/**
 * CLOCK_MONOTONIC in ms, cheap enough to read after every ID: `performance.now()` counts from this process's time
 * origin on the same clock (libuv's uv_hrtime) as `process.hrtime`, so one offset, taken at start, maps it onto the
 * machine-wide reading every process and the driver share.
 */
export const monoNow: () => number = (() => {
  let best = Number.POSITIVE_INFINITY;
  let offset = 0;
  for (let i = 0; i < 50; i++) {
    const a = performance.now();
    const m = hrtimeMonotonic();
    const b = performance.now();
    if (b - a < best) {
      best = b - a;
      offset = m - (a + b) / 2;
    }
  }
  return () => performance.now() + offset;
})();

/** A client process's writer. Every write is a `write(2)` of its own, so it is in the page cache before the call
 * returns: a kill -9 cannot lose it (a machine crash could, but the chaos run kills processes, not the machine). */
export class ChaosRecorder {
  private readonly idFd: number;
  private readonly markFd: number;
  private readonly leaseFd: number;
  private readonly gaps: Mark[] = [];
  private lease = -1;
  /** IDs issued so far (all on disk once the current burst ended). */
  count = 0;

  constructor(dir: string, name: string) {
    this.idFd = openSync(join(dir, `ids-${name}.bin`), 'a');
    this.markFd = openSync(join(dir, `marks-${name}.bin`), 'a');
    this.leaseFd = openSync(join(dir, `leases-${name}.jsonl`), 'a');
  }

  line(o: object): void {
    writeSync(this.leaseFd, `${JSON.stringify(o)}\n`);
  }

  leaseBegin(o: Omit<LeaseBeginLine, 'type' | 'idStart' | 'lease'>): number {
    this.lease++;
    this.line({ type: 'begin', lease: this.lease, idStart: this.count, ...o } satisfies LeaseBeginLine);
    return this.lease;
  }

  leaseEnd(o: Omit<LeaseEndLine, 'type' | 'lease' | 'idEnd'>): void {
    this.line({ type: 'end', lease: this.lease, idEnd: this.count, ...o } satisfies LeaseEndLine);
  }

  /** Before a burst's first `next()`: `t` read before that call. */
  burstBegin(t: number): void {
    writeSync(this.markFd, encodeMarks([{ kind: 'begin', lease: this.lease, count: this.count, t, x: 0 }]));
  }

  /** A gap inside the burst: the first `before` IDs of the process returned by `tBefore`, the next one at `tAfter`. */
  gap(before: number, tBefore: number, tAfter: number): void {
    this.gaps.push({ kind: 'gap', lease: this.lease, count: before, t: tBefore, x: tAfter });
  }

  /** After the burst: its `n` IDs, then its gaps and end mark (`t` right after the last ID returned). */
  burstEnd(ids: BigInt64Array, n: number, t: number, ceilingMs: number): void {
    const w = monoNow();
    if (n > 0) writeSync(this.idFd, new Uint8Array(ids.buffer, ids.byteOffset, n * 8));
    this.count += n;
    for (const g of this.gaps) g.w = w;
    this.gaps.push({ kind: 'end', lease: this.lease, count: this.count, t, x: ceilingMs, w });
    writeSync(this.markFd, encodeMarks(this.gaps));
    this.gaps.length = 0;
  }

  close(): void {
    closeSync(this.idFd);
    closeSync(this.markFd);
    closeSync(this.leaseFd);
  }
}

/** A wait longer than this between two returns inside a burst is recorded (a gap mark). */
export const GAP_MS = 5;

/**
 * One burst of up to `buf.length` IDs from `next`, recorded: a begin mark (time read before the first call), the
 * time after every ID (a gap mark after a wait over GAP_MS), then the IDs and an end mark (time after the last ID,
 * the `ceiling()` read after the burst). Returns how many IDs were issued and the error that ended it early, if any.
 *
 * `stopAt`: the process SIGSTOPs itself after ID number `n` returned, before its return time is read (`beforeTime`:
 * that ID then returns, as recorded, after the pause: the window of one ID) or after (the next call comes after the
 * pause). The chaos driver asks for it to pause or kill a client inside a burst, which a signal at a random moment
 * would almost never hit (bursts are about 1 % of a client's time).
 */
export function runBurst(
  rec: ChaosRecorder,
  next: () => bigint,
  buf: BigInt64Array,
  ceiling: () => number,
  stopAt?: { n: number; beforeTime: boolean },
): { n: number; gaps: number; failure: unknown } {
  const t0 = monoNow();
  rec.burstBegin(t0);
  let n = 0;
  let gaps = 0;
  let tPrev = t0;
  let failure: unknown;
  const stopN = stopAt?.n ?? -1;
  try {
    while (n < buf.length) {
      const id = next();
      if (n + 1 === stopN && stopAt?.beforeTime) process.kill(process.pid, 'SIGSTOP');
      const t = monoNow();
      buf[n] = id;
      if (t - tPrev > GAP_MS) {
        rec.gap(rec.count + n, tPrev, t);
        gaps++;
      }
      n++;
      tPrev = t;
      if (n === stopN && !stopAt?.beforeTime) process.kill(process.pid, 'SIGSTOP');
    }
  } catch (e) {
    failure = e;
  }
  rec.burstEnd(buf, n, tPrev, ceiling());
  return { n, gaps, failure };
}

/** The driver's event log. */
export function recordEvent(dir: string, e: DriverEvent): void {
  appendFileSync(join(dir, 'events.jsonl'), `${JSON.stringify(e)}\n`);
}

/** Everything a chaos run recorded in `dir`. */
export function readChaosRun(dir: string, endMono = hrtimeMonotonic()): ChaosHistory {
  const eventsPath = join(dir, 'events.jsonl');
  const events = existsSync(eventsPath)
    ? (parseJsonLines(readFileSync(eventsPath, 'utf8')) as unknown as DriverEvent[])
    : [];
  const names = readdirSync(dir)
    .filter((f) => f.startsWith('leases-') && f.endsWith('.jsonl'))
    .map((f) => f.slice('leases-'.length, -'.jsonl'.length));
  const read = (f: string) => (existsSync(join(dir, f)) ? readFileSync(join(dir, f)) : Buffer.alloc(0));
  return {
    processes: names.map((name) =>
      processHistory(
        name,
        {
          ids: read(`ids-${name}.bin`),
          marks: read(`marks-${name}.bin`),
          leases: read(`leases-${name}.jsonl`).toString('utf8'),
        },
        events,
      ),
    ),
    endMono,
  };
}
