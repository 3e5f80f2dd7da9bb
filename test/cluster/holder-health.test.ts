// Holder health (issue 13) against a real node process: the holder registers a health URL served by this test; when
// it starts answering 500, the leader's probes fail, its renewals are refused, the SDK ends the lease (unhealthy) and
// hands the worker ID back.
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FloeClient, LeaseLostError } from '../../src/client/index.js';
import { Cluster, http, waitForLeader } from './harness.js';

let cluster: Cluster | undefined;
let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  await cluster?.stopAll();
  cluster?.cleanup();
  cluster = undefined;
});

describe('holder health on a real node', () => {
  it('failed probes of the holder’s health URL end its lease; the worker ID is free again', {
    timeout: 60_000,
  }, async () => {
    let status = 200;
    let probes = 0;
    const server = createServer((_req, res) => {
      probes++;
      res.writeHead(status).end();
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    close = () => new Promise<void>((r) => server.close(() => r()));
    const healthUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/health`;

    cluster = await Cluster.create({ size: 1 });
    cluster.startAll();
    await waitForLeader(cluster);
    const node = cluster.nodes[0]!;
    const client = new FloeClient({ endpoints: [node.http], requestTimeoutMs: 1000 });
    const lease = await client.leaseWorker({ app: 'orders', nodeId: 'svc-1', ttlMs: 3000, healthUrl });
    const gen = lease.snowflake();
    gen.next();
    // Healthy: probed and renewed.
    await once(lease, 'renewed');
    await once(lease, 'renewed');
    expect(probes).toBeGreaterThan(0);
    status = 500;
    const [err] = (await once(lease, 'lost')) as [LeaseLostError];
    expect(err.reason).toBe('unhealthy');
    expect(err.message).toMatch(/health URL .* failed 3 probes in a row/);
    expect(() => gen.next()).toThrow(LeaseLostError);
    // Released: the worker ID is free again.
    await once(lease, 'released');
    const list = await http<{ leases: unknown[] }>(node.http, 'GET', '/v1/apps/orders/workers');
    expect(list.body.leases).toEqual([]);
  });
});
