import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BackendError } from './backend.js';
import { keyHashSlot } from './crc16.js';
import { FakeBackend, FakeCluster } from './fake-backend.js';
import { clusterNodeId } from './node-id.js';
import { R } from './reply.js';
import { startRespServer } from './server.js';
import { Push, RawClient, type RespErr, startTwoNodes, type TwoNodes } from './test-support.js';

let nodes: TwoNodes;
let lp: number; // leader port
let fp: number; // follower port
const clients: RawClient[] = [];

beforeEach(async () => {
  nodes = await startTwoNodes();
  lp = nodes.leader.address.port;
  fp = nodes.follower.address.port;
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await nodes.close();
});

async function client(port: number): Promise<RawClient> {
  const c = await RawClient.connect(port);
  clients.push(c);
  return c;
}

const errText = (v: unknown): string => (v as RespErr).message;

describe('MOVED: followers send writes to the leader', () => {
  it('answers keyed writes on a follower with MOVED <slot(app)> <leader>', async () => {
    const c = await client(fp);
    expect(errText(await c.call('WORKER.ACQUIRE', 'orders', 'h1'))).toBe(
      `MOVED ${keyHashSlot('orders')} 127.0.0.1:${lp}`,
    );
    expect(errText(await c.call('WORKER.RENEW', '{orders}', '0', '1'))).toBe(
      `MOVED ${keyHashSlot('orders')} 127.0.0.1:${lp}`,
    );
    expect(nodes.cluster.calls).toEqual([]); // the backend was never asked
  });

  it('keyed reads are MOVED too unless the connection sent READONLY; keyless commands run anywhere', async () => {
    const c = await client(fp);
    expect(errText(await c.call('WORKER.LIST', 'orders'))).toMatch(/^MOVED /);
    expect(await c.call('READONLY')).toBe('OK');
    expect(await c.call('WORKER.LIST', 'orders')).toEqual([]);
    expect(errText(await c.call('WORKER.ACQUIRE', 'orders', 'h1'))).toMatch(/^MOVED /); // writes still move
    expect(await c.call('READWRITE')).toBe('OK');
    expect(errText(await c.call('WORKER.LIST', 'orders'))).toMatch(/^MOVED /);
    const decoded = (await c.call(
      'SNOWFLAKE.DECODE',
      '1541815603606036480',
      'LAYOUT',
      'twitter',
    )) as string[];
    expect(decoded).toEqual([
      'id',
      '1541815603606036480',
      'layout',
      'twitter',
      'timestamp_ms',
      '1656432460105',
      'time',
      '2022-06-28T16:07:40.105Z',
      'datacenter_id',
      '11',
      'worker_id',
      '26',
      'sequence',
      '0',
    ]);
  });

  it('answers CLUSTERDOWN while no leader is known', async () => {
    nodes.cluster.setLeader(undefined);
    const c = await client(fp);
    expect(errText(await c.call('WORKER.ACQUIRE', 'orders', 'h1'))).toBe('CLUSTERDOWN The cluster is down');
    expect(await c.call('CLUSTER', 'SLOTS')).toEqual([]);
    expect(String(await c.call('CLUSTER', 'INFO'))).toContain('cluster_state:fail');
  });

  it('turns a NotLeaderError from the backend (leadership lost mid-call) into MOVED to its hint', async () => {
    const cluster = new FakeCluster();
    const backend = new FakeBackend(cluster, 1);
    backend.workerAcquire = () => {
      const err = Object.assign(new Error('node 1 is not the leader'), {
        name: 'NotLeaderError',
        leader: { id: 2, respAddr: '10.0.0.2:7379' },
      });
      return Promise.reject(err);
    };
    backend.workerRenew = () => Promise.reject(new BackendError('TRYAGAIN', 'no quorum yet'));
    const server = await startRespServer({ backend });
    cluster.setMember(1, `127.0.0.1:${server.address.port}`);
    cluster.setLeader(1);
    try {
      const c = await client(server.address.port);
      expect(errText(await c.call('WORKER.ACQUIRE', 'orders', 'h1'))).toBe(
        `MOVED ${keyHashSlot('orders')} 10.0.0.2:7379`,
      );
      expect(errText(await c.call('WORKER.RENEW', 'orders', '1', '1'))).toBe('TRYAGAIN no quorum yet');
    } finally {
      await server.close();
    }
  });

  it('a command added through `commands` gets the same treatment (one table entry per command)', async () => {
    const counters = new Map<string, number>();
    const cluster = new FakeCluster();
    const incr = {
      name: 'TEST.INCR',
      arity: 2,
      flags: ['write' as const, 'fast' as const],
      firstKey: 1,
      group: 'floe',
      summary: 'test counter',
      handler: (_ctx: unknown, args: Buffer[]) => {
        const k = args[1]!.toString();
        counters.set(k, (counters.get(k) ?? 0) + 1);
        return R.int(counters.get(k)!);
      },
    };
    const a = await startRespServer({ backend: cluster.backend(1), commands: [incr] });
    const b = await startRespServer({ backend: cluster.backend(2), commands: [incr] });
    cluster.setMember(1, `127.0.0.1:${a.address.port}`);
    cluster.setMember(2, `127.0.0.1:${b.address.port}`);
    cluster.setLeader(1);
    try {
      const ca = await client(a.address.port);
      const cb = await client(b.address.port);
      expect(await ca.call('TEST.INCR', 'k')).toBe(1);
      expect(await ca.call('TEST.INCR', 'k')).toBe(2);
      expect(errText(await cb.call('TEST.INCR', 'k'))).toBe(
        `MOVED ${keyHashSlot('k')} 127.0.0.1:${a.address.port}`,
      );
      expect(await ca.call('COMMAND', 'GETKEYS', 'TEST.INCR', 'k')).toEqual(['k']);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

describe('CLUSTER presentation', () => {
  it('CLUSTER SLOTS: the leader owns 0-16383, the follower is its replica', async () => {
    const c = await client(fp);
    expect(await c.call('CLUSTER', 'SLOTS')).toEqual([
      [0, 16383, ['127.0.0.1', lp, clusterNodeId(1), []], ['127.0.0.1', fp, clusterNodeId(2), []]],
    ]);
  });

  it('CLUSTER NODES / MYID / INFO / SHARDS / KEYSLOT', async () => {
    const c = await client(fp);
    const myid = await c.call('CLUSTER', 'MYID');
    expect(myid).toBe(clusterNodeId(2));
    expect(myid).toMatch(/^[0-9a-f]{40}$/);
    // Stable: SHA-1 of the member id, the same on every node and across restarts.
    expect(clusterNodeId(1)).toBe('093a1db07bd7a5e3c5aeec9b3270d5e2b5b073cb');
    const lines = String(await c.call('CLUSTER', 'NODES'))
      .trim()
      .split('\n');
    expect(lines).toEqual([
      `${clusterNodeId(1)} 127.0.0.1:${lp}@0 master - 0 0 2 connected 0-16383`,
      `${clusterNodeId(2)} 127.0.0.1:${fp}@0 myself,slave ${clusterNodeId(1)} 0 0 2 connected`,
    ]);
    const info = String(await c.call('CLUSTER', 'INFO'));
    expect(info).toContain('cluster_state:ok\r\n');
    expect(info).toContain('cluster_slots_assigned:16384\r\n');
    expect(info).toContain('cluster_known_nodes:2\r\n');
    const shards = (await c.call('CLUSTER', 'SHARDS')) as unknown[][];
    expect(shards[0]![0]).toBe('slots');
    expect(shards[0]![1]).toEqual([0, 16383]);
    expect(await c.call('CLUSTER', 'KEYSLOT', 'foo')).toBe(12182);
    expect(await c.call('CLUSTER', 'KEYSLOT', '{foo}bar')).toBe(12182);
  });

  it('ROLE and INFO replication on leader and follower', async () => {
    const l = await client(lp);
    const f = await client(fp);
    const offset = nodes.cluster.appliedIndex;
    expect(await l.call('ROLE')).toEqual(['master', offset, [['127.0.0.1', String(fp), String(offset)]]]);
    expect(await f.call('ROLE')).toEqual(['slave', '127.0.0.1', lp, 'connected', offset]);
    const info = String(await f.call('INFO'));
    for (const line of [
      '# Server',
      'redis_version:7.0.0',
      'role:slave',
      `master_port:${lp}`,
      'cluster_enabled:1',
    ]) {
      expect(info).toContain(`${line}\r\n`);
    }
    expect(info).toMatch(/floe_version:\d+\.\d+\.\d+/);
    expect(String(await l.call('INFO', 'replication'))).toMatch(/^# Replication\r\nrole:master\r\n/);
    expect(await l.call('INFO', 'nosuchsection')).toBe('');
  });

  it('standalone mode refuses CLUSTER as Redis does', async () => {
    const cluster = new FakeCluster();
    const s = await startRespServer({ backend: cluster.backend(1), mode: 'standalone' });
    try {
      const c = await client(s.address.port);
      expect(errText(await c.call('CLUSTER', 'SLOTS'))).toBe(
        'ERR This instance has cluster support disabled',
      );
      expect(String(await c.call('INFO', 'cluster'))).toContain('cluster_enabled:0');
    } finally {
      await s.close();
    }
  });
});

describe('SENTINEL presentation', () => {
  it('GET-MASTER-ADDR-BY-NAME returns the leader from any node; unknown names get null', async () => {
    const f = await client(fp);
    expect(await f.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', 'floe')).toEqual(['127.0.0.1', String(lp)]);
    expect(await f.call('SENTINEL', 'get-master-addr-by-name', 'other')).toBeNull();
    expect(errText(await f.call('SENTINEL', 'MASTER', 'other'))).toBe('ERR No such master with that name');
  });

  it('MASTER / MASTERS / REPLICAS / SLAVES / SENTINELS as field lists (maps in RESP3)', async () => {
    const f = await client(fp);
    const master = (await f.call('SENTINEL', 'MASTER', 'floe')) as string[];
    const m = new Map<string, string>();
    for (let i = 0; i < master.length; i += 2) m.set(master[i]!, master[i + 1]!);
    expect(m.get('name')).toBe('floe');
    expect(m.get('ip')).toBe('127.0.0.1');
    expect(m.get('port')).toBe(String(lp));
    expect(m.get('flags')).toBe('master');
    expect(m.get('num-slaves')).toBe('1');
    expect(await f.call('SENTINEL', 'MASTERS')).toEqual([master]);
    const replicas = (await f.call('SENTINEL', 'REPLICAS', 'floe')) as string[][];
    expect(replicas).toHaveLength(1);
    expect(replicas[0]!.slice(0, 6)).toEqual([
      'name',
      `127.0.0.1:${fp}`,
      'ip',
      '127.0.0.1',
      'port',
      String(fp),
    ]);
    expect(await f.call('SENTINEL', 'SLAVES', 'floe')).toEqual(replicas);
    const sentinels = (await f.call('SENTINEL', 'SENTINELS', 'floe')) as string[][];
    expect(sentinels.map((s) => s[s.indexOf('port') + 1])).toEqual([String(lp)]); // not itself
    await f.call('HELLO', '3');
    const m3 = (await f.call('SENTINEL', 'MASTER', 'floe')) as Map<string, string>;
    expect(m3.get('port')).toBe(String(lp));
  });

  it('while no leader is known: null address, master flagged s_down', async () => {
    nodes.cluster.setLeader(undefined);
    const f = await client(fp);
    expect(await f.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', 'floe')).toBeNull();
    const master = (await f.call('SENTINEL', 'MASTER', 'floe')) as string[];
    expect(master[master.indexOf('flags') + 1]).toBe('master,s_down,o_down');
    expect(await f.call('ROLE')).toEqual(['slave', '', 0, 'connect', -1]);
  });

  it('publishes +switch-master to subscribers (channel and pattern, RESP2 and RESP3) when the leader moves', async () => {
    const s2 = await client(fp);
    expect(await s2.call('SUBSCRIBE', '+switch-master')).toEqual(['subscribe', '+switch-master', 1]);
    expect(errText(await s2.call('WORKER.LIST', 'x'))).toBe(
      "ERR Can't execute 'worker.list': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
    );
    expect(await s2.call('PING')).toEqual(['pong', '']);
    const s3 = await client(lp);
    await s3.call('HELLO', '3');
    expect(await s3.call('PSUBSCRIBE', '*switch*', 'other')).toEqual(new Push(['psubscribe', '*switch*', 1]));
    expect(await s3.read()).toEqual(new Push(['psubscribe', 'other', 2]));
    expect(await s3.call('PING')).toBe('PONG'); // RESP3 allows any command while subscribed
    nodes.cluster.setLeader(2);
    const message = `floe 127.0.0.1 ${lp} 127.0.0.1 ${fp}`;
    expect(await s2.read()).toEqual(['message', '+switch-master', message]);
    expect(await s3.read()).toEqual(new Push(['pmessage', '*switch*', '+switch-master', message]));
    expect(await s2.call('UNSUBSCRIBE')).toEqual(['unsubscribe', '+switch-master', 0]);
    expect(await s2.call('PING')).toBe('PONG');
  });
});

describe('introspection', () => {
  it('COMMAND COUNT / INFO / DOCS / LIST describe the table', async () => {
    const c = await client(lp);
    const count = (await c.call('COMMAND', 'COUNT')) as number;
    expect(count).toBeGreaterThan(20);
    expect(((await c.call('COMMAND')) as unknown[]).length).toBe(count);
    const [acquire, nope] = (await c.call('COMMAND', 'INFO', 'worker.acquire', 'nope')) as unknown[][];
    expect(acquire!.slice(0, 6)).toEqual(['worker.acquire', -3, ['write', 'denyoom'], 1, 1, 1]);
    expect(nope).toBeNull();
    const [ping] = (await c.call('COMMAND', 'INFO', 'ping')) as unknown[][];
    expect(ping!.slice(0, 6)).toEqual(['ping', -1, ['fast', 'stale', 'loading'], 0, 0, 0]);
    const docs = (await c.call('COMMAND', 'DOCS', 'worker.renew')) as unknown[];
    expect(docs[0]).toBe('worker.renew');
    expect(docs[1]).toContain('summary');
    expect(await c.call('COMMAND', 'LIST')).toContain('snowflake.decode');
    expect(await c.call('COMMAND', 'GETKEYS', 'WORKER.ACQUIRE', 'orders', 'h1')).toEqual(['orders']);
    expect(errText(await c.call('COMMAND', 'GETKEYS', 'PING'))).toBe('ERR The command has no key arguments');
  });

  it('CONFIG GET: known parameters by glob, nothing for unknown ones', async () => {
    const c = await client(lp);
    expect(await c.call('CONFIG', 'GET', 'maxmemory')).toEqual([]);
    expect(await c.call('CONFIG', 'GET', 'cluster-announce-*')).toEqual([]);
    expect(await c.call('CONFIG', 'GET', 'MAXCLIENTS')).toEqual(['maxclients', '10000']);
    expect(await c.call('CONFIG', 'GET', 'save', 'appendonly')).toEqual(['save', '', 'appendonly', 'no']);
  });

  it('CLIENT ID / SETNAME / GETNAME / SETINFO / INFO / LIST, HELLO reply fields, RESET', async () => {
    const c = await client(lp);
    const id = await c.call('CLIENT', 'ID');
    expect(await c.call('CLIENT', 'GETNAME')).toBeNull();
    expect(errText(await c.call('CLIENT', 'SETNAME', 'a b'))).toBe(
      'ERR Client names cannot contain spaces, newlines or special characters.',
    );
    expect(await c.call('CLIENT', 'SETNAME', 'svc')).toBe('OK');
    expect(await c.call('CLIENT', 'SETINFO', 'LIB-NAME', 'ioredis')).toBe('OK');
    expect(await c.call('CLIENT', 'SETINFO', 'lib-ver', '6.0.0')).toBe('OK');
    expect(errText(await c.call('CLIENT', 'SETINFO', 'color', 'red'))).toBe(
      "ERR Unrecognized option 'color'",
    );
    const info = String(await c.call('CLIENT', 'INFO'));
    expect(info).toMatch(
      new RegExp(
        `^id=${id} addr=127\\.0\\.0\\.1:\\d+ .* name=svc .* resp=2 lib-name=ioredis lib-ver=6\\.0\\.0\\n$`,
      ),
    );
    expect(String(await c.call('CLIENT', 'LIST'))).toContain(`id=${id} `);
    const hello = (await c.call('HELLO', '3')) as Map<string, unknown>;
    expect([...hello.keys()]).toEqual(['server', 'version', 'proto', 'id', 'mode', 'role', 'modules']);
    expect(hello.get('server')).toBe('floe');
    expect(hello.get('role')).toBe('master');
    expect(hello.get('mode')).toBe('cluster');
    expect(hello.get('id')).toBe(id);
    expect(errText(await c.call('HELLO', '4'))).toBe('NOPROTO unsupported protocol version');
    expect(errText(await c.call('HELLO', 'x'))).toBe(
      'ERR Protocol version is not an integer or out of range',
    );
    expect(errText(await c.call('HELLO', '3', 'SETNAME'))).toBe("ERR Syntax error in HELLO option 'SETNAME'");
    expect(await c.call('RESET')).toBe('RESET');
    expect(await c.call('CLIENT', 'GETNAME')).toBeNull();
    const f = await client(fp);
    expect(((await f.call('HELLO')) as string[])[11]).toBe('replica');
  });

  it('SNOWFLAKE.DECODE errors name the problem', async () => {
    const c = await client(lp);
    expect(errText(await c.call('SNOWFLAKE.DECODE', 'abc'))).toMatch(/^ERR invalid id "abc": not a decimal/);
    expect(errText(await c.call('SNOWFLAKE.DECODE', '1', 'LAYOUT', 'nope'))).toMatch(
      /^ERR unknown layout "nope"; known layouts: floe, twitter, sonyflake, baidu/,
    );
    expect(errText(await c.call('SNOWFLAKE.DECODE', '1', 'SHAPE', 'x'))).toBe('ERR syntax error');
  });
});

describe('worker leases through RESP2 and RESP3', () => {
  it('ACQUIRE / RENEW / LIST / RELEASE: field lists in RESP2, maps with integers in RESP3', async () => {
    const c2 = await client(lp);
    const flat = (await c2.call('WORKER.ACQUIRE', 'orders', 'host-a', 'TTL', '5000')) as string[];
    expect(flat.filter((_, i) => i % 2 === 0)).toEqual([
      'worker_id',
      'datacenter_id',
      'token',
      'expires_at_ms',
      'high_water_ms',
      'ttl_ms',
      'app',
      'node_id',
    ]);
    expect(flat[1]).toBe('0');
    expect(flat[11]).toBe('5000');
    const c3 = await client(lp);
    await c3.call('HELLO', '3');
    const lease = (await c3.call('WORKER.ACQUIRE', 'orders', 'host-b')) as Map<string, unknown>;
    expect(lease.get('worker_id')).toBe(1);
    expect(lease.get('node_id')).toBe('host-b');
    const token = String(lease.get('token'));
    const renewed = (await c3.call('WORKER.RENEW', 'orders', '1', token, 'BOUND', '123')) as Map<
      string,
      unknown
    >;
    expect(renewed.get('bound_ms')).toBe(123);
    const list = (await c3.call('WORKER.LIST', 'orders')) as Map<string, unknown>[];
    expect(list.map((l) => l.get('node_id'))).toEqual(['host-a', 'host-b']);
    expect(await c3.call('WORKER.RELEASE', 'orders', '1', token, 'LAST', '456')).toBe('OK');
    expect(errText(await c3.call('WORKER.RELEASE', 'orders', '1', token))).toMatch(
      /^ERR worker 1 of app 'orders'/,
    );
    // The next holder of worker 1 starts above what the previous holder said it used.
    const again = (await c3.call('WORKER.ACQUIRE', 'orders', 'host-c')) as Map<string, unknown>;
    expect(again.get('worker_id')).toBe(1);
    expect(again.get('high_water_ms')).toBe(456);
  });
});
