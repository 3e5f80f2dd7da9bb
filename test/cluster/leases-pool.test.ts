// Lease lifecycle on a real 3-node cluster: an abandoned lease is reclaimed after its TTL and its
// worker ID comes back above the previous holder's bound; a 10-bit pool holds exactly 1,024
// instances and then refuses with pool_exhausted naming the pool.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, http, until } from './harness.js';
import { record, startCluster } from './lease-cluster.js';

let cluster: Cluster;
let leader: number;
let redis: Redis;

beforeAll(async () => {
  ({ cluster, leader } = await startCluster(3));
  redis = new Redis({ host: '127.0.0.1', port: cluster.node(leader).spec.respPort, maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  redis?.disconnect();
  await cluster?.stopAll();
  cluster?.cleanup();
});

const listOf = async (app: string) => ((await redis.call('WORKER.LIST', app)) as unknown[]).map(record);

describe('abandoned leases', () => {
  it('a lease renewed with BOUND and then abandoned is reclaimed after its TTL; the same nodeId gets its worker ID back above the bound', async () => {
    // Another lease on a different worker ID keeps the pool non-trivial.
    const other = record(await redis.call('WORKER.ACQUIRE', 'abandon', 'bystander', 'TTL', '60000'));
    const lease = record(await redis.call('WORKER.ACQUIRE', 'abandon', 'host-a', 'TTL', '1000'));
    expect(lease.worker_id).not.toBe(other.worker_id);
    const bound = Date.now() + 20_000;
    const renewed = record(
      await redis.call('WORKER.RENEW', 'abandon', lease.worker_id!, lease.token!, 'BOUND', String(bound)),
    );
    expect(renewed.logged).toBe('1');
    const renewedAt = performance.now();
    // Stop renewing. Poll the leader's list until the lease is gone (bounded).
    await until(
      'the abandoned lease to be reclaimed',
      async () => ((await listOf('abandon')).some((l) => l.node_id === 'host-a') ? undefined : true),
      15_000,
      100,
    );
    // Not before its TTL (measured from our renewal, the leader's deadline is later).
    expect(performance.now() - renewedAt).toBeGreaterThanOrEqual(1000);
    // The old token is now refused.
    await expect(redis.call('WORKER.RENEW', 'abandon', lease.worker_id!, lease.token!)).rejects.toThrow(
      /not_held|stale_token/,
    );
    // The bystander was untouched.
    expect((await listOf('abandon')).map((l) => l.node_id)).toEqual(['bystander']);

    const again = record(await redis.call('WORKER.ACQUIRE', 'abandon', 'host-a', 'TTL', '1000'));
    expect(again.worker_id).toBe(lease.worker_id);
    expect(Number(again.token)).toBeGreaterThan(Number(lease.token));
    expect(Number(again.high_water_ms)).toBeGreaterThanOrEqual(bound);
    // The same through HTTP: the record shows the mark.
    const w = await http<{ highWaterMs: number; token: number }>(
      cluster.node(leader).http,
      'GET',
      `/v1/apps/abandon/workers/${again.worker_id}`,
    );
    expect(w.status).toBe(200);
    expect(w.body.highWaterMs).toBeGreaterThanOrEqual(bound);
    expect(await redis.call('WORKER.RELEASE', 'abandon', again.worker_id!, again.token!)).toBe('OK');
  });

  it('a released lease’s LAST timestamp becomes the next holder’s floor, also for another nodeId', async () => {
    await http(cluster.node(leader).http, 'PUT', '/v1/apps/tiny/pool', { bits: 1 });
    const a = record(await redis.call('WORKER.ACQUIRE', 'tiny', 'a', 'TTL', '60000'));
    const b = record(await redis.call('WORKER.ACQUIRE', 'tiny', 'b', 'TTL', '60000'));
    const last = Date.now() + 30_000;
    expect(await redis.call('WORKER.RELEASE', 'tiny', a.worker_id!, a.token!, 'LAST', String(last))).toBe(
      'OK',
    );
    // Pool of 2 with b holding one: c must get a's worker ID.
    const c = record(await redis.call('WORKER.ACQUIRE', 'tiny', 'c', 'TTL', '60000'));
    expect(c.worker_id).toBe(a.worker_id);
    expect(Number(c.high_water_ms)).toBeGreaterThanOrEqual(last);
    for (const l of [b, c]) await redis.call('WORKER.RELEASE', 'tiny', l.worker_id!, l.token!);
  });
});

describe('pool capacity', () => {
  it('1,024 instances fill a 10-bit pool (pipelined); the next acquire is refused with pool_exhausted naming the pool', async () => {
    const cfg = await http<{ ok: boolean }>(cluster.node(leader).http, 'PUT', '/v1/apps/fleet/pool', {
      bits: 10,
    });
    expect(cfg.status).toBe(200);
    const pipe = redis.pipeline();
    for (let i = 0; i < 1024; i++) pipe.call('WORKER.ACQUIRE', 'fleet', `instance-${i}`, 'TTL', '120000');
    const results = (await pipe.exec()) ?? [];
    expect(results).toHaveLength(1024);
    const ids = new Set<number>();
    for (const [err, value] of results) {
      expect(err).toBeNull();
      ids.add(Number(record(value).worker_id));
    }
    expect(ids.size).toBe(1024);
    expect(Math.min(...ids)).toBe(0);
    expect(Math.max(...ids)).toBe(1023);

    // RESP: the 1,025th instance.
    await expect(redis.call('WORKER.ACQUIRE', 'fleet', 'instance-1024')).rejects.toThrow(
      /pool_exhausted.*fleet|fleet.*pool_exhausted/,
    );
    const err = await redis.call('WORKER.ACQUIRE', 'fleet', 'instance-1024').catch((e: Error) => e.message);
    expect(err).toMatch(/1,?024/); // names the pool size
    // HTTP through a follower (307 to the leader): 503 pool_exhausted.
    const follower = cluster.nodes.find((n) => n.spec.id !== leader)!;
    const h = await http<{ error: string; message: string }>(
      follower.http,
      'POST',
      '/v1/apps/fleet/workers/acquire',
      {
        nodeId: 'instance-1025',
      },
    );
    expect(h.status).toBe(503);
    expect(h.body.error).toBe('pool_exhausted');
    expect(h.body.message).toContain('fleet');
    // All 1,024 are listed, on a follower too (HTTP, linearizable read).
    const list = await http<{ leases: unknown[] }>(follower.http, 'GET', '/v1/apps/fleet/workers');
    expect(list.status).toBe(200);
    expect(list.body.leases).toHaveLength(1024);
    // Releasing one makes room for exactly one more.
    const first = record(results[0]![1]);
    expect(await redis.call('WORKER.RELEASE', 'fleet', first.worker_id!, first.token!)).toBe('OK');
    const late = record(await redis.call('WORKER.ACQUIRE', 'fleet', 'instance-1024'));
    expect(late.worker_id).toBe(first.worker_id);
  });
});
