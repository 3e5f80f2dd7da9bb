/**
 * One SDK client process of the chaos run (scripts/chaos.ts starts many). It leases a worker ID, generates IDs in
 * bursts while the lease lasts, re-leases when it loses it, and now and then releases on purpose. Everything it
 * records survives a kill -9 (docs/chaos.md):
 *
 * - `bursts-<name>.bin`: after each burst of at most 2,048 IDs, a Float64 pair (ID count so far, CLOCK_MONOTONIC ms
 *   read after the burst's last `next()`), written before the burst's IDs: every recorded ID's last use is known;
 * - `ids-<name>.bin`: every ID it generated, BigInt64 little-endian, written after every burst (before the next
 *   starts), so a kill -9 loses at most the burst in flight;
 * - `leases-<name>.jsonl`: a `begin` line per lease (worker ID, token, the grant's high-water mark, the layout, where
 *   its IDs start, the first-use time read before its first `next()`) and an `end` line (last ID index, last use =
 *   the last burst's time, why it ended). CLOCK_MONOTONIC is shared by every process on the machine.
 *
 * Variants (options): `cachePath` (the SDK's lease cache, kept across restarts), `generators` (several
 * `lease.snowflake()` calls used in turn: the SDK returns the same generator, or refuses another layout), `borrow`
 * (borrow mode on sequence exhaustion), `layout` (`floe`, or `coarse`: 100 ms ticks).
 *
 * Usage: tsx scripts/chaos-client.ts '<json options>' (see ChaosClientOptions). SIGTERM: release, flush, exit 0.
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import {
  CacheLockedError,
  ClientOptionError,
  FloeClient,
  FloeRequestError,
  hrtimeMonotonic,
  LeaseLostError,
  type WorkerLease,
} from '../src/client/index.js';
import {
  CeilingReachedError,
  type Clock,
  ClockMovedBackwardsError,
  type Snowflake,
  systemClock,
} from '../src/id/index.js';
import { CHAOS_LAYOUTS, type ChaosLayoutName } from './chaos-layouts.js';

export interface ChaosClientOptions {
  name: string;
  endpoints: string[];
  app: string;
  dir: string;
  ttlMs: number;
  /** normal | behind | ahead | jumpy (jumps backwards by 20-400 ms every ~1.5 s) */
  clock: 'normal' | 'behind' | 'ahead' | 'jumpy';
  /** Per-client cap (IDs/s) between bursts; 0 = unbounded. */
  rate: number;
  seed: number;
  /** The nodeId to lease as (kept across restarts of one client); default `name`. */
  nodeName?: string;
  /** The SDK's lease cache file (kept across restarts of this client). */
  cachePath?: string;
  /** Generators asked of each lease and used in turn (default 1). */
  generators?: number;
  /** Borrow ticks ahead when a tick's sequence is used up. */
  borrow?: boolean;
  layout?: ChaosLayoutName;
}

const o = JSON.parse(process.argv[2] ?? '{}') as ChaosClientOptions;
let seed = o.seed >>> 0 || 1;
const rand = () => {
  seed = (seed * 1664525 + 1013904223) >>> 0;
  return seed / 2 ** 32;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const yieldNow = () => new Promise((r) => setImmediate(r));
const layoutName: ChaosLayoutName = o.layout ?? 'floe';
const layout = CHAOS_LAYOUTS[layoutName];

// ---- the wall clock this client believes ---------------------------------------------------
let offset = o.clock === 'behind' ? -1500 : o.clock === 'ahead' ? 1500 : 0;
const clock: Clock =
  o.clock === 'normal'
    ? systemClock
    : { now: () => Date.now() + offset, waitUntil: (ms: number) => systemClock.waitUntil?.(ms - offset) };
let clockJumps = 0;
if (o.clock === 'jumpy') {
  setInterval(() => {
    offset -= 20 + Math.floor(rand() * 380);
    clockJumps++;
  }, 1500).unref();
}

// ---- recording: written through after every burst, so a kill -9 loses at most the burst in flight ----
const idFd = openSync(join(o.dir, `ids-${o.name}.bin`), 'a');
const burstFd = openSync(join(o.dir, `bursts-${o.name}.bin`), 'a');
const leaseFd = openSync(join(o.dir, `leases-${o.name}.jsonl`), 'a');
const BURST = 2048;
const buf = new BigInt64Array(BURST);
const burstRec = new Float64Array(2);
let written = 0; // IDs in the file
let lastBurstMono = Number.NEGATIVE_INFINITY;
/**
 * Writes the burst's (count, time) record, then its IDs. So every ID on disk has a last-use time on disk (a kill
 * between the two writes leaves a record counting IDs that are not in the file; the checker caps it at the file).
 */
const writeBurst = (n: number, mono: number) => {
  if (n === 0) return;
  burstRec[0] = written + n;
  burstRec[1] = mono;
  writeSync(burstFd, new Uint8Array(burstRec.buffer));
  writeSync(idFd, new Uint8Array(buf.buffer, 0, n * 8));
  written += n;
  lastBurstMono = mono;
};
const record = (line: object) => writeSync(leaseFd, `${JSON.stringify(line)}\n`);

// ---- the loop ------------------------------------------------------------------------------
const client = new FloeClient({ endpoints: o.endpoints, requestTimeoutMs: 1000, clock });
let stopping = false;
const stats = {
  leases: 0,
  lost: 0,
  released: 0,
  acquireFailures: 0,
  cacheLocked: 0,
  leaseHeld: 0,
  sameGenerator: 0,
  otherLayoutRefused: 0,
  backwardsWaits: 0,
  ceilingWaits: 0,
};

process.on('SIGTERM', () => {
  stopping = true;
});

/** The generators this lease gives out: several calls for one layout must yield one generator. */
function generatorsOf(lease: WorkerLease): Snowflake[] {
  const opts = o.borrow ? { onSequenceExhausted: 'borrow' as const } : {};
  const gens: Snowflake[] = [];
  for (let i = 0; i < (o.generators ?? 1); i++) gens.push(lease.snowflake(layout, opts));
  if (gens.length > 1) {
    if (gens.some((g) => g !== gens[0])) throw new Error('the SDK gave two generators for one lease');
    stats.sameGenerator++;
    try {
      lease.snowflake(layoutName === 'floe' ? CHAOS_LAYOUTS.coarse : CHAOS_LAYOUTS.floe, opts);
      throw new Error('the SDK gave a second generator with another layout for one lease');
    } catch (e) {
      if (!(e instanceof ClientOptionError)) throw e;
      stats.otherLayoutRefused++;
    }
  }
  return gens;
}

async function runLease(lease: WorkerLease): Promise<void> {
  stats.leases++;
  const idStart = written;
  const startMono = hrtimeMonotonic();
  record({
    type: 'begin',
    client: o.name,
    workerId: lease.workerId,
    token: lease.token,
    highWaterMs: lease.floorMs,
    layout: layoutName,
    idStart,
    startMono,
  });
  const gens = generatorsOf(lease);
  const keepFor = 2000 + rand() * 8000; // then release on purpose
  const began = hrtimeMonotonic();
  let ended = 'stopping';
  let produced = 0;
  let turn = 0;
  for (;;) {
    if (stopping) break;
    if (hrtimeMonotonic() - began > keepFor) {
      ended = 'release';
      break;
    }
    const gen = gens[turn++ % gens.length] as Snowflake;
    let n = 0;
    let failure: unknown;
    try {
      while (n < BURST) {
        // Not `buf[n++] = gen.next()`: the index is evaluated first, so a throw would count a stale slot.
        const id = gen.next();
        buf[n++] = id;
      }
    } catch (e) {
      failure = e;
    }
    writeBurst(n, hrtimeMonotonic());
    produced += n;
    if (failure !== undefined) {
      if (failure instanceof LeaseLostError) {
        ended = `lost:${failure.reason}`;
        break;
      }
      if (failure instanceof ClockMovedBackwardsError) {
        stats.backwardsWaits++;
        await sleep(2);
        continue;
      }
      if (failure instanceof CeilingReachedError) {
        stats.ceilingWaits++;
        await sleep(5);
        continue;
      }
      throw failure;
    }
    if (o.rate > 0) {
      const ahead = produced / o.rate - (hrtimeMonotonic() - began) / 1000;
      if (ahead > 0) await sleep(ahead * 1000);
      else await yieldNow();
    } else {
      await yieldNow();
    }
  }
  const endMono = Math.max(lastBurstMono, startMono);
  if (ended === 'release' || ended === 'stopping') {
    try {
      await lease.release();
      stats.released++;
    } catch {
      // unreachable cluster: the lease expires by itself; generation already stopped
    }
  } else {
    stats.lost++;
  }
  record({
    type: 'end',
    client: o.name,
    workerId: lease.workerId,
    token: lease.token,
    idStart,
    idEnd: written,
    startMono,
    endMono,
    ceilingMs: lease.ceilingMs,
    ended,
  });
}

while (!stopping) {
  let lease: WorkerLease;
  try {
    lease = await client.leaseWorker({
      app: o.app,
      nodeId: o.nodeName ?? o.name,
      ttlMs: o.ttlMs,
      acquireTimeoutMs: o.ttlMs,
      ...(o.cachePath ? { cachePath: o.cachePath, cacheLockWaitMs: 200 } : {}),
    });
  } catch (e) {
    stats.acquireFailures++;
    if (e instanceof CacheLockedError) stats.cacheLocked++;
    else if (e instanceof FloeRequestError && e.serverCode === 'lease_held') stats.leaseHeld++;
    else if (!(e instanceof Error)) throw e;
    await sleep(50 + rand() * 200);
    continue;
  }
  await runLease(lease);
}
closeSync(idFd);
closeSync(burstFd);
closeSync(leaseFd);
process.stdout.write(`${JSON.stringify({ client: o.name, ids: written, clockJumps, ...stats })}\n`);
process.exit(0);
