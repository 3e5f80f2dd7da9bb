/**
 * One SDK client process of the chaos run (scripts/chaos.ts starts many). It leases a worker ID, generates IDs in
 * bursts while the lease lasts, re-leases when it loses it, and now and then releases on purpose.
 *
 * Recording (scripts/chaos-records.ts; formats and what they prove: src/check/chaos-history.ts, docs/chaos.md): a
 * mark with the time before every burst, the time after every ID (a mark when more than GAP_MS passed between two),
 * and after the burst its IDs, then a mark with the time its last ID returned. All are `write(2)`s before the next
 * burst starts, so a kill -9 loses at most the IDs of the burst in flight, and its begin mark says one was.
 *
 * Variants (options): `cachePath` (the SDK's lease cache, kept across restarts), `generators` (several
 * `lease.snowflake()` calls, all used in turn: the SDK must give one generator, and refuse another layout),
 * `borrow` (borrow mode: ticks ahead when a tick's sequence is used up), `layout` (`floe`, or `coarse`: 1 s ticks).
 * `bugs`: test-only switches (src/testing/bug-switches.ts) put back into this process's SDK, to show that the run
 * finds them.
 *
 * Usage: tsx scripts/chaos-client.ts '<json options>' (see ChaosClientOptions). SIGTERM: release, exit 0.
 */
import {
  CacheLockedError,
  ClientOptionError,
  FloeClient,
  FloeRequestError,
  LeaseLostError,
  LeaseRenewalLateError,
  type WorkerLease,
} from '../src/client/index.js';
import {
  CeilingReachedError,
  type Clock,
  ClockMovedBackwardsError,
  type Snowflake,
  systemClock,
} from '../src/id/index.js';
import { switchBugsOn } from '../src/testing/bug-switches.js';
import { CHAOS_LAYOUTS, type ChaosLayoutName } from './chaos-layouts.js';
import { ChaosRecorder, monoNow, runBurst } from './chaos-records.js';

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
  /** `lease.snowflake()` calls per lease, all used in turn (default 1). */
  generators?: number;
  /** Borrow ticks ahead when a tick's sequence is used up. */
  borrow?: boolean;
  layout?: ChaosLayoutName;
  /** Test-only bug switches (teeth runs). */
  bugs?: string[];
}

const BURST = 2048;

const o = JSON.parse(process.argv[2] ?? '{}') as ChaosClientOptions;
if (o.bugs?.length) switchBugsOn(o.bugs);
let seed = o.seed >>> 0 || 1;
const rand = () => {
  seed = (seed * 1664525 + 1013904223) >>> 0;
  return seed / 2 ** 32;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const yieldNow = () => new Promise((r) => setImmediate(r));
const layoutName: ChaosLayoutName = o.layout ?? 'floe';
const layout = CHAOS_LAYOUTS[layoutName];

// ---- the wall clock this client believes (the SDK's only; records use CLOCK_MONOTONIC) -----
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

const rec = new ChaosRecorder(o.dir, o.name);
rec.line({ type: 'process', name: o.name, nodeId: o.nodeName ?? o.name, pid: process.pid, options: o });
const buf = new BigInt64Array(BURST);

const client = new FloeClient({ endpoints: o.endpoints, requestTimeoutMs: 1000, clock });
let stopping = false;
const stats = {
  leases: 0,
  lost: 0,
  released: 0,
  resumed: 0,
  acquireFailures: 0,
  cacheLocked: 0,
  leaseHeld: 0,
  sameGenerator: 0,
  otherLayoutRefused: 0,
  backwardsWaits: 0,
  ceilingWaits: 0,
  gaps: 0,
  selfStops: 0,
};

process.on('SIGTERM', () => {
  stopping = true;
});

// SIGUSR2 from the driver: stop this process (SIGSTOP to itself) inside the next burst that begins within 500 ms,
// then the driver pauses or kills it there (chaos-records.ts, runBurst). An older request lapses, so a driver that
// gave up waiting is not surprised later.
let stopRequestedAt = Number.NEGATIVE_INFINITY;
process.on('SIGUSR2', () => {
  stopRequestedAt = monoNow();
});
/** Where to stop in this burst, if asked (a burst that ends before that ID keeps the request for the next one). */
function stopPlan(): { n: number; beforeTime: boolean } | undefined {
  if (monoNow() - stopRequestedAt > 500) return undefined;
  return { n: 1 + Math.floor(rand() * (BURST - 1)), beforeTime: rand() < 0.5 };
}

/**
 * The generators this lease gives out for `generators` calls: the SDK must return one generator for one layout and
 * refuse another layout. Whatever it returns is used (in turn): were two generators given, the checker would see
 * their IDs collide. Returns them with what the SDK did.
 */
function generatorsOf(lease: WorkerLease): {
  gens: Snowflake[];
  distinct: number;
  otherLayoutGiven: boolean;
} {
  const opts = o.borrow ? { onSequenceExhausted: 'borrow' as const } : {};
  const gens: Snowflake[] = [];
  for (let i = 0; i < (o.generators ?? 1); i++) gens.push(lease.snowflake(layout, opts));
  const distinct = new Set(gens).size;
  let otherLayoutGiven = false;
  if (gens.length > 1) {
    if (distinct === 1) stats.sameGenerator++;
    try {
      lease.snowflake(layoutName === 'floe' ? CHAOS_LAYOUTS.coarse : CHAOS_LAYOUTS.floe, opts);
      otherLayoutGiven = true; // not used: another layout's IDs are not comparable; the checker counts it
    } catch (e) {
      if (!(e instanceof ClientOptionError)) throw e;
      stats.otherLayoutRefused++;
    }
  }
  return { gens, distinct, otherLayoutGiven };
}

async function runLease(lease: WorkerLease, acquiredMono: number): Promise<void> {
  stats.leases++;
  if (lease.resumedFromCache) stats.resumed++;
  // Ask for the generators first (the begin line records what the SDK did); no ID is issued here. A lease lost
  // already (paused right after its acquire) refuses: it issued nothing, so nothing is recorded.
  let got: ReturnType<typeof generatorsOf>;
  try {
    got = generatorsOf(lease);
  } catch (e) {
    if (!(e instanceof LeaseLostError)) throw e;
    stats.lost++;
    return;
  }
  const { gens, distinct, otherLayoutGiven } = got;
  rec.leaseBegin({
    app: o.app,
    workerId: lease.workerId,
    datacenterId: lease.datacenterId,
    localWorkerId: lease.localWorkerId,
    token: lease.token,
    floorMs: lease.floorMs,
    resumed: lease.resumedFromCache,
    layout: {
      name: layout.name,
      epochMs: layout.epochMs,
      unitMs: layout.unitMs,
      timestampBits: layout.timestampBits,
      datacenterBits: layout.datacenterBits,
      workerBits: layout.workerBits,
      sequenceBits: layout.sequenceBits,
    },
    ttlMs: lease.ttlMs,
    acquiredMono,
    generatorsAsked: gens.length,
    distinctGenerators: distinct,
    otherLayoutGiven,
  });
  const keepFor = 2000 + rand() * 8000; // then release on purpose
  const began = monoNow();
  let ended = 'stopping';
  let produced = 0;
  let turn = 0;
  for (;;) {
    if (stopping) break;
    if (monoNow() - began > keepFor) {
      ended = 'release';
      break;
    }
    const gen = gens[turn++ % gens.length] as Snowflake;
    const plan = stopPlan();
    const { n, gaps, failure } = runBurst(
      rec,
      () => gen.next(),
      buf,
      () => lease.ceilingMs,
      plan,
    );
    if (plan !== undefined && n >= plan.n) {
      stopRequestedAt = Number.NEGATIVE_INFINITY;
      stats.selfStops++;
    }
    stats.gaps += gaps;
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
      if (failure instanceof LeaseRenewalLateError) {
        // The last tick before the deadline: the lease renews on (or is lost at its deadline).
        stats.ceilingWaits++;
        await sleep(5);
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
      const ahead = produced / o.rate - (monoNow() - began) / 1000;
      if (ahead > 0) await sleep(ahead * 1000);
      else await yieldNow();
    } else {
      await yieldNow();
    }
  }
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
  rec.leaseEnd({ ceilingMs: lease.ceilingMs, ended });
}

while (!stopping) {
  let lease: WorkerLease;
  try {
    lease = await client.leaseWorker({
      app: o.app,
      nodeId: o.nodeName ?? o.name,
      ttlMs: o.ttlMs,
      layout,
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
  await runLease(lease, monoNow());
}
rec.close();
process.stdout.write(`${JSON.stringify({ client: o.name, ids: rec.count, clockJumps, ...stats })}\n`);
process.exit(0);
