// Review of 3775fb6 with real processes: a client that names its cluster (floe-cluster) right after a cluster's first
// election and across kill -9 and restart of the leader. Records every answer the SDK got; a named request that a
// member refuses `not_ready` (where it used to redirect) shows up here.
import { afterEach, describe, expect, it } from 'vitest';
import { FloeClient } from '../../src/client/floe-client.js';
import type { FetchLike } from '../../src/client/http-transport.js';
import { Cluster, http, until, waitForLeader } from './harness.js';

const clusters: Cluster[] = [];
afterEach(async () => {
  for (const c of clusters.splice(0)) {
    await c.stopAll();
    c.cleanup();
  }
});

interface Seen {
  at: number;
  host: string;
  path: string;
  named: boolean;
  status: number | string;
  code?: string;
}

function recording(seen: Seen[], t0: number): FetchLike {
  const f = globalThis.fetch as unknown as FetchLike;
  return async (url, init) => {
    const u = new URL(url);
    const rec: Seen = {
      at: Date.now() - t0,
      host: u.host,
      path: u.pathname,
      named: init.headers['floe-cluster'] !== undefined,
      status: 'pending',
    };
    seen.push(rec);
    try {
      const res = await f(url, init);
      rec.status = res.status;
      if (res.status >= 300) {
        const text = await res.text();
        try {
          rec.code = (JSON.parse(text) as { error?: string }).error;
        } catch {}
        return { status: res.status, headers: res.headers, text: async () => text };
      }
      return res;
    } catch (e) {
      rec.status = `error ${String((e as Error).cause ?? e).slice(0, 60)}`;
      throw e;
    }
  };
}

describe('review of 3775fb6 (real processes)', () => {
  it('a pinned client right after the first election and across kill -9 and restart of the leader', async () => {
    const a = await Cluster.create({ size: 3 });
    clusters.push(a);
    a.startAll();
    const first = await waitForLeader(a);
    // As early as a client can be pinned: the moment the leader names its UUID.
    const uid = await until('the UUID', async () => {
      const r = await http<{ cluster?: string | null }>(
        a.node(first).http,
        'GET',
        '/v1/cluster',
        undefined,
        1000,
      );
      return r.status === 200 && r.body.cluster ? r.body.cluster : undefined;
    });
    const seen: Seen[] = [];
    const t0 = Date.now();
    // Followers first in the list: the client starts with members that may not have applied the UUID yet.
    const order = [...a.nodes.filter((n) => n.spec.id !== first), a.node(first)].map((n) => n.http);
    const client = new FloeClient({ endpoints: order, clusterUid: uid, fetch: recording(seen, t0) });
    const lease = await client.leaseWorker({ app: 'svc', nodeId: 'h1', ttlMs: 6000 });
    const early = seen.filter((s) => s.code === 'not_ready').length;

    // kill -9 the leader and restart it at once; the client's sticky leader is that node.
    const leader = await waitForLeader(a);
    const before = seen.length;
    await a.node(leader).kill9();
    a.node(leader).start();
    const lost: string[] = [];
    lease.on('lost', (e: unknown) => lost.push(String(e)));
    // Renew through the failover (the lease's own timer renews every 2 s; renew now and then too).
    const end = Date.now() + 15_000;
    while (Date.now() < end && lost.length === 0) {
      await lease.renewNow().catch(() => {});
      await new Promise((r) => setTimeout(r, 300));
    }
    const after = seen.slice(before);
    const notReady = after.filter((s) => s.code === 'not_ready');
    console.log(
      JSON.stringify(
        { early, notReadyAfterKill: notReady, lost, sample: after.filter((s) => s.status !== 200) },
        null,
        1,
      ),
    );
    await lease.release().catch(() => {});
    expect(lost).toEqual([]);
    expect({ early, afterKill: notReady.length }).toEqual({ early: 0, afterKill: 0 });
  }, 120_000);
});
