// Sequences on a real 3-node cluster (separate processes) with real Redis clients: redis-cli for the
// commands and their errors, ioredis for INCR under load across kill -9 and SIGSTOP of the leader,
// the history checked by src/check (strictly increasing in real time, unique).

import { execFile } from 'node:child_process';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkHistory, checkUniqueIds, increasingIdModel } from '../../src/check/index.js';
import { FloeClient } from '../../src/client/index.js';
import { type Cluster, type ClusterView, floeBin, http, until } from './harness.js';
import { incrAcrossFailovers } from './incr-failover.js';
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
const cli = async (...args: string[]) =>
  (await redisCli(['-c', '-p', String(portOf(leader)), ...args])).stdout.trim();

describe('sequences over RESP (redis-cli)', () => {
  it('SEQ.CREATE, INCR, INCRBY, GET, SEQ.INFO, SEQ.LIST, SEQ.ALLOC, SEQ.DELETE', async () => {
    expect(cliRecord(await cli('SEQ.CREATE', 'orders', 'STEP', '100'))).toMatchObject({
      key: 'orders',
      mode: 'strict',
      start: '1',
      step: '100',
      next: '1',
      created: '1',
    });
    expect(await cli('INCR', 'orders')).toBe('1');
    expect(await cli('INCR', 'orders')).toBe('2');
    expect(await cli('INCRBY', 'orders', '10')).toBe('12'); // 3..12 reserved
    expect(await cli('GET', 'orders')).toBe('12');
    expect(cliRecord(await cli('SEQ.INFO', 'orders')).next).toMatch(/^\d+$/);
    expect(await cli('SEQ.LIST')).toContain('orders');
    const seg = (await cli('SEQ.ALLOC', 'orders', '1000')).split('\n').map(BigInt);
    expect(seg[1]! - seg[0]!).toBe(1000n);
    expect(seg[0]!).toBeGreaterThan(12n);
    expect(BigInt(await cli('INCR', 'orders'))).toBeGreaterThan(12n);
    // Not the segment's values: the client owns them.
    const next = BigInt(await cli('INCR', 'orders'));
    expect(next < seg[0]! || next >= seg[1]!).toBe(true);
    expect(await cli('SEQ.DELETE', 'orders')).toBe('1');
    expect(await cli('SEQ.DELETE', 'orders')).toBe('0');
    expect(await cli('GET', 'orders')).toBe('');
    // Re-created, it starts above everything it ever allocated.
    await cli('SEQ.CREATE', 'orders');
    expect(BigInt(await cli('INCR', 'orders'))).toBeGreaterThanOrEqual(seg[1]!);
  });

  it('bad input gets Redis-style errors naming what was wrong', async () => {
    await cli('SEQ.CREATE', 'bad');
    expect(await cli('INCRBY', 'bad', 'abc')).toBe('ERR value is not an integer or out of range');
    expect(await cli('INCRBY', 'bad', '1.5')).toBe('ERR value is not an integer or out of range');
    expect(await cli('INCRBY', 'bad', '9223372036854775808')).toBe(
      'ERR value is not an integer or out of range',
    );
    expect(await cli('INCRBY', 'bad', '0')).toMatch(/^ERR increment must be a positive integer/);
    expect(await cli('INCRBY', 'bad', '-5')).toMatch(/^ERR increment must be a positive integer/);
    expect(await cli('INCR', 'missing')).toMatch(
      /^ERR no sequence "missing" \(create it with SEQ\.CREATE; auto-creation is off\)/,
    );
    expect(await cli('INCR', 'k'.repeat(300))).toBe('ERR key is longer than 256 bytes');
    expect(await cli('SEQ.CREATE', 'x', 'MODE', 'fast')).toMatch(/^ERR MODE must be strict or node/);
    expect(await cli('SEQ.CREATE', 'x', 'STEP', '0')).toMatch(
      /^ERR step must be an integer in \[1, 100000000\]/,
    );
    expect(await cli('SEQ.CREATE', 'x', 'START', '10', 'MAX', '5')).toMatch(/^ERR start must be in \[0, 5\]/);
    expect(await cli('SEQ.CREATE', 'x', 'BOGUS', '1')).toBe('ERR syntax error');
    expect(await cli('SEQ.CREATE', 'bad', 'STEP', '7')).toMatch(/exists with another configuration/);
  });

  it('a sequence at its max refuses clearly; at 2^63 − 1 it is Redis overflow error', async () => {
    await cli('SEQ.CREATE', 'small', 'MAX', '3', 'STEP', '2');
    expect([await cli('INCR', 'small'), await cli('INCR', 'small'), await cli('INCR', 'small')]).toEqual([
      '1',
      '2',
      '3',
    ]);
    expect(await cli('INCR', 'small')).toBe('ERR sequence "small" reached its max 3');
    await cli('SEQ.CREATE', 'huge', 'START', '9223372036854775806');
    expect(await cli('INCR', 'huge')).toBe('9223372036854775806');
    expect(await cli('INCR', 'huge')).toBe('9223372036854775807');
    expect(await cli('INCR', 'huge')).toBe('ERR increment or decrement would overflow');
  });

  it('a follower answers INCR with MOVED to the leader (strict mode)', async () => {
    const f = cluster.nodes.find((n) => n.spec.id !== leader)!;
    const r = await redisCli(['-p', String(f.spec.respPort), 'INCR', 'orders']);
    expect(r.stdout.trim()).toMatch(new RegExp(`^MOVED \\d+ 127\\.0\\.0\\.1:${portOf(leader)}$`));
  });
});

describe('sequences over HTTP (JSON and Leaf-compatible)', () => {
  it('JSON routes, Leaf plain text (single and ?count), and Leaf-style errors; followers redirect to the leader', async () => {
    const f = cluster.nodes.find((n) => n.spec.id !== leader)!;
    const addr = f.http; // a follower: writes are redirected (307) to the leader
    expect(await http(addr, 'POST', '/v1/sequences', { key: 'web', step: 20 })).toMatchObject({
      status: 201,
      body: { created: true, key: 'web', start: '1', step: 20, mode: 'strict' },
    });
    expect(await http(addr, 'GET', '/api/segment/get/web')).toEqual({ status: 200, body: 1 });
    const batch = await http<string>(addr, 'GET', '/api/segment/get/web?count=3');
    expect(batch).toEqual({ status: 200, body: '2\n3\n4' });
    expect(await http(addr, 'POST', '/v1/sequences/web/incr', { count: 5 })).toMatchObject({
      status: 200,
      body: { key: 'web', first: '5', last: '9', count: 5 },
    });
    expect(await http(addr, 'POST', '/v1/sequences/web/alloc', { count: 100 })).toMatchObject({
      status: 200,
      body: { key: 'web' },
    });
    expect((await http(addr, 'GET', '/v1/sequences/web')).body).toMatchObject({ key: 'web', step: 20 });
    expect(
      (await http<{ sequences: { key: string }[] }>(addr, 'GET', '/v1/sequences')).body.sequences.map(
        (x) => x.key,
      ),
    ).toContain('web');
    const unknown = await http<string>(addr, 'GET', '/api/segment/get/nokey');
    expect(unknown.status).toBe(500);
    expect(String(unknown.body)).toMatch(/^Result\{id=-2, status=EXCEPTION\}/);
    expect(await http(addr, 'GET', '/api/segment/get/web?count=0')).toMatchObject({ status: 400 });
    expect(await http(addr, 'POST', '/v1/sequences/web/incr', { count: 'x' })).toMatchObject({
      status: 400,
      body: { error: 'invalid_argument', message: 'count must be an integer in [1, 2147483647]' },
    });
    expect(await http(addr, 'POST', '/v1/sequences', { key: 'web', step: 30 })).toMatchObject({
      status: 409,
      body: { error: 'exists' },
    });
    expect(await http(addr, 'DELETE', '/v1/sequences/web')).toMatchObject({
      status: 200,
      body: { deleted: true },
    });
    expect(await http(addr, 'GET', '/v1/sequences/web')).toMatchObject({ status: 404 });
  });
});

describe('node mode: every member serves its own segments', () => {
  it('INCR on every member without MOVED: unique across members, increasing per member', async () => {
    await cli('SEQ.CREATE', 'per-node', 'MODE', 'node', 'STEP', '25');
    // A member serves a node-mode key once it has applied its creation; before that it answers MOVED.
    const created = await http<ClusterView>(cluster.node(leader).http, 'GET', '/v1/cluster');
    await until('every member to apply SEQ.CREATE', async () => {
      for (const n of cluster.nodes) {
        const v = await http<ClusterView>(n.http, 'GET', '/v1/cluster');
        if (v.status !== 200 || v.body.applied < created.body.commit) return undefined;
      }
      return true;
    });
    const perNode = new Map<number, bigint[]>();
    const clients = cluster.nodes.map((n) => ({
      id: n.spec.id,
      r: new Redis({ port: n.spec.respPort, host: '127.0.0.1' }),
    }));
    try {
      await Promise.all(
        clients.map(async ({ id, r }) => {
          const got: bigint[] = [];
          for (let i = 0; i < 200; i++) got.push(BigInt((await r.call('INCR', 'per-node')) as number));
          perNode.set(id, got);
        }),
      );
    } finally {
      for (const { r } of clients) r.disconnect();
    }
    const all = [...perNode.values()].flat();
    expect(new Set(all).size).toBe(600);
    for (const got of perNode.values())
      for (let i = 1; i < got.length; i++) expect(got[i]!).toBeGreaterThan(got[i - 1]!);
    // The members-only allocation route refuses a caller without the cluster secret.
    const forged = await http(cluster.node(leader).http, 'POST', '/v1/internal/sequences/alloc', {
      key: 'per-node',
      count: 1000,
      owner: 'node-9',
      requestId: 'x',
      exact: false,
      proof: 'f'.repeat(64),
    });
    expect(forged).toMatchObject({ status: 403, body: { error: 'forbidden' } });
    // HTTP too, on a follower, answered there (no redirect).
    const f = cluster.nodes.find((n) => n.spec.id !== leader)!;
    const res = await fetch(`http://${f.http}/api/segment/get/per-node`, { redirect: 'manual' });
    expect(res.status).toBe(200);
    expect(all).not.toContain(BigInt(await res.text()));
  });
});

describe('SDK: client.sequence(key) (segments served in-process)', () => {
  it('two clients and INCR on one sequence: every value unique, each client increasing', async () => {
    await cli('SEQ.CREATE', 'sdk-seq', 'STEP', '100');
    const endpoints = cluster.nodes.map((n) => n.http);
    const a = new FloeClient({ endpoints }).sequence('sdk-seq', { step: 100 });
    const b = new FloeClient({ endpoints: [...endpoints].reverse() }).sequence('sdk-seq', { step: 50 });
    const got = { a: [] as number[], b: [] as number[], incr: [] as number[] };
    for (let i = 0; i < 20; i++) {
      got.a.push(...(await a.nextBatch(97)));
      got.b.push(await b.next(), await b.next());
      got.incr.push(Number(await cli('INCR', 'sdk-seq')));
    }
    const all = [...got.a, ...got.b, ...got.incr];
    expect(new Set(all).size).toBe(all.length);
    for (const xs of [got.a, got.b])
      for (let i = 1; i < xs.length; i++) expect(xs[i]!).toBeGreaterThan(xs[i - 1]!);
    expect(a.stats.fetches).toBeGreaterThan(1);
    await expect(new FloeClient({ endpoints }).sequence('no-such-seq').next()).rejects.toThrow(
      /no sequence|not_found|unavailable/i,
    );
  });
});

describe('segments refill under load (ioredis, 50 connections to the leader)', () => {
  it('no INCR waits for more than one segment proposal: the prefetch keeps ahead of the drain', async () => {
    // A fixed step of 200 (MINSTEP = MAXSTEP): 30,000 values need about 150 refills, each one a proposal.
    await cli('SEQ.CREATE', 'refill', 'STEP', '200', 'MINSTEP', '200', 'MAXSTEP', '200');
    const metric = async (name: string): Promise<number> => {
      const r = await http<string>(cluster.node(leader).http, 'GET', '/metrics');
      const line = String(r.body)
        .split('\n')
        .find((l) => l.startsWith(`${name} `));
      return Number(line?.split(' ')[1] ?? Number.NaN);
    };
    const segmentsBefore = await metric('floe_sequence_segments_allocated_total');
    const conns = Array.from(
      { length: 50 },
      () => new Redis({ port: portOf(leader), host: '127.0.0.1', maxRetriesPerRequest: 0 }),
    );
    try {
      const got: bigint[] = [];
      await Promise.all(
        conns.map(async (c) => {
          while (got.length < 30_000) got.push(BigInt(await c.incr('refill')));
        }),
      );
      expect(new Set(got).size).toBe(got.length);
      expect(
        (await metric('floe_sequence_segments_allocated_total')) - segmentsBefore,
      ).toBeGreaterThanOrEqual(30_000 / 200);
      // Before a request's values run out the next segment is on its way (fetched at half use); a request that finds
      // none waits for the fetch in flight (or the first of the term), never for a second one.
      expect(await metric('floe_sequence_stall_fetches_max')).toBeLessThanOrEqual(1);
    } finally {
      for (const c of conns) c.disconnect();
    }
  }, 60_000);
});

describe('floe seq (CLI)', () => {
  const floe = (...args: string[]) =>
    new Promise<{ code: number; out: string; err: string }>((resolve) => {
      execFile(process.execPath, [floeBin, ...args], { timeout: 15_000 }, (e, out, err) =>
        resolve({
          code: e ? (typeof e.code === 'number' ? e.code : 1) : 0,
          out: String(out),
          err: String(err),
        }),
      );
    });
  it('create, info, list, delete through any member; bad flags are usage errors', async () => {
    const ep = cluster.nodes.find((n) => n.spec.id !== leader)!.http;
    const created = await floe(
      'seq',
      'create',
      'cli-seq',
      '--step',
      '50',
      '--start',
      '100',
      '--endpoint',
      ep,
    );
    expect(created.code).toBe(0);
    expect(JSON.parse(created.out)).toMatchObject({ created: true, key: 'cli-seq', start: '100', step: 50 });
    expect(JSON.parse((await floe('seq', 'info', 'cli-seq', '--endpoint', ep)).out)).toMatchObject({
      next: '100',
    });
    expect((await floe('seq', 'list', '--endpoint', ep)).out).toContain('cli-seq');
    expect(JSON.parse((await floe('seq', 'delete', 'cli-seq', '--endpoint', ep)).out)).toMatchObject({
      deleted: true,
    });
    const bad = await floe('seq', 'create', 'x', '--mode', 'fast', '--endpoint', ep);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/--mode must be strict or node/);
    const missing = await floe('seq', 'info', 'nope', '--endpoint', ep);
    expect(missing.code).toBe(1);
    expect(missing.err).toMatch(/404/);
  });
});

describe('INCR under load across kill -9 and SIGSTOP of the leader (ioredis)', () => {
  it('values strictly increase in real time and never repeat (checked over the recorded history)', async () => {
    const r = await incrAcrossFailovers(cluster, leader);
    leader = r.leader;
    const { history, served, servedBy } = r;
    const unique = checkUniqueIds(history, { mode: 'increasing' });
    expect(unique.result).toBe('ok');
    const lin = checkHistory(increasingIdModel(), history, { timeoutMs: 60_000 });
    expect(lin.result).toBe('ok');
    expect(served).toBeGreaterThanOrEqual(1600);
    expect(servedBy.size).toBeGreaterThanOrEqual(2); // the load really moved between leaders
  }, 120_000);
});

// Last: it turns auth on for this cluster.
describe('permissions per key (issue, read, admin)', () => {
  it('NOPERM on RESP and 403 on HTTP for what the user may not do', async () => {
    const addr = cluster.node(leader).http;
    const post = (path: string, body: unknown, auth?: string) =>
      fetch(`http://${addr}${path}`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(auth ? { authorization: `Basic ${Buffer.from(auth).toString('base64')}` } : {}),
        },
        body: JSON.stringify(body),
      });
    expect(
      (await post('/v1/users', { user: 'root', password: 'root-password-1', grants: { '*': ['admin'] } }))
        .status,
    ).toBe(200);
    const svc = await post(
      '/v1/users',
      { user: 'svc', password: 'svc-password-1', grants: { 'perm-seq': ['issue'], 'read-seq': ['read'] } },
      'root:root-password-1',
    );
    expect(svc.status).toBe(200);
    const as = (user: string, pass: string, ...args: string[]) =>
      redisCli([
        '-p',
        String(portOf(leader)),
        '--user',
        user,
        '--pass',
        pass,
        '--no-auth-warning',
        ...args,
      ]).then((r) => r.stdout.trim());
    expect(await as('root', 'root-password-1', 'SEQ.CREATE', 'perm-seq')).toContain('perm-seq');
    expect(await as('root', 'root-password-1', 'SEQ.CREATE', 'read-seq')).toContain('read-seq');
    expect(await as('svc', 'svc-password-1', 'INCR', 'perm-seq')).toMatch(/^\d+$/);
    expect(await as('svc', 'svc-password-1', 'INCR', 'read-seq')).toBe(
      "NOPERM this user has no permissions to issue sequence 'read-seq'",
    );
    expect(await as('svc', 'svc-password-1', 'GET', 'read-seq')).toMatch(/^\d*$/);
    expect(await as('svc', 'svc-password-1', 'SEQ.CREATE', 'perm-seq')).toBe(
      "NOPERM this user has no permissions to admin sequence 'perm-seq'",
    );
    expect(await as('svc', 'svc-password-1', 'SEQ.LIST')).toBe('read-seq'); // issue alone does not let it read
    expect((await post('/v1/sequences/read-seq/incr', {}, 'svc:svc-password-1')).status).toBe(403);
    expect((await post('/v1/sequences/perm-seq/incr', {}, 'svc:svc-password-1')).status).toBe(200);
    expect((await post('/v1/sequences/perm-seq/incr', {})).status).toBe(401);
  });
});
