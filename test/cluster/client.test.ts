// The client SDK against real node processes (`npm run build` first): leader finding, failover, release, and the
// deadline stop when the whole cluster goes silent.
import { afterEach, describe, expect, it } from 'vitest';
import {
  FloeClient,
  hrtimeMonotonic,
  LeaseLostError,
  LeaseRenewalLateError,
  type LeaseSnowflake,
} from '../../src/client/index.js';
import { decode } from '../../src/id/index.js';
import { Cluster, waitForLeader } from './harness.js';

let cluster: Cluster | undefined;
afterEach(async () => {
  await cluster?.stopAll();
  cluster?.cleanup();
  cluster = undefined;
});

const tick = () => new Promise((r) => setImmediate(r));

describe('client SDK on a real cluster', () => {
  it('leases through any endpoint, keeps the lease across a leader kill -9, releases, and gets its worker ID back above its last timestamp', async () => {
    cluster = await Cluster.create({ size: 3 });
    cluster.startAll();
    const leader = await waitForLeader(cluster);
    // Start with a follower first: the SDK must follow its 307.
    const endpoints = [...cluster.nodes]
      .sort((a, b) => (a.spec.id === leader ? 1 : 0) - (b.spec.id === leader ? 1 : 0))
      .map((n) => n.http);
    const client = new FloeClient({ endpoints, requestTimeoutMs: 1000 });
    const lease = await client.leaseWorker({ app: 'orders', nodeId: 'svc-1', ttlMs: 6000 });
    const lost: unknown[] = [];
    lease.on('lost', (e) => lost.push(e));
    const gen = lease.snowflake('floe');
    const first = gen.next();
    expect(decode(first, 'floe').worker).toBe(lease.workerId);
    expect(decode(first, 'floe').timestamp).toBeGreaterThan(lease.floorMs);

    await cluster.node(leader).kill9();
    const renewedAfterFailover = new Promise((r) => lease.once('renewed', r));
    await waitForLeader(cluster);
    await renewedAfterFailover;
    await new Promise((r) => lease.once('renewed', r)); // and once more, through the new leader
    expect(lost).toEqual([]);
    expect(lease.valid).toBe(true);
    const before = gen.next();
    expect(before > first).toBe(true);

    const released = await lease.release();
    expect(released.lastTimestampMs).toBe(gen.lastTimestamp);
    expect(() => gen.next()).toThrow(LeaseLostError);

    const again = await client.leaseWorker({ app: 'orders', nodeId: 'svc-1', ttlMs: 6000 });
    expect(again.workerId).toBe(lease.workerId); // stable worker ID
    expect(again.token).toBeGreaterThan(lease.token);
    expect(again.floorMs).toBeGreaterThanOrEqual(gen.lastTimestamp as number);
    const next = again.snowflake('floe').next();
    expect(next > before).toBe(true);
    await again.release();
  }, 120_000);

  it('stops with LeaseLostError before the TTL runs out when every node is paused, and issues nothing after its deadline', async () => {
    cluster = await Cluster.create({ size: 3 });
    cluster.startAll();
    await waitForLeader(cluster);
    const ttlMs = 3000;
    const client = new FloeClient({ endpoints: cluster.nodes.map((n) => n.http), requestTimeoutMs: 500 });
    const lease = await client.leaseWorker({ app: 'pause', nodeId: 'svc-2', ttlMs });
    const gen = lease.snowflake('floe') as LeaseSnowflake;
    let deadline = lease.deadlineMono;
    lease.on('renewed', (e: { deadlineMono: number }) => {
      deadline = e.deadlineMono;
    });
    gen.next();
    await new Promise((r) => lease.once('renewed', r));

    for (const n of cluster.nodes) n.signal('SIGSTOP');
    const pausedAt = hrtimeMonotonic();
    const deadlineAtPause = deadline;
    let lastOkMono = 0;
    let thrown: unknown;
    let thrownAt = 0;
    let firstRefusalAt = 0;
    try {
      for (;;) {
        for (let i = 0; i < 1000; i++) {
          try {
            gen.next();
            lastOkMono = hrtimeMonotonic();
          } catch (e) {
            // Inside the last tick before the deadline the lease is still valid: a transient refusal (FS-16).
            if (!(e instanceof LeaseRenewalLateError)) throw e;
            if (firstRefusalAt === 0) firstRefusalAt = hrtimeMonotonic();
            break;
          }
        }
        await tick();
      }
    } catch (e) {
      thrown = e;
      thrownAt = hrtimeMonotonic();
    } finally {
      for (const n of cluster.nodes) n.signal('SIGCONT');
    }
    expect(thrown).toBeInstanceOf(LeaseLostError);
    expect((thrown as LeaseLostError).reason).toBe('deadline');
    // No renewal was acknowledged after the pause: the deadline is the one known at the pause.
    expect(deadline).toBe(deadlineAtPause);
    // The generator stops one tick (1 ms for 'floe') before the deadline: its fast path may run to the end of the
    // tick of its last check. The last ID passed its check before that (lastCheckMono) and was returned right after.
    expect(gen.lastCheckMono).toBeLessThan(deadline - 1);
    expect(lastOkMono).toBeLessThan(deadline + 5);
    // The wall-clock deadline (whole ms) may stop it up to another ms earlier: early is safe.
    expect(firstRefusalAt || thrownAt).toBeGreaterThanOrEqual(deadline - 2);
    expect(thrownAt).toBeGreaterThanOrEqual(firstRefusalAt);
    // The deadline is at most TTL minus the margin after the pause began: the cluster cannot have reassigned the ID.
    expect(deadline).toBeLessThanOrEqual(pausedAt + ttlMs - (ttlMs / 10 + 100));
  }, 120_000);
});
