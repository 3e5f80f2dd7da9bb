/**
 * Real Redis client libraries against the RESP server: ioredis (plain, pipeline, cluster, sentinel, RESP2 and
 * RESP3) and node-redis (client, cluster, sentinel). Two server instances share one fake cluster view:
 * member 1 is the leader, member 2 a follower.
 */
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { createClient, createCluster, createSentinel } from 'redis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { keyHashSlot } from './crc16.js';
import { startTwoNodes, type TwoNodes } from './test-support.js';

let nodes: TwoNodes;
let lp: number;
let fp: number;
const cleanups: (() => unknown)[] = [];

beforeEach(async () => {
  nodes = await startTwoNodes();
  lp = nodes.leader.address.port;
  fp = nodes.follower.address.port;
});
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
  await nodes.close();
});

function ioredis(opts: RedisOptions): Redis {
  const r = new Redis({ host: '127.0.0.1', maxRetriesPerRequest: 1, ...opts });
  r.on('error', () => {});
  cleanups.push(() => r.disconnect());
  return r;
}

/** Field list → object (what HGETALL-style RESP2 replies look like to a client). */
function pairs(reply: unknown): Record<string, string | number> {
  const a = reply as (string | number)[];
  const out: Record<string, string | number> = {};
  for (let i = 0; i < a.length; i += 2) out[String(a[i])] = a[i + 1]!;
  return out;
}

describe('ioredis', () => {
  it('plain connection (ioredis 6 negotiates RESP3 with HELLO 3): PING, WORKER.*, INFO ready check', async () => {
    const r = ioredis({ port: lp });
    expect(await r.ping()).toBe('PONG');
    const lease = pairs(await r.call('WORKER.ACQUIRE', 'orders', 'io-1'));
    expect(lease.worker_id).toBe(0);
    expect(lease.node_id).toBe('io-1');
    const list = (await r.call('WORKER.LIST', 'orders')) as unknown[];
    expect(list).toHaveLength(1);
    expect(await r.call('CLIENT', 'GETNAME')).toBeNull();
    const info = String(await r.call('CLIENT', 'INFO'));
    expect(info).toContain('resp=3');
    expect(info).toContain('lib-name=ioredis');
  });

  it('RESP2 (protocol: 2): records are HGETALL-style field lists of strings', async () => {
    const r = ioredis({ port: lp, protocol: 2 });
    const lease = pairs(await r.call('WORKER.ACQUIRE', 'orders', 'io-2', 'TTL', '3000'));
    expect(lease.worker_id).toBe('0');
    expect(lease.ttl_ms).toBe('3000');
    expect(String(await r.call('CLIENT', 'INFO'))).toContain('resp=2');
  });

  it('replyMapping resp3: records arrive as objects with numbers', async () => {
    const r = ioredis({ port: lp, replyMapping: 'resp3' });
    const lease = (await r.call('WORKER.ACQUIRE', 'orders', 'io-3')) as Record<string, unknown>;
    expect(lease.worker_id).toBe(0);
    expect(lease.node_id).toBe('io-3');
  });

  it('a pipeline of 1,000 commands gets 1,000 replies in order', async () => {
    const r = ioredis({ port: lp });
    const p = r.pipeline();
    for (let i = 0; i < 1000; i++) {
      if (i % 10 === 0) p.call('WORKER.ACQUIRE', 'pipe', `inst-${i}`);
      else p.echo(`m${i}`);
    }
    const results = (await p.exec())!;
    expect(results).toHaveLength(1000);
    results.forEach(([err, value], i) => {
      expect(err).toBeNull();
      if (i % 10 === 0) expect(pairs(value).node_id).toBe(`inst-${i}`);
      else expect(value).toBe(`m${i}`);
    });
  });

  it('a follower answers writes with MOVED (plain client sees the error)', async () => {
    const r = ioredis({ port: fp });
    await expect(r.call('WORKER.ACQUIRE', 'orders', 'x')).rejects.toThrow(
      `MOVED ${keyHashSlot('orders')} 127.0.0.1:${lp}`,
    );
  });

  it('cluster mode: discovers the leader through a follower, sends WORKER.* there, follows MOVED after failover', async () => {
    const c = new Cluster([{ host: '127.0.0.1', port: fp }], { redisOptions: { maxRetriesPerRequest: 1 } });
    c.on('error', () => {});
    cleanups.push(() => c.disconnect());
    const lease = pairs(await c.call('WORKER.ACQUIRE', 'orders', 'cl-1'));
    expect(lease.node_id).toBe('cl-1');
    expect(c.nodes('master').map((n) => n.options.port)).toEqual([lp]);
    expect(c.nodes('slave').map((n) => n.options.port)).toEqual([fp]);
    // Leadership moves to member 2: the old leader answers MOVED and ioredis follows it.
    nodes.cluster.setLeader(2);
    const before = nodes.follower.stats().totalCommands;
    const lease2 = pairs(await c.call('WORKER.ACQUIRE', 'orders', 'cl-2'));
    expect(lease2.node_id).toBe('cl-2');
    expect(nodes.follower.stats().totalCommands).toBeGreaterThan(before);
  });

  it('sentinel mode: asks any node for master "floe" and connects to the leader (role check passes)', async () => {
    const r = ioredis({ sentinels: [{ host: '127.0.0.1', port: fp }], name: 'floe' });
    const lease = pairs(await r.call('WORKER.ACQUIRE', 'orders', 'sen-1'));
    expect(lease.node_id).toBe('sen-1');
    expect(r.stream.remotePort).toBe(lp);
    expect(((await r.call('ROLE')) as unknown[])[0]).toBe('master');
  });
});

describe('node-redis', () => {
  it('createClient (RESP3 by default): PING, WORKER.ACQUIRE as an object, MOVED from a follower', async () => {
    const c = createClient({ socket: { host: '127.0.0.1', port: lp } });
    c.on('error', () => {});
    await c.connect();
    cleanups.push(() => c.destroy());
    expect(await c.ping()).toBe('PONG');
    const lease = (await c.sendCommand(['WORKER.ACQUIRE', 'orders', 'nr-1'])) as Record<string, unknown>;
    expect(lease.node_id).toBe('nr-1');
    expect(lease.worker_id).toBe(0);
    const f = createClient({ socket: { host: '127.0.0.1', port: fp }, RESP: 2 });
    f.on('error', () => {});
    await f.connect();
    cleanups.push(() => f.destroy());
    await expect(f.sendCommand(['WORKER.ACQUIRE', 'orders', 'nr-2'])).rejects.toThrow(/^MOVED /);
  });

  it('createCluster: discovers the leader and routes keyed commands to it', async () => {
    const c = createCluster({ rootNodes: [{ socket: { host: '127.0.0.1', port: fp } }] });
    c.on('error', () => {});
    await c.connect();
    cleanups.push(() => c.destroy());
    expect(c.masters.map((m) => m.port)).toEqual([lp]);
    const lease = (await c.sendCommand('orders', false, ['WORKER.ACQUIRE', 'orders', 'nc-1'])) as Record<
      string,
      unknown
    >;
    expect(lease.node_id).toBe('nc-1');
  });

  it('createSentinel: finds the leader through a follower acting as sentinel', async () => {
    const s = createSentinel({ name: 'floe', sentinelRootNodes: [{ host: '127.0.0.1', port: fp }] });
    s.on('error', () => {});
    await s.connect();
    cleanups.push(() => s.destroy());
    const lease = (await s.sendCommand(false, ['WORKER.ACQUIRE', 'orders', 'ns-1'])) as Record<
      string,
      unknown
    >;
    expect(lease.node_id).toBe('ns-1');
    expect(((await s.sendCommand(false, ['ROLE'])) as unknown[])[0]).toBe('master');
  });
});
