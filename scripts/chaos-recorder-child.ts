/**
 * A stand-in for a chaos client without a cluster (test/cluster/client-chaos-check.test.ts): one "lease" on a worker
 * ID with a plain Snowflake generator, recorded exactly as chaos-client.ts records (scripts/chaos-records.ts), in
 * unbounded bursts until it is killed. It shows that the records survive a kill -9 and that the checker judges them.
 *
 * SIGUSR2: stop itself (SIGSTOP) inside the next burst, as a chaos client does for the driver. It has no lease, so it
 * goes on issuing after any pause: with `ttlMs` set, the checker must say so.
 *
 * Usage: tsx scripts/chaos-recorder-child.ts '{"dir":...,"name":...,"workerId":1,"token":1,"floorMs":...}'
 */
import { PRESETS, Snowflake } from '../src/id/index.js';
import { ChaosRecorder, monoNow, runBurst } from './chaos-records.js';

const o = JSON.parse(process.argv[2] ?? '{}') as {
  dir: string;
  name: string;
  workerId: number;
  token: number;
  floorMs: number;
  ttlMs?: number;
};
const rec = new ChaosRecorder(o.dir, o.name);
rec.line({ type: 'process', name: o.name, pid: process.pid });
const layout = PRESETS.floe;
const gen = new Snowflake({ layout, worker: o.workerId, floor: o.floorMs });
rec.leaseBegin({
  app: 'fixture',
  workerId: o.workerId,
  datacenterId: 0,
  localWorkerId: o.workerId,
  token: o.token,
  floorMs: o.floorMs,
  resumed: false,
  layout: { ...PRESETS.floe },
  ...(o.ttlMs === undefined ? {} : { ttlMs: o.ttlMs }),
  acquiredMono: monoNow(),
  generatorsAsked: 1,
  distinctGenerators: 1,
  otherLayoutGiven: false,
});
let stopAsked = false;
process.on('SIGUSR2', () => {
  stopAsked = true;
});
// Tell the parent that IDs are being issued.
process.stdout.write('issuing\n');
const buf = new BigInt64Array(2048);
for (;;) {
  const plan = stopAsked ? { n: 1000, beforeTime: false } : undefined;
  stopAsked = false;
  const { failure } = runBurst(
    rec,
    () => gen.next(),
    buf,
    () => Number.MAX_SAFE_INTEGER,
    plan,
  );
  if (failure) throw failure;
  // Let signal handlers run between bursts.
  await new Promise((r) => setImmediate(r));
}
