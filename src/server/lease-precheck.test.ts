/**
 * Issue 15 item 2 for leases and users: a request the state would refuse is answered 4xx naming
 * the problem, and nothing reaches the log (the fuzzer found pool bits 64, ttlMs [], token -1, and
 * commands for missing users committed and refused only at apply).
 */

import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { leaseNodeOf } from '../lease/floe-node-adapter.js';
import { LeaseService } from '../lease/lease-service.js';
import { startHttpAdmin } from './http-admin.js';
import { precheckLease } from './lease-precheck.js';
import { memorySingleNode } from './test-node.js';

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

async function singleNode(): Promise<{ base: string; app: FastifyInstance; lastIndex: () => number }> {
  const { node, state } = memorySingleNode();
  const leases = new LeaseService({ node: leaseNodeOf(node), state: state.leases });
  const app = await startHttpAdmin({
    node,
    kv: state.kv,
    services: { node, leases, auth: state.auth },
    host: '127.0.0.1',
    port: 0,
  });
  node.start();
  await node.waitForLeader();
  await leases.whenReady();
  stop = async () => {
    leases.close();
    await node.stop('test over');
    await app.close();
  };
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return { base: `http://127.0.0.1:${addr.port}`, app, lastIndex: () => node.status().lastIndex };
}

async function call(base: string, method: string, path: string, body: unknown) {
  const res = await fetch(base + path, {
    method,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as { error?: string; message?: string } };
}

describe('lease requests are checked completely before they are proposed', () => {
  it('refuses with 400 naming the field, and proposes nothing', async () => {
    const { base, lastIndex } = await singleNode();
    const before = lastIndex();
    const cases: [string, string, unknown, string][] = [
      ['PUT', '/v1/apps/a/pool', { bits: 64 }, 'bits must be an integer in 1..22'],
      ['PUT', '/v1/apps/a/pool', { bits: -1 }, 'bits must be an integer in 1..22'],
      ['PUT', '/v1/apps/a/pool', { bits: 4, datacenterBits: 9 }, 'datacenterBits must be an integer in 0..4'],
      ['POST', '/v1/apps/a/workers/acquire', { nodeId: 'n', ttlMs: [] }, 'ttlMs must be an integer'],
      ['POST', '/v1/apps/a/workers/acquire', { nodeId: 'n', ttlMs: 5 }, 'ttlMs must be an integer in 1000..'],
      ['POST', '/v1/apps/a/workers/acquire', { nodeId: '' }, 'nodeId must be a string of 1..256'],
      ['POST', '/v1/apps/a/workers/acquire', { nodeId: 'n', incarnation: 'x'.repeat(500) }, 'incarnation'],
      ['POST', '/v1/apps/a/workers/acquire', { nodeId: 'n', requestId: 5 }, 'requestId must be a string'],
      ['POST', '/v1/apps/a/workers/acquire', { nodeId: 'n', boundMs: 'abc' }, 'boundMs must be an integer'],
      [
        'POST',
        '/v1/apps/a/workers/acquire',
        { nodeId: 'n', layout: 'x'.repeat(200) },
        'layout must be a string',
      ],
      ['POST', '/v1/apps/a/workers/acquire', { nodeId: 'n', layout: 7 }, 'layout must be a'],
      ['POST', '/v1/apps/a/workers/0/release', { token: -1 }, 'token must be an integer in 1..'],
      ['POST', '/v1/apps/a/workers/0/renew', { token: 0 }, 'token must be an integer in 1..'],
      ['POST', '/v1/apps/a/workers/9999999/renew', { token: 1 }, 'workerId must be an integer in 0..'],
      ['POST', '/v1/apps/-bad/workers/acquire', { nodeId: 'n' }, 'app must be 1..128 characters'],
    ];
    for (const [method, path, body, message] of cases) {
      const r = await call(base, method, path, body);
      expect(r.status, `${method} ${path} ${JSON.stringify(body)}`).toBe(400);
      expect(r.body.message, `${method} ${path}`).toContain(message);
    }
    expect(lastIndex()).toBe(before);
    // A valid acquire still goes through.
    expect((await call(base, 'POST', '/v1/apps/a/workers/acquire', { nodeId: 'n' })).status).toBe(200);
    expect(lastIndex()).toBe(before + 1);
  });

  it('a command for a user that does not exist is refused on the leader before it is proposed', async () => {
    const { base, lastIndex } = await singleNode();
    const before = lastIndex();
    const cases: [string, string, unknown][] = [
      ['DELETE', '/v1/users/nobody', undefined],
      ['PUT', '/v1/users/nobody/password', { password: 'a-long-enough-password' }],
      ['POST', '/v1/users/nobody/grants', { app: 'x', permissions: ['read'] }],
      ['POST', '/v1/users/nobody/revoke', { app: 'x' }],
    ];
    for (const [method, path, body] of cases) {
      const res = await fetch(base + path, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(await res.json()).toEqual({ error: 'no_such_user', message: 'user "nobody" does not exist' });
    }
    expect(lastIndex()).toBe(before);
  });

  it('fills the fields the service supplies with in-range placeholders', () => {
    expect(precheckLease({ op: 'acquire', app: 'a', nodeId: 'n' })).toBeUndefined();
    expect(precheckLease({ op: 'renew', app: 'a', workerId: 0, token: 1 })).toBeUndefined();
    expect(precheckLease({ op: 'release', app: 'a', workerId: 0, token: 1 })).toBeUndefined();
    expect(precheckLease({ op: 'configurePool', app: 'a', bits: 10, datacenterBits: 0 })).toBeUndefined();
  });
});
