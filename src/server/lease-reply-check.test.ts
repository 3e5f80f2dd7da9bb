// Issue 9 items 1 and 2 at the servers: WORKER.ACQUIRE / HTTP acquire carry the process incarnation, echo requestId
// and incarnation, and a result the node hands back for another command is an internal error, never a grant.

import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { getLayout, layoutFingerprint } from '../id/index.js';
import { leaseNodeOf } from '../lease/floe-node-adapter.js';
import { LeaseService } from '../lease/lease-service.js';
import { respBackendOf } from './floe-services.js';
import { startHttpAdmin } from './http-admin.js';
import { type RespServer, startRespServer } from './resp/index.js';
import { type Decoded, RawClient, RespErr } from './resp/test-support.js';
import { memorySingleNode } from './test-node.js';

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

/** One in-process node with the HTTP and RESP servers; `substitute` results replace the next proposals' own. */
async function singleNode() {
  const { node, state } = memorySingleNode();
  const substitute: unknown[] = [];
  const base = leaseNodeOf(node);
  const logged: string[] = [];
  const leases = new LeaseService({
    node: {
      ...base,
      // What a node that matched a proposal to another one's applied entry would resolve it with.
      propose: async (cmd) => {
        const own = await base.propose(cmd);
        return substitute.length > 0 ? substitute.shift() : own;
      },
    },
    state: state.leases,
    onError: (what) => logged.push(what),
  });
  const services = { node, leases, auth: state.auth };
  const http: FastifyInstance = await startHttpAdmin({
    node,
    kv: state.kv,
    services,
    clusterSecret: 'lease-reply-check-secret-0123456789',
    host: '127.0.0.1',
    port: 0,
  });
  const resp: RespServer = await startRespServer({ port: 0, backend: respBackendOf(services) });
  node.start();
  await node.waitForLeader();
  await leases.whenReady();
  const raw = await RawClient.connect(resp.address.port);
  stop = async () => {
    raw.close();
    leases.close();
    await node.stop('test over');
    await http.close();
    await resp.close();
  };
  const addr = http.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`http://127.0.0.1:${addr.port}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  return { post, raw, substitute, logged };
}

function record(d: Decoded): Record<string, unknown> {
  if (d instanceof RespErr) throw new Error(d.message);
  if (d instanceof Map) return Object.fromEntries([...d.entries()].map(([k, v]) => [String(k), v]));
  const a = d as Decoded[];
  const o: Record<string, unknown> = {};
  for (let i = 0; i < a.length; i += 2) o[String(a[i])] = a[i + 1];
  return o;
}

describe('lease servers: incarnation and reply checks', () => {
  it('scenario (a) over HTTP: a cached requestId from another incarnation gets 409 lease_held; the reply echoes requestId and incarnation', async () => {
    const { post } = await singleNode();
    const first = await post('/v1/apps/orders/workers/acquire', {
      nodeId: 'n1',
      requestId: 'cached',
      incarnation: 'proc-1',
    });
    expect(first).toMatchObject({
      status: 200,
      body: { requestId: 'cached', incarnation: 'proc-1', retried: false },
    });
    const retry = await post('/v1/apps/orders/workers/acquire', {
      nodeId: 'n1',
      requestId: 'cached',
      incarnation: 'proc-1',
    });
    expect(retry).toMatchObject({ status: 200, body: { token: first.body.token, retried: true } });
    const other = await post('/v1/apps/orders/workers/acquire', {
      nodeId: 'n1',
      requestId: 'cached',
      incarnation: 'proc-2',
    });
    expect(other).toMatchObject({ status: 409, body: { error: 'lease_held' } });
    const bad = await post('/v1/apps/orders/workers/acquire', {
      nodeId: 'n2',
      requestId: 'r',
      incarnation: 7,
    });
    expect(bad).toMatchObject({ status: 400, body: { error: 'invalid_argument' } });
  });

  it("answers 500 internal, and logs, when the node hands an acquire another proposal's grant", async () => {
    const { post, substitute, logged } = await singleNode();
    const victim = await post('/v1/apps/orders/workers/acquire', { nodeId: 'victim', requestId: 'v' });
    expect(victim.status).toBe(200);
    substitute.push(victim.body);
    const bob = await post('/v1/apps/orders/workers/acquire', { nodeId: 'bob', requestId: 'b' });
    expect(bob.status).toBe(500);
    expect(bob.body).toMatchObject({ error: 'internal' });
    expect(String(bob.body.message)).toMatch(/^internal: reply does not match request: nodeId/);
    expect(bob.body.workerId).toBeUndefined();
    expect(logged.some((l) => /reply does not match request/.test(l))).toBe(true);
  });

  it('WORKER.ACQUIRE takes INCARNATION, echoes request_id and incarnation, and answers a mismatch with -ERR internal', async () => {
    const { raw, substitute } = await singleNode();
    const a = record(await raw.call('WORKER.ACQUIRE', 'orders', 'r1', 'REQID', 'q', 'INCARNATION', 'inc-1'));
    expect(a).toMatchObject({ node_id: 'r1', request_id: 'q', incarnation: 'inc-1' });
    const again = record(
      await raw.call('WORKER.ACQUIRE', 'orders', 'r1', 'INCARNATION', 'inc-1', 'REQID', 'q'),
    );
    expect(again.token).toBe(a.token);
    const other = await raw.call('WORKER.ACQUIRE', 'orders', 'r1', 'REQID', 'q', 'INCARNATION', 'inc-2');
    expect(other).toBeInstanceOf(RespErr);
    expect((other as RespErr).message).toMatch(/^ERR lease_held: .*another process incarnation/);
    const empty = await raw.call('WORKER.ACQUIRE', 'orders', 'r2', 'INCARNATION', '');
    expect((empty as RespErr).message).toMatch(/^ERR .*incarnation/);
    // The node answers r3's acquire with r1's grant.
    substitute.push({ ok: true, op: 'acquire', app: 'orders', nodeId: 'r1', requestId: 'q' });
    const mismatch = await raw.call('WORKER.ACQUIRE', 'orders', 'r3', 'REQID', 'z');
    expect(mismatch).toBeInstanceOf(RespErr);
    expect((mismatch as RespErr).message).toMatch(/^ERR internal: reply does not match request/);
  });

  it('WORKER.ACQUIRE LAYOUT is checked against the layout pinned for the app, as the HTTP acquire is (review: RESP never named one)', async () => {
    const { raw, post } = await singleNode();
    const floe = layoutFingerprint(getLayout('floe'));
    const twitter = layoutFingerprint(getLayout('twitter'));
    const first = record(await raw.call('WORKER.ACQUIRE', 'orders', 'r1', 'LAYOUT', 'floe'));
    expect(first.layout).toBe(floe);
    const other = await raw.call('WORKER.ACQUIRE', 'orders', 'r2', 'LAYOUT', 'twitter');
    expect(other).toBeInstanceOf(RespErr);
    expect((other as RespErr).message).toMatch(/^ERR layout_mismatch: /);
    expect(record(await raw.call('WORKER.ACQUIRE', 'orders', 'r3', 'LAYOUT', floe)).layout).toBe(floe);
    // The HTTP acquire sees the pin the RESP acquire made.
    const overHttp = await post('/v1/apps/orders/workers/acquire', { nodeId: 'r4', layout: twitter });
    expect(overHttp.status).toBe(409);
    expect(overHttp.body).toMatchObject({ error: 'layout_mismatch' });
    // Naming none is neither pinned nor checked (docs/resp.md): the reply still says which layout is pinned.
    expect(record(await raw.call('WORKER.ACQUIRE', 'orders', 'r5')).layout).toBe(floe);
    const empty = await raw.call('WORKER.ACQUIRE', 'orders', 'r6', 'LAYOUT', '');
    expect((empty as RespErr).message).toMatch(/^ERR invalid LAYOUT/);
  });

  it('WORKER.ACQUIRE BOUND promises the first bound with the grant, as the HTTP acquire does (no renewal needed first)', async () => {
    const { raw } = await singleNode();
    const bound = Date.now() + 30_000;
    const a = record(await raw.call('WORKER.ACQUIRE', 'orders', 'r1', 'BOUND', String(bound)));
    expect(Number(a.bound_ms)).toBe(bound);
    const far = await raw.call(
      'WORKER.ACQUIRE',
      'orders',
      'r2',
      'BOUND',
      String(Date.now() + 10 * 365 * 86_400_000),
    );
    expect(far).toBeInstanceOf(RespErr);
    expect((far as RespErr).message).toMatch(/^ERR invalid_argument: .*boundMs/);
    const neg = await raw.call('WORKER.ACQUIRE', 'orders', 'r3', 'BOUND', '-1');
    expect((neg as RespErr).message).toMatch(/^ERR invalid BOUND/);
  });
});
