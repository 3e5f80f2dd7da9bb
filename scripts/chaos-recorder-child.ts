/**
 * A stand-in for a chaos client without a cluster (test/cluster/client-chaos-check.test.ts): one "lease" on a worker
 * ID with a plain Snowflake generator, recorded exactly as chaos-client.ts records (scripts/chaos-records.ts), in
 * unbounded bursts until it is killed. It shows that the records survive a kill -9 and that the checker judges them.
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
  acquiredMono: monoNow(),
  generatorsAsked: 1,
  distinctGenerators: 1,
  otherLayoutGiven: false,
});
// Tell the parent that IDs are being issued.
process.stdout.write('issuing\n');
const buf = new BigInt64Array(2048);
for (;;) {
  const { failure } = runBurst(
    rec,
    () => gen.next(),
    buf,
    () => Number.MAX_SAFE_INTEGER,
  );
  if (failure) throw failure;
}
