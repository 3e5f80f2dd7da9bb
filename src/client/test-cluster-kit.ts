// Shared by the reviews of the `floe-cluster` request header: in-process single-node clusters that know their UUID,
// real SDK clients, and a lease cache left by a crashed process. Everything is stopped by `cleanup` (afterEach).
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { identityCluster, knownUid, type Stops } from '../server/test-identity-cluster.js';
import { FloeClient } from './floe-client.js';
import { leaveDeadLock } from './test-doubles.js';

export function clusterKit() {
  const stops: Stops = [];
  const clients: FloeClient[] = [];

  /** A running single-node cluster that knows its UUID, with pools `svc` and `other`. */
  async function cluster(secret: string) {
    const c = await identityCluster(stops, { secret });
    const uid = await knownUid(c.state);
    for (const app of ['svc', 'other'])
      expect(
        (await c.app.inject({ method: 'PUT', url: `/v1/apps/${app}/pool`, payload: { bits: 4 } })).statusCode,
      ).toBe(200);
    return { ...c, uid };
  }

  function client(o: ConstructorParameters<typeof FloeClient>[0]): FloeClient {
    const c = new FloeClient({ bootId: 'boot-1', requestTimeoutMs: 1000, ...o });
    clients.push(c);
    return c;
  }

  /** A cache of a lease of `svc` that A granted, left by a process that died (renewals frozen, its lock dead). */
  async function cacheOfA(a: { base: string; uid: string }): Promise<string> {
    const cachePath = join(mkdtempSync(join(tmpdir(), 'floe-hdr-')), 'lease.json');
    const first = client({ endpoints: [a.base], setTimer: () => ({ cancel() {} }) });
    await first.leaseWorker({ app: 'svc', nodeId: 'h1', cachePath });
    clients.splice(clients.indexOf(first), 1); // never released: it crashed
    expect(JSON.parse(readFileSync(cachePath, 'utf8')).cluster).toBe(a.uid);
    leaveDeadLock(cachePath, 'boot-1', 10_000);
    return cachePath;
  }

  async function cleanup(): Promise<void> {
    for (const c of clients.splice(0)) await c.close().catch(() => {});
    for (const s of stops.splice(0).reverse()) await s();
  }

  return { stops, cluster, client, cacheOfA, cleanup };
}

export function leasesOn(
  c: { state: { leases: { leases(app: string): unknown[] } } },
  app: string,
): unknown[] {
  return c.state.leases.leases(app);
}
