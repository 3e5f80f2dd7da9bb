import { createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { leaseNodeOf } from '../lease/floe-node-adapter.js';
import { LeaseService } from '../lease/lease-service.js';
import { buildHttpAdmin, listenHttpAdmin, startHttpAdmin } from './http-admin.js';
import { memorySingleNode } from './test-node.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function leaderNode() {
  const { node, state } = memorySingleNode();
  const leases = new LeaseService({ node: leaseNodeOf(node), state: state.leases });
  node.start();
  await node.waitForLeader();
  await leases.whenReady();
  cleanups.push(async () => {
    leases.close();
    await node.stop('test over');
  });
  return { node, state, leases };
}

describe('buildHttpAdmin: routes without a port', () => {
  it('answers through inject() without listening; default process metrics can be left out', async () => {
    const { node, state, leases } = await leaderNode();
    const app = await buildHttpAdmin({
      node,
      kv: state.kv,
      services: { node, leases, auth: state.auth },
      defaultMetrics: false,
    });
    cleanups.push(() => app.close());
    expect(app.server.listening).toBe(false);
    expect((await app.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ ok: true });
    const acquire = await app.inject({
      method: 'POST',
      url: '/v1/apps/orders/workers/acquire',
      payload: { nodeId: 'a', ttlMs: 5000 },
    });
    expect(acquire.statusCode).toBe(200);
    const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toContain('floe_raft_term 1');
    expect(metrics).toContain(
      'floe_http_requests_total{method="POST",route="/v1/apps/:app/workers/acquire",status="200"} 1',
    );
    expect(metrics).not.toContain('floe_process_');
    expect(metrics).not.toContain('floe_nodejs_');
    expect((await app.inject({ method: 'GET', url: '/' })).statusCode).toBe(200);
  });

  it('listenHttpAdmin puts a built app on a port; startHttpAdmin does both; a taken port closes the app and throws', async () => {
    const { node, state } = await leaderNode();
    const app = await buildHttpAdmin({ node, kv: state.kv, defaultMetrics: false });
    cleanups.push(() => app.close());
    await listenHttpAdmin(app, { host: '127.0.0.1', port: 0 });
    const addr = app.server.address();
    if (!addr || typeof addr === 'string') throw new Error('no address');
    const res = await fetch(`http://127.0.0.1:${addr.port}/readyz`);
    expect(res.status).toBe(200);

    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise((r) => blocker.close(() => r())));
    const port = (blocker.address() as { port: number }).port;
    await expect(
      startHttpAdmin({ node, kv: state.kv, defaultMetrics: false, host: '127.0.0.1', port }),
    ).rejects.toThrow(/EADDRINUSE/);
  });
});
