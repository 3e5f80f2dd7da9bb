// Bad input against a running node of a real 3-node cluster: malformed RESP, wrong arity,
// non-integers, stale tokens, missing authentication and permissions (RESP and HTTP). Each gets a
// clear error, and after each a second, already connected client is still served.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, http } from './harness.js';
import { RawResp, record, resp, startCluster } from './lease-cluster.js';

let cluster: Cluster;
let leader: number;
let port: number;
/** Connected before any bad input; must keep working after each. */
let witness: Redis;

beforeAll(async () => {
  ({ cluster, leader } = await startCluster(3));
  port = cluster.node(leader).spec.respPort;
  witness = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1, lazyConnect: true });
  await witness.connect();
});

afterAll(async () => {
  witness?.disconnect();
  await cluster?.stopAll();
  cluster?.cleanup();
});

let witnessCount = 0;
/** The other client is still served: PING and a real lease round trip on the same connection. */
async function witnessStillServed(): Promise<void> {
  expect(await witness.ping()).toBe('PONG');
  const l = record(await witness.call('WORKER.ACQUIRE', 'witness', `w-${witnessCount++}`, 'TTL', '30000'));
  expect(await witness.call('WORKER.RELEASE', 'witness', l.worker_id!, l.token!)).toBe('OK');
}

async function rawExchange(bytes: string, expectReply: RegExp, closes: boolean): Promise<string> {
  const raw = await RawResp.open(port);
  try {
    raw.send(bytes);
    const got = await raw.waitFor(expectReply);
    if (closes) await raw.waitClosed();
    return got;
  } finally {
    raw.close();
  }
}

describe('malformed RESP', () => {
  it('garbage bytes: a protocol error, the connection is closed, other clients unaffected', async () => {
    await rawExchange('*abc\r\n', /^-ERR Protocol error: [^\r]+\r\n/, true);
    await witnessStillServed();
    await rawExchange('*1\r\n%3\r\nfoo\r\n', /^-ERR Protocol error: expected '\$', got '%'\r\n/, true);
    await witnessStillServed();
    // Binary junk as an inline command: an unknown-command error, the connection stays usable.
    await rawExchange(
      `\xff\xfe garbage\x01\r\n${resp('PING')}`,
      /^-ERR unknown command [^\r]+\r\n\+PONG\r\n$/,
      false,
    );
    // A line starting with NUL is empty to Redis (C string) and skipped; Floe does the same.
    await rawExchange(`\x00\xff junk\r\n${resp('PING')}`, /^\+PONG\r\n$/, false);
    await witnessStillServed();
  });

  it('huge multibulk and bulk lengths are refused before anything is allocated', async () => {
    await rawExchange('*99999999999\r\n', /^-ERR Protocol error: invalid multibulk length\r\n/, true);
    await witnessStillServed();
    await rawExchange(
      '*2\r\n$4\r\nPING\r\n$9999999999\r\n',
      /^-ERR Protocol error: invalid bulk length\r\n/,
      true,
    );
    await witnessStillServed();
    await rawExchange(
      `*1\r\n$${'9'.repeat(100)}\r\n`,
      /^-ERR Protocol error: too big bulk count string\r\n/,
      true,
    );
    await witnessStillServed();
  });

  it('commands before the bad bytes are answered first', async () => {
    const got = await rawExchange(
      `${resp('PING')}${resp('ECHO', 'hi')}*x\r\n`,
      /^\+PONG\r\n\$2\r\nhi\r\n-ERR Protocol error[^\r]*\r\n/,
      true,
    );
    expect(got).toMatch(/^\+PONG/);
    await witnessStillServed();
  });
});

describe('bad WORKER.* arguments', () => {
  it('wrong argument counts, non-integers, bad TTLs and unknown options: clear errors, connection kept', async () => {
    const c = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
    try {
      await expect(c.call('WORKER.ACQUIRE', 'orders')).rejects.toThrow(
        "ERR wrong number of arguments for 'worker.acquire' command",
      );
      await expect(c.call('WORKER.RENEW', 'orders', '0')).rejects.toThrow(
        "ERR wrong number of arguments for 'worker.renew' command",
      );
      await expect(c.call('WORKER.RENEW', 'orders', '0', 'abc')).rejects.toThrow(
        'ERR value is not an integer or out of range',
      );
      await expect(c.call('WORKER.RENEW', 'orders', 'x', '1')).rejects.toThrow(
        'ERR value is not an integer or out of range',
      );
      await expect(c.call('WORKER.RENEW', 'orders', '0', '99999999999999999999999')).rejects.toThrow(
        'ERR value is not an integer or out of range',
      );
      await expect(c.call('WORKER.ACQUIRE', 'orders', 'h', 'TTL', '0')).rejects.toThrow(/ERR invalid TTL 0/);
      await expect(c.call('WORKER.ACQUIRE', 'orders', 'h', 'TTL', '10')).rejects.toThrow(
        /invalid_argument.*1,?000/,
      );
      await expect(c.call('WORKER.ACQUIRE', 'orders', 'h', 'COLOR', 'red')).rejects.toThrow(
        'ERR syntax error',
      );
      await expect(c.call('WORKER.ACQUIRE', 'bad app!', 'h')).rejects.toThrow(/invalid_argument/);
      await expect(c.call('WORKER.NOPE', 'x')).rejects.toThrow(/ERR unknown command 'WORKER.NOPE'/);
      // The same connection still works.
      expect(await c.ping()).toBe('PONG');
    } finally {
      c.disconnect();
    }
    await witnessStillServed();
  });

  it('stale tokens: renew or release after release, and with a made-up token, are refused', async () => {
    const c = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
    try {
      const l = record(await c.call('WORKER.ACQUIRE', 'stale', 'h1', 'TTL', '30000'));
      await expect(
        c.call('WORKER.RENEW', 'stale', l.worker_id!, String(Number(l.token) + 1000)),
      ).rejects.toThrow(/stale_token/);
      expect(await c.call('WORKER.RELEASE', 'stale', l.worker_id!, l.token!)).toBe('OK');
      await expect(c.call('WORKER.RENEW', 'stale', l.worker_id!, l.token!)).rejects.toThrow(
        /not_held|stale_token/,
      );
      // A new holder of the same worker ID: the old token is stale for renew and release.
      const m = record(await c.call('WORKER.ACQUIRE', 'stale', 'h1', 'TTL', '30000'));
      expect(m.worker_id).toBe(l.worker_id);
      await expect(c.call('WORKER.RENEW', 'stale', l.worker_id!, l.token!)).rejects.toThrow(/stale_token/);
      await expect(c.call('WORKER.RELEASE', 'stale', l.worker_id!, l.token!)).rejects.toThrow(/stale_token/);
      // A worker ID that was never leased.
      await expect(c.call('WORKER.RENEW', 'stale', '999', '1')).rejects.toThrow(/not_held|stale_token/);
      const h = await http<{ error: string }>(
        cluster.node(leader).http,
        'POST',
        `/v1/apps/stale/workers/${l.worker_id}/renew`,
        { token: Number(l.token) },
      );
      expect(h.status).toBe(409);
      expect(h.body.error).toBe('stale_token');
      const bad = await http<{ error: string }>(
        cluster.node(leader).http,
        'POST',
        '/v1/apps/stale/workers/0/renew',
        {
          token: 'abc',
        },
      );
      expect(bad.status).toBe(400);
      expect(bad.body.error).toBe('invalid_argument');
    } finally {
      c.disconnect();
    }
    await witnessStillServed();
  });
});

describe('authentication and permissions (last: turns auth on for this cluster)', () => {
  it('NOAUTH without AUTH, NOPERM for another app, HTTP 401 and 403; authorised clients keep working', async () => {
    const httpAddr = cluster.node(leader).http;
    const basic = (user: string, pass: string) =>
      `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
    const call = async (method: string, path: string, auth: string | undefined, body?: unknown) => {
      const res = await fetch(`http://${httpAddr}${path}`, {
        method,
        headers: {
          ...(auth ? { authorization: auth } : {}),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(10_000),
      });
      return { status: res.status, body: (await res.json()) as { error?: string; message?: string } };
    };
    // The cluster is open: the first user (admin on '*') needs no credentials.
    const admin = await call('POST', '/v1/users', undefined, {
      user: 'root',
      password: 'root-password-1',
      grants: { '*': ['admin'] },
    });
    expect(admin.status).toBe(200);
    // Now auth is on: the next user needs the admin's credentials.
    const anon = await call('POST', '/v1/users', undefined, { user: 'x', password: 'x-password-1' });
    expect(anon.status).toBe(401);
    const svc = await call('POST', '/v1/users', basic('root', 'root-password-1'), {
      user: 'orders-svc',
      password: 'orders-password-1',
      grants: { orders: ['acquire', 'renew', 'release', 'read'] },
    });
    expect(svc.status).toBe(200);

    // HTTP: 401 without or with wrong credentials, 403 for another app or for admin endpoints.
    expect((await call('POST', '/v1/apps/orders/workers/acquire', undefined, { nodeId: 'h' })).status).toBe(
      401,
    );
    expect(
      (
        await call('POST', '/v1/apps/orders/workers/acquire', basic('orders-svc', 'wrong-password'), {
          nodeId: 'h',
        })
      ).status,
    ).toBe(401);
    const forbidden = await call(
      'POST',
      '/v1/apps/payments/workers/acquire',
      basic('orders-svc', 'orders-password-1'),
      {
        nodeId: 'h',
      },
    );
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.error).toBe('forbidden');
    expect(forbidden.body.message).toContain('payments');
    expect((await call('GET', '/v1/users', basic('orders-svc', 'orders-password-1'))).status).toBe(403);
    const ok = await call(
      'POST',
      '/v1/apps/orders/workers/acquire',
      basic('orders-svc', 'orders-password-1'),
      {
        nodeId: 'h-http',
        ttlMs: 30_000,
      },
    );
    expect(ok.status).toBe(200);

    // RESP: the witness connected before auth was on; a new connection must AUTH.
    // (A raw socket: ioredis would send HELLO/CLIENT first and surface those errors instead.)
    await rawExchange(
      `${resp('WORKER.ACQUIRE', 'orders', 'h-resp')}${resp('PING')}${resp('AUTH', 'orders-svc', 'wrong-password')}`,
      /^-NOAUTH Authentication required\.\r\n-NOAUTH Authentication required\.\r\n-WRONGPASS [^\r]*\r\n$/,
      false,
    );
    const svcRedis = new Redis({
      host: '127.0.0.1',
      port,
      username: 'orders-svc',
      password: 'orders-password-1',
      maxRetriesPerRequest: 1,
    });
    try {
      const lease = record(await svcRedis.call('WORKER.ACQUIRE', 'orders', 'h-resp', 'TTL', '30000'));
      expect(lease.node_id).toBe('h-resp');
      await expect(svcRedis.call('WORKER.ACQUIRE', 'payments', 'h-resp')).rejects.toThrow(
        /^NOPERM .*payments/,
      );
      await expect(svcRedis.call('WORKER.LIST', 'payments')).rejects.toThrow(/^NOPERM/);
      expect(await svcRedis.call('WORKER.RELEASE', 'orders', lease.worker_id!, lease.token!)).toBe('OK');
    } finally {
      svcRedis.disconnect();
    }
    // The witness connected while the cluster was open and never authenticated: once users
    // exist it is refused like any unauthenticated client.
    await expect(witness.call('WORKER.ACQUIRE', 'orders', 'h-witness')).rejects.toThrow(/^NOAUTH/);
    // From here on the "other client" is a connection authenticated as the admin.
    witness.disconnect();
    witness = new Redis({
      host: '127.0.0.1',
      port,
      username: 'root',
      password: 'root-password-1',
      maxRetriesPerRequest: 1,
    });
    await witnessStillServed();
  });
});
