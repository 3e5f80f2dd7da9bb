/**
 * `npx tsx bench/leases.ts`: worker-ID lease state and the leader's lease service, in one process
 * (one JavaScript thread). Bounded to about 15 s.
 *
 * - apply throughput of acquire / logged renew / release commands on the LeaseStateMachine alone
 *   (commands encoded beforehand: this is what every replica pays per log entry);
 * - LeaseService renewals per second on a fake node whose ReadIndex answers at once (no Raft, no
 *   network: the service's own cost per renewal), sequential and 1,000 in flight;
 * - memory per lease for 100,000 leases: heapUsed after a forced GC, before and after, for the
 *   replicated state alone and for the leader's deadline tracking on top;
 * - snapshot size and snapshot/restore time for 100,000 leases.
 *
 * Method: each rate is the median of 5 rounds (after 1 warm-up) on fresh state.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { LeaseService } from '../src/lease/lease-service.js';
import { FakeTime, InstantNode } from '../src/lease/test-doubles.js';
import { encodeLeaseCommand } from '../src/state/leases/codec.js';
import { LeaseStateMachine } from '../src/state/leases/lease-state-machine.js';
import type { AcquireOk } from '../src/state/leases/types.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const N = 100_000;
const ROUNDS = 5;
const BUDGET_MS = 15_000;
const started = performance.now();
const T0 = 1_700_000_000_000;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function fmt(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/** Fresh state machine with N live leases in one 17-bit pool; returns the grants. */
function filled(sm: LeaseStateMachine, n: number, indexFrom = 1): AcquireOk[] {
  sm.apply(encodeLeaseCommand({ op: 'configurePool', app: 'bench', bits: 17, datacenterBits: 0 }), {
    index: indexFrom,
    term: 1,
    leaderTimeMs: T0,
  });
  const out: AcquireOk[] = [];
  for (let i = 0; i < n; i++) {
    const cmd = encodeLeaseCommand({
      op: 'acquire',
      app: 'bench',
      nodeId: `10.1.${i >> 8}.${i & 255}:8080`,
      ttlMs: 10_000,
      requestId: `req-${i}`,
    });
    out.push(sm.apply(cmd, { index: indexFrom + 1 + i, term: 1, leaderTimeMs: T0 + i }) as AcquireOk);
  }
  return out;
}

function applyRates(): void {
  const acquire: number[] = [];
  const renew: number[] = [];
  const release: number[] = [];
  for (let round = 0; round <= ROUNDS; round++) {
    const sm = new LeaseStateMachine();
    const acquires = Array.from({ length: N }, (_, i) =>
      encodeLeaseCommand({
        op: 'acquire',
        app: 'bench',
        nodeId: `node-${i}`,
        ttlMs: 10_000,
        requestId: `r${i}`,
      }),
    );
    sm.apply(encodeLeaseCommand({ op: 'configurePool', app: 'bench', bits: 17, datacenterBits: 0 }), {
      index: 1,
      term: 1,
      leaderTimeMs: T0,
    });
    let index = 1;
    let t = performance.now();
    for (const c of acquires) sm.apply(c, { index: ++index, term: 1, leaderTimeMs: T0 });
    const acq = N / ((performance.now() - t) / 1000);
    const renews = Array.from({ length: N }, (_, i) =>
      encodeLeaseCommand({ op: 'renew', app: 'bench', workerId: i, token: i + 2, boundMs: T0 + 1000 + i }),
    );
    t = performance.now();
    for (const c of renews) sm.apply(c, { index: ++index, term: 1, leaderTimeMs: T0 });
    const ren = N / ((performance.now() - t) / 1000);
    const releases = Array.from({ length: N }, (_, i) =>
      encodeLeaseCommand({
        op: 'release',
        app: 'bench',
        workerId: i,
        token: i + 2,
        lastTimestampMs: T0 + 2000,
      }),
    );
    t = performance.now();
    for (const c of releases) sm.apply(c, { index: ++index, term: 1, leaderTimeMs: T0 });
    const rel = N / ((performance.now() - t) / 1000);
    if (sm.leaseCount !== 0) throw new Error('bench bug: leases left after release');
    if (round > 0) {
      acquire.push(acq);
      renew.push(ren);
      release.push(rel);
    }
    if (performance.now() - started > BUDGET_MS / 3) break;
  }
  console.log(`state machine apply (${fmt(N)} commands per round, median of ${acquire.length} rounds):`);
  console.log(`  acquire            ${fmt(median(acquire))} commands/s`);
  console.log(`  renew (raises)     ${fmt(median(renew))} commands/s`);
  console.log(`  release            ${fmt(median(release))} commands/s`);
}

async function serviceRates(): Promise<void> {
  const seq: number[] = [];
  const par: number[] = [];
  let parRounds = 0;
  for (let round = 0; round <= ROUNDS; round++) {
    const time = new FakeTime();
    const sm = new LeaseStateMachine();
    const node = new InstantNode(sm, time);
    const svc = new LeaseService({ node, state: sm, clock: time, timers: time });
    await svc.whenReady();
    await svc.configurePool('bench', 17);
    const leases: AcquireOk[] = [];
    const count = 10_000;
    for (let i = 0; i < count; i++) {
      leases.push((await svc.acquire({ app: 'bench', nodeId: `n${i}`, requestId: `r${i}` })) as AcquireOk);
    }
    const renewals = 200_000;
    let t = performance.now();
    for (let i = 0; i < renewals; i++) {
      const l = leases[i % count]!;
      const r = await svc.renew({ app: 'bench', workerId: l.workerId, token: l.token });
      if (!r.ok) throw new Error(`bench bug: ${r.message}`);
    }
    const s = renewals / ((performance.now() - t) / 1000);
    const roundsBefore = svc.readStats.rounds;
    t = performance.now();
    const inFlight = 1_000;
    for (let i = 0; i < renewals; i += inFlight) {
      const batch: Promise<unknown>[] = [];
      for (let k = 0; k < inFlight; k++) {
        const l = leases[(i + k) % count]!;
        batch.push(svc.renew({ app: 'bench', workerId: l.workerId, token: l.token }));
      }
      await Promise.all(batch);
    }
    const p = renewals / ((performance.now() - t) / 1000);
    parRounds = svc.readStats.rounds - roundsBefore;
    if (node.ops('renew') !== 0) throw new Error('bench bug: a renewal was logged');
    svc.close();
    if (round > 0) {
      seq.push(s);
      par.push(p);
    }
    if (performance.now() - started > (2 * BUDGET_MS) / 3) break;
  }
  console.log(`LeaseService renewals, fake instant node (no log entries; median of ${seq.length} rounds):`);
  console.log(`  one at a time      ${fmt(median(seq))} renewals/s`);
  console.log(
    `  1,000 in flight    ${fmt(median(par))} renewals/s (${fmt(parRounds)} ReadIndex rounds for 200,000 renewals)`,
  );
}

async function memoryAndSnapshots(): Promise<void> {
  const before = heapAfterGc();
  const sm = new LeaseStateMachine();
  const grants = filled(sm, N);
  grants.length = 0; // keep only the state machine's own memory
  const afterState = heapAfterGc();
  const time = new FakeTime();
  const node = new InstantNode(sm, time);
  node.index = N + 1;
  const svc = new LeaseService({ node, state: sm, clock: time, timers: time });
  await svc.whenReady();
  if (svc.trackedCount !== N) throw new Error(`bench bug: tracked ${svc.trackedCount}`);
  const afterService = heapAfterGc();
  console.log(`memory for ${fmt(N)} live leases (heapUsed after GC; nodeId like "10.1.x.y:8080"):`);
  console.log(`  replicated state   ${fmt((afterState - before) / N)} bytes/lease`);
  console.log(`  leader deadlines   ${fmt((afterService - afterState) / N)} bytes/lease (heap + tracking)`);

  let t = performance.now();
  const snap = sm.snapshot();
  const snapMs = performance.now() - t;
  const copy = new LeaseStateMachine();
  t = performance.now();
  copy.restore(snap);
  const restoreMs = performance.now() - t;
  if (copy.leaseCount !== N) throw new Error('bench bug: restore lost leases');
  console.log(
    `snapshot of ${fmt(N)} leases: ${fmt(snap.length)} bytes (${fmt(snap.length / N)} bytes/lease),`,
  );
  console.log(`  snapshot ${snapMs.toFixed(0)} ms, restore ${restoreMs.toFixed(0)} ms`);

  // Expiring all of them through the pump (instant node): proposals and time.
  t = performance.now();
  await time.advance(10_000);
  const expireMs = performance.now() - t;
  console.log(
    `expiring ${fmt(N)} leases: ${fmt(node.ops('expire'))} expire proposals of <= 256, ${expireMs.toFixed(0)} ms ` +
      `(leases left ${sm.leaseCount})`,
  );
  svc.close();
}

console.log(`node ${process.version}, ${process.arch}`);
applyRates();
await serviceRates();
await memoryAndSnapshots();
console.log(`total ${((performance.now() - started) / 1000).toFixed(1)} s`);
