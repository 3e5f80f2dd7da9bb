import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { addressProof, startHttpAdmin } from './http-admin.js';
import { singleNodeWithApp } from './test-node.js';

const SECRET = 'http-api-test-secret-0123456789';
let stop: (() => Promise<void>) | undefined;

afterEach(async () => {
  await stop?.();
  stop = undefined;
});

/** One in-process node (memory storage and network) with the real HTTP API on a free port. */
async function singleNode(): Promise<{ base: string; app: FastifyInstance; lastIndex: () => number }> {
  const s = await singleNodeWithApp(({ node, state, leases }) =>
    startHttpAdmin({
      node,
      kv: state.kv,
      services: { node, leases, auth: state.auth },
      clusterSecret: SECRET,
      host: '127.0.0.1',
      port: 0,
    }),
  );
  const { node, app } = s;
  stop = s.stop;
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return { base: `http://127.0.0.1:${addr.port}`, app, lastIndex: () => node.status().lastIndex };
}

async function call(base: string, method: string, path: string, body?: unknown, auth?: string) {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (auth) headers.authorization = `Basic ${Buffer.from(auth).toString('base64')}`;
  const res = await fetch(base + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('HTTP lease and user API', () => {
  it('serves leases openly until the first user exists, then enforces Basic auth and permissions', async () => {
    const { base } = await singleNode();
    const open = await call(base, 'POST', '/v1/apps/orders/workers/acquire', { nodeId: 'a', ttlMs: 5000 });
    expect(open.status).toBe(200);
    expect(open.body).toMatchObject({ ok: true, workerId: 0, highWaterMs: 0 });

    expect(
      (
        await call(base, 'POST', '/v1/users', {
          user: 'root',
          password: 'rootpass1',
          grants: { '*': ['admin'] },
        })
      ).status,
    ).toBe(200);
    const svc = { user: 'svc', password: 'svcpass12', grants: { orders: ['acquire', 'read'] } };
    expect((await call(base, 'POST', '/v1/users', svc, 'root:rootpass1')).status).toBe(200);

    expect((await call(base, 'POST', '/v1/apps/orders/workers/acquire', { nodeId: 'b' })).status).toBe(401);
    expect(
      (await call(base, 'POST', '/v1/apps/orders/workers/acquire', { nodeId: 'b' }, 'svc:wrong-pass')).status,
    ).toBe(401);
    const ok = await call(base, 'POST', '/v1/apps/orders/workers/acquire', { nodeId: 'b' }, 'svc:svcpass12');
    expect(ok.status).toBe(200);
    const other = await call(
      base,
      'POST',
      '/v1/apps/payments/workers/acquire',
      { nodeId: 'b' },
      'svc:svcpass12',
    );
    expect(other.status).toBe(403);
    expect(String(other.body.message)).toContain('payments');
    expect((await call(base, 'PUT', '/v1/kv/x', { value: '1' }, 'svc:svcpass12')).status).toBe(403);
    expect((await call(base, 'PUT', '/v1/kv/x', { value: '1' }, 'root:rootpass1')).status).toBe(200);
    // Probes and the cluster view stay open.
    expect((await call(base, 'GET', '/v1/cluster')).status).toBe(200);
  });

  it('lets a member publish its addresses with the cluster secret (even with auth on), and refuses a bad proof', async () => {
    const { base } = await singleNode();
    await call(base, 'POST', '/v1/users', {
      user: 'root',
      password: 'rootpass1',
      grants: { '*': ['admin'] },
    });
    const body = { httpAddr: 'h:1', respAddr: 'r:2' };
    const bad = await call(base, 'POST', '/v1/members/1/addresses', { ...body, proof: 'nope' });
    expect(bad.status).toBe(403);
    const proof = addressProof(SECRET, 1, body.httpAddr, body.respAddr);
    const good = await call(base, 'POST', '/v1/members/1/addresses', { ...body, proof });
    expect(good.status).toBe(200);
    const view = await call(base, 'GET', '/v1/cluster');
    expect(view.body.members).toEqual([expect.objectContaining({ id: 1, httpAddr: 'h:1', respAddr: 'r:2' })]);
  });

  it('maps lease refusals to HTTP statuses with the refusal code', async () => {
    const { base } = await singleNode();
    const a = await call(base, 'POST', '/v1/apps/tiny/workers/acquire', { nodeId: 'a' });
    const stale = await call(base, 'POST', `/v1/apps/tiny/workers/${a.body.workerId}/renew`, {
      token: Number(a.body.token) + 1,
    });
    expect(stale).toMatchObject({ status: 409, body: { error: 'stale_token' } });
    const badTtl = await call(base, 'POST', '/v1/apps/tiny/workers/acquire', { nodeId: 'b', ttlMs: 5 });
    expect(badTtl).toMatchObject({ status: 400, body: { error: 'invalid_argument' } });
  });
});

describe('nothing invalid reaches the log (issue 15 items 2 and 4)', () => {
  it('grant with unknown or nested permissions and revoke with a non-list are 400 and propose nothing', async () => {
    const { base, lastIndex } = await singleNode();
    const root = 'root:root-password-1';
    expect(
      (
        await call(base, 'POST', '/v1/users', {
          user: 'root',
          password: 'root-password-1',
          grants: { '*': ['admin'] },
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await call(
          base,
          'POST',
          '/v1/users',
          { user: 'svc', password: 'svc-password-1', grants: { orders: ['acquire'] } },
          root,
        )
      ).status,
    ).toBe(200);
    let nested: unknown = ['read'];
    for (let i = 0; i < 1500; i++) nested = [nested];
    const before = lastIndex();
    for (const permissions of [['bogus'], nested, 'read', { read: true }, [1]]) {
      const r = await call(base, 'POST', '/v1/users/svc/grants', { app: 'orders', permissions }, root);
      expect([r.status, r.body.error]).toEqual([
        400,
        permissions === nested ? 'json_too_deep' : 'invalid_argument',
      ]);
    }
    for (const permissions of [7, 'acquire', null, ['bogus'], nested]) {
      const r = await call(base, 'POST', '/v1/users/svc/revoke', { app: 'orders', permissions }, root);
      expect([r.status, r.body.error]).toEqual([
        400,
        permissions === nested ? 'json_too_deep' : 'invalid_argument',
      ]);
    }
    expect(lastIndex()).toBe(before); // nothing was proposed
    const users = await call(base, 'GET', '/v1/users', undefined, root);
    const svc = (users.body.users as { user: string; grants: Record<string, string[]> }[]).find(
      (u) => u.user === 'svc',
    );
    expect(svc?.grants).toEqual({ orders: ['acquire'] }); // revoke with 7 revoked nothing
  });
});

describe('one error shape, 405, strict path integers, membership mistakes (issue 15 items 3, 5, 7)', () => {
  it('framework errors, unknown paths and methods answer {error, message} with a stable code', async () => {
    const { base } = await singleNode();
    const raw = async (method: string, path: string, body?: string, type = 'application/json') => {
      const res = await fetch(base + path, {
        method,
        headers: body === undefined ? {} : { 'content-type': type },
        body,
      });
      return {
        status: res.status,
        allow: res.headers.get('allow'),
        body: (await res.json()) as Record<string, unknown>,
      };
    };
    expect(await raw('POST', '/v1/kv/k/cas', '{"expect":')).toMatchObject({
      status: 400,
      body: { error: 'invalid_json' },
    });
    expect(await raw('POST', '/v1/kv/k/cas', `${'['.repeat(100)}${']'.repeat(100)}`)).toMatchObject({
      status: 400,
      body: { error: 'json_too_deep', message: 'JSON nested deeper than 64 levels' },
    });
    expect(await raw('POST', '/v1/kv/k/cas', '<x/>', 'application/xml')).toMatchObject({
      status: 415,
      body: { error: 'unsupported_media_type' },
    });
    expect(await raw('GET', '/v1/nope')).toMatchObject({ status: 404, body: { error: 'not_found' } });
    const m = await raw('PATCH', '/v1/kv/k');
    expect(m).toMatchObject({ status: 405, body: { error: 'method_not_allowed' } });
    expect(m.allow).toMatch(/GET/);
    for (const id of ['4.242e3', '0x1092', '+4242', ' 4242', '04242'])
      expect((await raw('DELETE', `/v1/members/${encodeURIComponent(id)}`)).status).toBe(400);
    // Membership mistakes are 4xx: removing a non-member, transferring to a non-voter.
    expect((await raw('DELETE', '/v1/members/4242')).status).toBeLessThan(500);
    const t = await raw('POST', '/v1/leader/transfer', '{"to": 77}');
    expect(t.status).toBe(409);
    // A 1,024-byte key (the documented limit) is a valid path parameter.
    const long = 'k'.repeat(1024);
    expect((await raw('PUT', `/v1/kv/${long}`, '{"value":"v"}')).status).toBe(200);
    expect((await raw('PUT', `/v1/kv/${long}x`, '{"value":"v"}')).status).toBe(400);
  });
});
