// Real Redis clients against a real 3-node Floe cluster (separate processes): redis-cli plain and
// -c, ioredis in cluster mode and in sentinel mode, each leasing worker IDs through any node.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cluster } from './harness.js';
import { cliRecord, record, redisCli, startCluster } from './lease-cluster.js';

let cluster: Cluster;
let leader: number;

beforeAll(async () => {
  ({ cluster, leader } = await startCluster(3));
});

afterAll(async () => {
  await cluster?.stopAll();
  cluster?.cleanup();
});

const respOf = (id: number) => cluster.node(id).spec.respPort;
const followers = () => cluster.nodes.filter((n) => n.spec.id !== leader);

describe('redis-cli against a 3-node cluster', () => {
  it('without -c, a follower answers WORKER.ACQUIRE with MOVED naming the leader’s RESP address', async () => {
    for (const f of followers()) {
      const r = await redisCli(['-p', String(f.spec.respPort), 'WORKER.ACQUIRE', 'cli-app', 'host-plain']);
      // redis-cli prints error replies as "(error) ..." on a tty, plain text otherwise.
      expect(r.stdout.trim()).toMatch(new RegExp(`^MOVED \\d+ 127\\.0\\.0\\.1:${respOf(leader)}$`));
    }
    // The MOVED reply changed nothing: the leader has no lease for host-plain.
    const list = await redisCli(['-p', String(respOf(leader)), 'WORKER.LIST', 'cli-app']);
    expect(list.stdout).not.toContain('host-plain');
  });

  it('with -c, WORKER.ACQUIRE sent to a follower follows MOVED to the leader and gets a lease', async () => {
    const f = followers()[0]!;
    const r = await redisCli([
      '-c',
      '-p',
      String(f.spec.respPort),
      'WORKER.ACQUIRE',
      'cli-app',
      'host-c',
      'TTL',
      '30000',
    ]);
    expect(r.code).toBe(0);
    const lease = cliRecord(r.stdout);
    expect(lease.node_id).toBe('host-c');
    expect(lease.app).toBe('cli-app');
    expect(Number(lease.token)).toBeGreaterThan(0);
    expect(lease.ttl_ms).toBe('30000');
    // Renew and release through the other follower, also by following MOVED.
    const g = followers()[1]!;
    const renew = await redisCli([
      '-c',
      '-p',
      String(g.spec.respPort),
      'WORKER.RENEW',
      'cli-app',
      lease.worker_id!,
      lease.token!,
    ]);
    expect(cliRecord(renew.stdout).token).toBe(lease.token);
    const rel = await redisCli([
      '-c',
      '-p',
      String(g.spec.respPort),
      'WORKER.RELEASE',
      'cli-app',
      lease.worker_id!,
      lease.token!,
    ]);
    expect(rel.stdout.trim()).toBe('OK');
  });
});

describe('ioredis against a 3-node cluster', () => {
  it('cluster mode, seeded with one follower: acquire, renew, release reach the leader', async () => {
    const seed = followers()[0]!;
    const c = new Redis.Cluster([{ host: '127.0.0.1', port: seed.spec.respPort }], {
      enableReadyCheck: true,
      redisOptions: { maxRetriesPerRequest: 2 },
    });
    try {
      const lease = record(await c.call('WORKER.ACQUIRE', 'io-cluster', 'host-ioc', 'TTL', '20000'));
      expect(lease.node_id).toBe('host-ioc');
      const renewed = record(await c.call('WORKER.RENEW', 'io-cluster', lease.worker_id!, lease.token!));
      expect(renewed.token).toBe(lease.token);
      expect(Number(renewed.expires_at_ms)).toBeGreaterThanOrEqual(Number(lease.expires_at_ms));
      // The lease is visible on the leader (ioredis routes WORKER.LIST there too).
      const list = (await c.call('WORKER.LIST', 'io-cluster')) as unknown[];
      expect(list.map(record).map((l) => l.node_id)).toEqual(['host-ioc']);
      expect(await c.call('WORKER.RELEASE', 'io-cluster', lease.worker_id!, lease.token!)).toBe('OK');
      expect(await c.call('WORKER.LIST', 'io-cluster')).toEqual([]);
      // ioredis learned the whole topology: one master (the leader) on all 16384 slots.
      const masters = c.nodes('master').map((n) => n.options.port);
      expect(masters).toEqual([cluster.node(leader).spec.respPort]);
    } finally {
      c.disconnect();
    }
  });

  it('sentinel mode, with every node as a sentinel: connects to the leader and leases', async () => {
    // Put the followers first: any node answers SENTINEL GET-MASTER-ADDR-BY-NAME with the leader.
    const sentinels = [...followers(), cluster.node(leader)].map((n) => ({
      host: '127.0.0.1',
      port: n.spec.respPort,
    }));
    const r = new Redis({ sentinels, name: 'floe', maxRetriesPerRequest: 2 });
    try {
      const lease = record(await r.call('WORKER.ACQUIRE', 'io-sentinel', 'host-ios', 'TTL', '20000'));
      expect(lease.node_id).toBe('host-ios');
      // It is connected to the leader: ROLE says master and INFO names the leader's member id.
      expect(((await r.call('ROLE')) as unknown[])[0]).toBe('master');
      expect(await r.info('server')).toContain(`floe_member_id:${leader}`);
      const renewed = record(
        await r.call(
          'WORKER.RENEW',
          'io-sentinel',
          lease.worker_id!,
          lease.token!,
          'BOUND',
          String(Date.now() + 5000),
        ),
      );
      expect(renewed.token).toBe(lease.token);
      expect(renewed.logged).toBe('1');
      expect(await r.call('WORKER.RELEASE', 'io-sentinel', lease.worker_id!, lease.token!)).toBe('OK');
      // A second sentinel-mode client seeded only with a follower finds the same leader.
      const only = new Redis({
        sentinels: [{ host: '127.0.0.1', port: followers()[1]!.spec.respPort }],
        name: 'floe',
        maxRetriesPerRequest: 2,
      });
      try {
        const again = record(await only.call('WORKER.ACQUIRE', 'io-sentinel', 'host-ios', 'TTL', '20000'));
        // Stable worker IDs: the same nodeId gets the same worker ID back after its release.
        expect(again.worker_id).toBe(lease.worker_id);
        expect(Number(again.token)).toBeGreaterThan(Number(lease.token));
        expect(await only.call('WORKER.RELEASE', 'io-sentinel', again.worker_id!, again.token!)).toBe('OK');
      } finally {
        only.disconnect();
      }
    } finally {
      r.disconnect();
    }
  });
});
