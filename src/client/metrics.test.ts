import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { FloeClient } from './floe-client.js';
import { callKind } from './metrics.js';
import { FakeCluster } from './test-doubles.js';

async function samples(registry: Registry): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const line of (await registry.metrics()).split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

describe('SDK metrics through a registry the application passes in', () => {
  it('counts calls by kind and outcome, leases held and released, time left; two clients share one registry', async () => {
    const cluster = new FakeCluster(['10.0.0.1:7380', '10.0.0.2:7380']);
    cluster.leader = '10.0.0.2:7380'; // the first call is redirected: still one call
    const registry = new Registry();
    const a = new FloeClient({ endpoints: ['10.0.0.1:7380'], fetch: cluster.fetch, metrics: registry });
    const b = new FloeClient({ endpoints: ['10.0.0.2:7380'], fetch: cluster.fetch, metrics: registry });
    const l1 = await a.leaseWorker({ app: 'orders', nodeId: 'n1', ttlMs: 3000 });
    const l2 = await b.leaseWorker({ app: 'orders', nodeId: 'n2', ttlMs: 3000 });
    await l1.renewNow();

    let s = await samples(registry);
    expect(s.get('floe_client_calls_total{call="acquire",outcome="ok"}')).toBe(2);
    expect(s.get('floe_client_calls_total{call="renew",outcome="ok"}')).toBeGreaterThanOrEqual(1);
    expect(s.get('floe_client_call_duration_seconds_count{call="acquire"}')).toBe(2);
    expect(s.get('floe_client_leases_held{app="orders"}')).toBe(2);
    expect(s.get('floe_client_lease_renewals_total{app="orders",result="ok"}')).toBeGreaterThanOrEqual(1);
    const left = s.get('floe_client_lease_time_left_seconds{app="orders"}')!;
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(3);

    await l1.release();
    await l2.release();
    s = await samples(registry);
    expect(s.get('floe_client_leases_held{app="orders"}')).toBe(0);
    expect(s.get('floe_client_leases_released_total{app="orders"}')).toBe(2);
    expect(s.get('floe_client_calls_total{call="release",outcome="ok"}')).toBe(2);
    expect(s.has('floe_client_lease_time_left_seconds{app="orders"}')).toBe(false);
  });

  it('a refusal is counted under the server error code; no registry means no metrics', async () => {
    const cluster = new FakeCluster(['10.0.0.1:7380']);
    cluster.poolSize = 1;
    const registry = new Registry();
    const c = new FloeClient({ endpoints: ['10.0.0.1:7380'], fetch: cluster.fetch, metrics: registry });
    const l = await c.leaseWorker({ app: 'small', nodeId: 'n1', ttlMs: 3000 });
    await expect(
      c.leaseWorker({ app: 'small', nodeId: 'n2', ttlMs: 3000, acquireTimeoutMs: 0 }),
    ).rejects.toThrow(/pool_exhausted/);
    const s = await samples(registry);
    expect(s.get('floe_client_calls_total{call="acquire",outcome="pool_exhausted"}')).toBe(1);
    await l.release();
    // Without `metrics` the client registers nothing anywhere.
    const plain = new FloeClient({ endpoints: ['10.0.0.1:7380'], fetch: cluster.fetch });
    expect(plain).toBeDefined();
  });

  it('labels calls by kind, never by URL', () => {
    expect(callKind('/v1/apps/x/workers/acquire')).toBe('acquire');
    expect(callKind('/v1/apps/x/workers/17/renew')).toBe('renew');
    expect(callKind('/v1/apps/x/workers/17/release')).toBe('release');
    expect(callKind('/v1/sequences/orders/alloc')).toBe('sequence_alloc');
    expect(callKind('/v1/cluster')).toBe('other');
  });
});
