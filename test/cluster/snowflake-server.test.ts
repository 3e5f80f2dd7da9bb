// Server-side Snowflake on a real 3-node cluster: every member leases its own worker ID per key
// (through its own HTTP API, as a member) and serves SNOWFLAKE.NEXT without MOVED; IDs are unique
// across members and across a kill -9 and restart of a member; Leaf's /api/snowflake/get path; and
// the member's leases still work once users (auth) exist.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decode } from '../../src/id/index.js';
import { type Cluster, http } from './harness.js';
import { cliRecord, redisCli, startCluster } from './lease-cluster.js';

let cluster: Cluster;
let leader: number;

beforeAll(async () => {
  ({ cluster, leader } = await startCluster(3));
});

afterAll(async () => {
  await cluster?.stopAll();
  cluster?.cleanup();
});

const portOf = (id: number) => cluster.node(id).spec.respPort;

async function nextFrom(id: number, key: string, count: number, auth?: [string, string]): Promise<bigint[]> {
  // stringNumbers: 64-bit IDs do not fit a JavaScript number.
  const r = new Redis({
    port: portOf(id),
    host: '127.0.0.1',
    maxRetriesPerRequest: 1,
    stringNumbers: true,
    lazyConnect: true,
    ...(auth ? { username: auth[0], password: auth[1] } : {}),
  });
  r.on('error', () => {});
  await r.connect();
  try {
    const ids = (await r.call('SNOWFLAKE.NEXT', key, 'COUNT', String(count))) as (number | string)[];
    return ids.map((x) => BigInt(x));
  } finally {
    r.disconnect();
  }
}

describe('server-side Snowflake (SNOWFLAKE.NEXT)', () => {
  it('every member serves IDs from its own worker ID: unique across members, increasing per member', async () => {
    const created = await redisCli([
      '-c',
      '-p',
      String(portOf(leader)),
      'SNOWFLAKE.CREATE',
      'ids',
      'LAYOUT',
      'twitter',
    ]);
    expect(cliRecord(created.stdout)).toMatchObject({ key: 'ids', layout: 'twitter', created: '1' });
    const per = new Map<number, bigint[]>();
    for (const n of cluster.nodes) per.set(n.spec.id, await nextFrom(n.spec.id, 'ids', 2000));
    const all = [...per.values()].flat();
    expect(new Set(all).size).toBe(6000);
    const workers = new Set<string>();
    for (const ids of per.values()) {
      for (let i = 1; i < ids.length; i++) expect(ids[i]!).toBeGreaterThan(ids[i - 1]!);
      const parts = ids.map((id) => decode(id, 'twitter'));
      const w = new Set(parts.map((p) => `${p.datacenter}/${p.worker}`));
      expect(w.size).toBe(1); // one worker ID per member
      workers.add([...w][0]!);
    }
    expect(workers.size).toBe(3);
    // A follower answers without MOVED, and single IDs come back as an integer.
    const f = cluster.nodes.find((n) => n.spec.id !== leader)!;
    const one = await redisCli(['-p', String(f.spec.respPort), 'SNOWFLAKE.NEXT', 'ids']);
    expect(one.stdout.trim()).toMatch(/^\d+$/);
  });

  it('a member killed with kill -9 and restarted never repeats an ID', async () => {
    const f = cluster.nodes.find((n) => n.spec.id !== leader)!;
    const before = await nextFrom(f.spec.id, 'ids', 5000);
    await f.kill9();
    f.start();
    let after: bigint[] | undefined;
    for (let i = 0; i < 100 && !after; i++) {
      try {
        after = await nextFrom(f.spec.id, 'ids', 5000);
      } catch {
        await new Promise((r) => setTimeout(r, 200)); // the restarted process is still starting
      }
    }
    expect(after).toBeDefined();
    const seen = new Set(before);
    for (const id of after!) expect(seen.has(id)).toBe(false);
    expect(after![0]!).toBeGreaterThan(before.at(-1)!);
  }, 60_000);

  it("Leaf's /api/snowflake/get/{key} answers plain text on any member; an unknown key is Leaf's 500", async () => {
    const f = cluster.nodes.find((n) => n.spec.id !== leader)!;
    const res = await fetch(`http://${f.http}/api/snowflake/get/ids?count=3`, { redirect: 'manual' });
    expect(res.status).toBe(200);
    const ids = (await res.text()).split('\n').map(BigInt);
    expect(ids).toHaveLength(3);
    expect(ids[1]! > ids[0]! && ids[2]! > ids[1]!).toBe(true);
    const unknown = await fetch(`http://${f.http}/api/snowflake/get/none`);
    expect(unknown.status).toBe(500);
    expect(await unknown.text()).toMatch(/^Result\{id=-2, status=EXCEPTION\}/);
  });

  it('with users (auth on), members still lease as themselves; clients need the issue permission', async () => {
    const addr = cluster.node(leader).http;
    const root = await http(addr, 'POST', '/v1/users', {
      user: 'root',
      password: 'root-password-1',
      grants: { '*': ['admin'] },
    });
    expect(root).toMatchObject({ status: 200 });
    const r = new Redis({
      port: portOf(leader),
      host: '127.0.0.1',
      maxRetriesPerRequest: 1,
      username: 'root',
      password: 'root-password-1',
    });
    try {
      expect(await r.call('SNOWFLAKE.CREATE', 'secured', 'LAYOUT', 'floe')).toBeDefined();
    } finally {
      r.disconnect();
    }
    for (const n of cluster.nodes) {
      const ids = await nextFrom(n.spec.id, 'secured', 10, ['root', 'root-password-1']);
      expect(ids).toHaveLength(10);
    }
    const anon = await redisCli(['-p', String(portOf(leader)), 'SNOWFLAKE.NEXT', 'secured']);
    expect(anon.stdout.trim()).toMatch(/^NOAUTH/);
  }, 60_000);
});
