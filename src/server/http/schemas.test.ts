// The routes' JSON schemas refuse bad input before any handler runs, and the refusal is Floe's
// `{error, message}` naming the field, in the route's own words; nothing reaches the Raft log.
// Built with buildHttpAdmin and driven with inject() (no port).
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { buildHttpAdmin } from '../http-admin.js';
import { singleNodeWithApp } from '../test-node.js';

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

async function node(): Promise<{ app: FastifyInstance; lastIndex: () => number }> {
  const s = await singleNodeWithApp(({ node, state, leases }) =>
    buildHttpAdmin({
      node,
      kv: state.kv,
      services: { node, leases, auth: state.auth },
      defaultMetrics: false,
      dashboard: false,
    }),
  );
  const { node, app } = s;
  stop = s.stop;
  return { app, lastIndex: () => node.status().lastIndex };
}

async function call(
  app: FastifyInstance,
  method: 'GET' | 'POST' | 'PUT',
  url: string,
  payload?: unknown,
  authorization?: string,
) {
  const headers: Record<string, string> = authorization ? { authorization } : {};
  if (payload !== undefined) headers['content-type'] = 'application/json';
  const res = await app.inject({
    method,
    url,
    headers,
    ...(payload === undefined
      ? {}
      : { payload: typeof payload === 'string' ? payload : JSON.stringify(payload) }),
  });
  return { status: res.statusCode, body: res.json() as Record<string, unknown> };
}

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('route schemas', () => {
  it('refuse wrong types with 400 naming the field, in the route words, and propose nothing', async () => {
    const { app, lastIndex } = await node();
    const before = lastIndex();
    const cases: [string, string, unknown, { error: string; message: string | RegExp }][] = [
      [
        'POST',
        '/v1/apps/a/workers/acquire',
        { nodeId: 7 },
        { error: 'invalid_argument', message: 'nodeId must be a string' },
      ],
      [
        'POST',
        '/v1/apps/a/workers/acquire',
        {},
        { error: 'invalid_argument', message: 'nodeId must be a string' },
      ],
      [
        'POST',
        '/v1/apps/a/workers/acquire',
        { nodeId: 'n', ttlMs: true },
        { error: 'invalid_argument', message: /^ttlMs must be an integer in/ },
      ],
      [
        'POST',
        '/v1/apps/a/workers/acquire',
        { nodeId: 'n', healthUrl: 5 },
        { error: 'invalid_argument', message: /^healthUrl must be an http\(s\) URL/ },
      ],
      [
        'POST',
        '/v1/apps/a/workers/x/renew',
        { token: 1 },
        { error: 'invalid_argument', message: 'workerId and token must be integers' },
      ],
      [
        'POST',
        '/v1/apps/a/workers/1/release',
        { token: '1.5' },
        { error: 'invalid_argument', message: 'workerId and token must be integers' },
      ],
      [
        'PUT',
        '/v1/apps/a/pool',
        { bits: 'ten' },
        { error: 'invalid_argument', message: 'bits and datacenterBits must be integers' },
      ],
      [
        'POST',
        '/v1/users',
        { user: 'u', password: 1 },
        { error: 'invalid_argument', message: 'user and password must be strings' },
      ],
      [
        'POST',
        '/v1/users',
        { user: 'u', password: 'p', grants: { orders: ['fly'] } },
        { error: 'invalid_argument', message: /^permissions for orders must be a list of / },
      ],
      [
        'POST',
        '/v1/users/u/grants',
        { app: 'a', permissions: 'read' },
        { error: 'invalid_argument', message: /^body must be \{"app": string, "permissions": \[\.\.\.\]\}/ },
      ],
      ['PUT', '/v1/kv/k', { value: 5 }, { error: 'bad_request', message: 'body must be {"value": string}' }],
      [
        'POST',
        '/v1/kv/k/cas',
        { value: 'v' },
        { error: 'bad_request', message: 'body must be {"expect": string|null, "value": string}' },
      ],
      [
        'POST',
        '/v1/counters/c/incr',
        { by: 1.5 },
        { error: 'bad_request', message: 'by must be an integer' },
      ],
      [
        'POST',
        '/v1/members',
        { id: '4', peerAddr: '127.0.0.1:7001' },
        { error: 'bad_request', message: 'id must be a positive integer' },
      ],
      ['POST', '/v1/members', { id: 4, peerAddr: 7001 }, { error: 'bad_request', message: /peerAddr/ }],
      ['POST', '/v1/leader/transfer', { to: 0 }, { error: 'bad_request', message: 'to must be a member id' }],
    ];
    for (const [method, url, body, want] of cases) {
      const r = await call(app, method as 'POST', url, body);
      expect(r.status, `${method} ${url} ${JSON.stringify(body)}`).toBe(400);
      expect(r.body.error, url).toBe(want.error);
      if (typeof want.message === 'string') expect(r.body.message, url).toBe(want.message);
      else expect(r.body.message, url).toMatch(want.message);
    }
    expect(lastIndex()).toBe(before);
  });

  it('coerce nothing: a number written as a string where a number is asked is refused', async () => {
    const { app } = await node();
    const r = await call(app, 'POST', '/v1/leader/transfer', { to: '2' });
    expect(r).toEqual({ status: 400, body: { error: 'bad_request', message: 'to must be a member id' } });
  });

  it('treat an absent body as {}: optional fields default, required ones are named', async () => {
    const { app } = await node();
    expect((await call(app, 'POST', '/v1/counters/c/incr')).body).toMatchObject({ ok: true, value: '1' });
    expect(await call(app, 'POST', '/v1/leader/transfer')).toEqual({
      status: 400,
      body: { error: 'bad_request', message: 'to must be a member id' },
    });
  });

  it('still refuse deep JSON before parsing, and non-objects before the schema', async () => {
    const { app } = await node();
    const deep = `${'['.repeat(10_000)}${']'.repeat(10_000)}`;
    expect((await call(app, 'POST', '/v1/counters/c/incr', deep)).body.error).toBe('json_too_deep');
    expect((await call(app, 'PUT', '/v1/kv/k', '[1]')).body).toEqual({
      error: 'invalid_body',
      message: 'request body must be a JSON object, got an array',
    });
  });

  it('name a field without a route sentence by its path and what the schema wanted', async () => {
    const { app } = await node();
    expect(await call(app, 'GET', '/v1/kv/k?consistency=a&consistency=b')).toEqual({
      status: 400,
      body: { error: 'bad_request', message: 'query parameter consistency must be string' },
    });
    const w = await call(app, 'POST', '/v1/members/1/addresses', { httpAddr: 'h:1' });
    expect(w).toEqual({
      status: 400,
      body: { error: 'bad_request', message: 'need member id, httpAddr and respAddr' },
    });
  });

  it('check permissions before the schema: a caller without the permission gets 403 whatever it sent', async () => {
    const { app, lastIndex } = await node();
    const root = basic('root', 'root-password-123');
    const reader = basic('reader', 'reader-password-123');
    const add = (user: string, password: string, grants: Record<string, string[]>, auth?: string) =>
      call(app, 'POST', '/v1/users', { user, password, grants }, auth);
    expect((await add('root', 'root-password-123', { '*': ['admin'] })).status).toBe(200);
    expect((await add('reader', 'reader-password-123', { orders: ['read'] }, root)).status).toBe(200);
    const before = lastIndex();
    for (const [method, url, body] of [
      ['POST', '/v1/apps/orders/workers/acquire', { nodeId: 7 }],
      ['PUT', '/v1/apps/orders/pool', { bits: 'x' }],
      ['PUT', '/v1/kv/k', { value: 5 }],
      ['POST', '/v1/users', { user: 1 }],
      ['PUT', '/v1/users/root/password', { password: 1 }],
      ['POST', '/v1/leader/transfer', { to: 'x' }],
    ] as const) {
      const r = await call(app, method, url, body, reader);
      expect(r.status, `${method} ${url}`).toBe(403);
      expect(r.body.error).toBe('forbidden');
    }
    // Its own password: no admin needed, so the schema answers.
    expect((await call(app, 'PUT', '/v1/users/reader/password', { password: 1 }, reader)).status).toBe(400);
    expect(lastIndex()).toBe(before);
  });
});
