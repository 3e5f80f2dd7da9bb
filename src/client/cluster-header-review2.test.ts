// Adversarial review of 31da9cf (the fixes of the floe-cluster header review). Each test is a hole: it fails on
// 31da9cf. Real in-process nodes with the real HTTP API (the onRequest hook), the real SDK and fetch over 127.0.0.1.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { leaseNodeOf } from '../lease/floe-node-adapter.js';
import { LeaseService } from '../lease/lease-service.js';
import type { FloeNode } from '../node/node.js';
import { identityCluster } from '../server/test-identity-cluster.js';
import { lockPathOf, lockRecordFor } from './cache-lock.js';
import { clusterKit, leasesOn } from './test-cluster-kit.js';

const { stops, cluster, client, cacheOfA, cleanup } = clusterKit();
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
  await cleanup();
});

describe('review of 31da9cf, F1: the hook decides on the role at arrival, the handler acts later', () => {
  it('a named request for A that reaches a follower of B without the UUID, which leads by the time its body is read, is granted by B', async () => {
    // B: a node that does not know its UUID (a cluster's first election; a member whose state came from an older
    // member's snapshot) and is a follower when the request arrives. The HTTP API and its lease service see the same
    // node view; `leading` plays its election.
    let leading = true;
    let hookSaw: () => void = () => {};
    const view = (n: FloeNode<unknown>): FloeNode<unknown> =>
      new Proxy(n, {
        get(t, p, r) {
          if (p === 'isLeader') {
            if (!leading) hookSaw();
            return leading && t.isLeader;
          }
          if (p === 'leaderHint')
            return () => (leading ? t.leaderHint() : { id: 9, httpAddr: '127.0.0.1:9' });
          const v = Reflect.get(t, p, r);
          return typeof v === 'function' ? v.bind(t) : v;
        },
      });
    let leases: LeaseService | undefined;
    const b = await identityCluster(stops, {
      keeper: false,
      secret: 'secret-b',
      wrap: view,
      services: (served, state) => {
        leases = new LeaseService({ node: leaseNodeOf(served), state: state.leases });
        return { leases };
      },
    });
    await leases?.whenReady();
    expect(
      (await b.app.inject({ method: 'PUT', url: '/v1/apps/svc/pool', payload: { bits: 4 } })).statusCode,
    ).toBe(200);
    expect(b.state.cluster.uid).toBeUndefined();
    const A = randomUUID();
    const body = JSON.stringify({ nodeId: 'h1', ttlMs: 10_000, requestId: 'r1' });
    const send = (during?: () => Promise<void>) =>
      new Promise<{ status: number; cluster: string | undefined }>((resolve, reject) => {
        const [host, port] = b.base.split(':');
        const req = request(
          {
            host,
            port: Number(port),
            method: 'POST',
            path: '/v1/apps/svc/workers/acquire',
            headers: {
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(body),
              'floe-cluster': A,
            },
          },
          (res) => {
            res.resume();
            res.on('end', () =>
              resolve({
                status: res.statusCode ?? 0,
                cluster: res.headers['floe-cluster'] as string | undefined,
              }),
            );
          },
        );
        req.on('error', reject);
        req.flushHeaders();
        void (during ?? (async () => {}))().then(() => req.end(body));
      });

    // Controls. Leading at arrival: 503 not_ready. A follower throughout: redirected at arrival, nothing granted.
    expect((await send()).status).toBe(503);
    leading = false;
    expect((await send()).status).toBe(307);
    expect(leasesOn(b, 'svc')).toEqual([]);

    // The hole: the request's headers reach the follower (the hook lets it through: it cannot act), the node wins its
    // election while the body is on the way (or while the auth hook checks a password), and the handler then acts on a
    // request named for cluster A on a node that cannot tell whether it is A.
    const hookRan = new Promise<void>((r) => {
      hookSaw = r;
    });
    const r = await send(async () => {
      await hookRan;
      leading = true;
    });
    // On 31da9cf B held a lease of `svc` for a caller that named another cluster (200, its answer naming none). Since
    // the fix a named request never reaches a handler before the UUID is known: the follower redirects it at arrival
    // (307, as in the control above), whatever role it has by the time the body is read.
    expect({ status: r.status, onB: leasesOn(b, 'svc').length }).toEqual({ status: 307, onB: 0 });
  });
});

describe('review of 31da9cf, F2: the cache is read for its cluster once, without the lock', () => {
  it('a cache written by the lock holder after leaseWorker started (its first lease, from A) is overridden by a cluster learned meanwhile: the cached app is leased from B', async () => {
    const [a, b] = await Promise.all([cluster('secret-a'), cluster('secret-b')]);
    const cachePath = await cacheOfA(a);
    const aside = `${cachePath}.aside`;
    renameSync(cachePath, aside); // not written yet: the other process's first lease is still on its way
    // The other process (an older instance of this service, still running) holds the cache's lock.
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore' });
    children.push(holder);
    writeFileSync(
      lockPathOf(cachePath),
      JSON.stringify(lockRecordFor(holder.pid as number, 'boot-1', 10_000)),
    );

    const next = client({ endpoints: [b.base, a.base] });
    const cached = next
      .leaseWorker({ app: 'svc', nodeId: 'h1', cachePath, acquireTimeoutMs: 3000, cacheLockWaitMs: 20_000 })
      .then(
        (l) => ({ ok: true as const, l }),
        (e: unknown) => ({ ok: false as const, e }),
      );
    // Meanwhile another call pins B from its answer (documented: set clusterUid).
    await next.leaseWorker({ app: 'other', nodeId: 'h2', acquireTimeoutMs: 3000 }).catch(() => {});
    expect(next.clusterUid).toBe(b.uid);
    // The holder got its lease of `svc` from A, wrote the cache, and crashed.
    renameSync(aside, cachePath);
    holder.kill('SIGKILL');
    const got = await cached;
    if (got.ok) await got.l.release().catch(() => {});
    // The claim: a client never leases a cached app from another cluster than its cache names unless clusterUid says
    // so. The record of A is taken as a floor only (foreign), and `svc` is acquired from B.
    expect({ ok: got.ok, svcOnB: got.ok ? 'leased from B' : 'refused' }).toEqual({
      ok: false,
      svcOnB: 'refused',
    });
  });

  it("a cache whose cluster field is no lowercase UUID (hand-edited, or another tool's) makes every leaseWorker of an unpinned client throw, naming a pin learned 'from an earlier answer' that does not exist", async () => {
    const a = await cluster('secret-a');
    const cachePath = await cacheOfA(a);
    const rec = JSON.parse(readFileSync(cachePath, 'utf8'));
    writeFileSync(cachePath, JSON.stringify({ ...rec, cluster: a.uid.toUpperCase() }));
    const fresh = client({ endpoints: [a.base] });
    // Before 31da9cf such a record was a floor only (adopt refused it under the lock) and the call got a lease.
    const got = await fresh.leaseWorker({ app: 'svc', nodeId: 'h1', cachePath, acquireTimeoutMs: 3000 }).then(
      async (l) => {
        await l.release();
        return 'a lease';
      },
      (e: unknown) => String(e),
    );
    expect(got).toBe('a lease');
  });
});
