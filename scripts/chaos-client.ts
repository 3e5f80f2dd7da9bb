/**
 * One SDK client process of the chaos run (scripts/chaos.ts starts 20 of them). It leases a worker ID, generates IDs
 * in bursts while the lease lasts, re-leases when it loses it, and now and then releases on purpose. It records:
 *
 * - `ids-<name>.bin`: every ID it generated, BigInt64 little-endian, appended in 512 KiB writes;
 * - `leases-<name>.jsonl`: a `begin` line per lease (worker ID, token, the grant's high-water mark, where its IDs start
 *   in the ID file, the first-use time) and an `end` line (last ID index, last-use time, why it ended). Times are
 *   CLOCK_MONOTONIC ms (`process.hrtime`), which every process on the machine shares.
 *
 * "First use" is read before the first `next()` of the lease; "last use" is the generator's last passed deadline check
 * (`LeaseSnowflake.lastCheckMono`), which precedes every ID issued after it by at most one tick.
 *
 * Usage: tsx scripts/chaos-client.ts '<json options>' (see ChaosClientOptions). SIGTERM: release, flush, exit 0.
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import {
  FloeClient,
  FloeRequestError,
  hrtimeMonotonic,
  LeaseLostError,
  type LeaseSnowflake,
  type WorkerLease,
} from '../src/client/index.js';
import { CeilingReachedError, type Clock, ClockMovedBackwardsError, systemClock } from '../src/id/index.js';

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
}

const o = JSON.parse(process.argv[2] ?? '{}') as ChaosClientOptions;
let seed = o.seed >>> 0 || 1;
const rand = () => {
  seed = (seed * 1664525 + 1013904223) >>> 0;
  return seed / 2 ** 32;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const yieldNow = () => new Promise((r) => setImmediate(r));

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

// ---- recording ------------------------------------------------------------------------------
const idFd = openSync(join(o.dir, `ids-${o.name}.bin`), 'a');
const leaseFd = openSync(join(o.dir, `leases-${o.name}.jsonl`), 'a');
const buf = new BigInt64Array(65_536);
let buffered = 0;
let written = 0; // IDs flushed to the file
const flush = () => {
  if (buffered === 0) return;
  writeSync(idFd, new Uint8Array(buf.buffer, 0, buffered * 8));
  written += buffered;
  buffered = 0;
};
const record = (line: object) => writeSync(leaseFd, `${JSON.stringify(line)}\n`);
const count = () => written + buffered;

// ---- the loop ------------------------------------------------------------------------------
const client = new FloeClient({ endpoints: o.endpoints, requestTimeoutMs: 1000, clock });
let stopping = false;
let current: WorkerLease | undefined;
const stats = { leases: 0, lost: 0, released: 0, acquireFailures: 0, backwardsWaits: 0, ceilingWaits: 0 };

process.on('SIGTERM', () => {
  stopping = true;
});

async function runLease(lease: WorkerLease): Promise<void> {
  stats.leases++;
  const idStart = count();
  const startMono = hrtimeMonotonic();
  record({
    type: 'begin',
    client: o.name,
    workerId: lease.workerId,
    token: lease.token,
    highWaterMs: lease.floorMs,
    idStart,
    startMono,
  });
  const gen = lease.snowflake('floe') as LeaseSnowflake;
  const keepFor = 2000 + rand() * 8000; // then release on purpose
  const began = hrtimeMonotonic();
  let ended = 'stopping';
  let produced = 0;
  for (;;) {
    if (stopping) break;
    if (hrtimeMonotonic() - began > keepFor) {
      ended = 'release';
      break;
    }
    try {
      const room = buf.length - buffered;
      const n = Math.min(2048, room);
      for (let i = 0; i < n; i++) {
        // Not `buf[buffered++] = gen.next()`: the index is evaluated first, so a throw would count a stale slot.
        const id = gen.next();
        buf[buffered++] = id;
      }
      produced += n;
      if (buffered === buf.length) flush();
    } catch (e) {
      if (e instanceof LeaseLostError) {
        ended = `lost:${e.reason}`;
        break;
      }
      if (e instanceof ClockMovedBackwardsError) {
        stats.backwardsWaits++;
        await sleep(2);
        continue;
      }
      if (e instanceof CeilingReachedError) {
        stats.ceilingWaits++;
        await sleep(5);
        continue;
      }
      throw e;
    }
    if (o.rate > 0) {
      const ahead = produced / o.rate - (hrtimeMonotonic() - began) / 1000;
      if (ahead > 0) await sleep(ahead * 1000);
      else await yieldNow();
    } else {
      await yieldNow();
    }
  }
  const endMono = gen.lastCheckMono;
  const lastTimestamp = gen.lastTimestamp;
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
  flush();
  record({
    type: 'end',
    client: o.name,
    workerId: lease.workerId,
    token: lease.token,
    idStart,
    idEnd: count(),
    startMono,
    endMono,
    lastTimestamp,
    ceilingMs: lease.ceilingMs,
    ended,
  });
}

while (!stopping) {
  try {
    current = await client.leaseWorker({
      app: o.app,
      nodeId: o.nodeName ?? o.name,
      ttlMs: o.ttlMs,
      acquireTimeoutMs: o.ttlMs,
    });
  } catch (e) {
    stats.acquireFailures++;
    if (!(e instanceof FloeRequestError) && !(e instanceof Error)) throw e;
    await sleep(50 + rand() * 200);
    continue;
  }
  await runLease(current);
  current = undefined;
}
flush();
closeSync(idFd);
closeSync(leaseFd);
process.stdout.write(`${JSON.stringify({ client: o.name, ids: written, clockJumps, ...stats })}\n`);
process.exit(0);
