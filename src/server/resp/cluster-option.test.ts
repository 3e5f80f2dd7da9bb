import { afterEach, describe, expect, it } from 'vitest';
import { FakeCluster } from './fake-backend.js';
import { startRespServer } from './server.js';
import { RawClient, RespErr } from './test-support.js';

// The RESP twin of the `floe-cluster` request header (docs/cluster-identity.md): a command that names its cluster
// (`CLUSTER uuid`) is refused by a node of another cluster before the backend is called.

const OURS = '0b6f5a8e-6a43-4d8c-9a4e-2f1d3c5b7a90';
const THEIRS = '7d1e2c3b-0000-4a4a-8b8b-123456789abc';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const f of cleanups.splice(0).reverse()) await f();
});

async function leaderOf(uid: string | undefined): Promise<{ c: RawClient; cluster: FakeCluster }> {
  const cluster = new FakeCluster();
  cluster.clusterUid = uid;
  const server = await startRespServer({ backend: cluster.backend(1) });
  cleanups.push(() => server.close());
  cluster.setMember(1, `127.0.0.1:${server.address.port}`);
  cluster.setLeader(1);
  const c = await RawClient.connect(server.address.port);
  cleanups.push(() => c.close());
  return { c, cluster };
}

function fields(reply: unknown): Map<string, string> {
  const flat = reply as string[];
  const m = new Map<string, string>();
  for (let i = 0; i < flat.length; i += 2) m.set(flat[i]!, flat[i + 1]!);
  return m;
}

const message = (r: unknown): string => (r instanceof RespErr ? r.message : `not an error: ${String(r)}`);

describe('RESP CLUSTER option', () => {
  it('a WORKER.ACQUIRE naming another cluster is refused before the backend is called: no lease there', async () => {
    const { c, cluster } = await leaderOf(THEIRS);
    const r = await c.call('WORKER.ACQUIRE', 'orders', 'host-a', 'CLUSTER', OURS);
    expect(message(r)).toBe(
      `ERR cluster_mismatch: this node belongs to cluster ${THEIRS}; the request is meant for ${OURS}`,
    );
    expect(cluster.calls).toEqual([]);
    expect(await c.call('WORKER.LIST', 'orders')).toEqual([]);
  });

  it('renew and release naming another cluster are refused before the backend is called', async () => {
    const { c, cluster } = await leaderOf(THEIRS);
    const grant = fields(await c.call('WORKER.ACQUIRE', 'orders', 'host-a'));
    const calls = cluster.calls.length;
    const wid = grant.get('worker_id')!;
    const token = grant.get('token')!;
    expect(message(await c.call('WORKER.RENEW', 'orders', wid, token, 'CLUSTER', OURS))).toMatch(
      /^ERR cluster_mismatch: /,
    );
    expect(message(await c.call('WORKER.RELEASE', 'orders', wid, token, 'CLUSTER', OURS))).toMatch(
      /^ERR cluster_mismatch: /,
    );
    expect(message(await c.call('WORKER.LIST', 'orders', 'CLUSTER', OURS))).toMatch(
      /^ERR cluster_mismatch: /,
    );
    expect(cluster.calls.length).toBe(calls);
    // The lease is still held: the refused release did nothing.
    expect((await c.call('WORKER.LIST', 'orders')) as unknown[]).toHaveLength(1);
  });

  it('a node that does not know its cluster yet answers a named command TRYAGAIN not_ready, and does nothing', async () => {
    const { c, cluster } = await leaderOf(undefined);
    expect(message(await c.call('WORKER.ACQUIRE', 'orders', 'host-a', 'CLUSTER', OURS))).toMatch(
      /^TRYAGAIN not_ready: this node does not know the cluster's UUID yet/,
    );
    expect(message(await c.call('SEQ.ALLOC', 'orders', '10', 'CLUSTER', OURS))).toMatch(
      /^TRYAGAIN not_ready: /,
    );
    expect(message(await c.call('SNOWFLAKE.NEXT', 'orders', 'CLUSTER', OURS))).toMatch(
      /^TRYAGAIN not_ready: /,
    );
    expect(cluster.calls).toEqual([]);
    // Unnamed, it is served as before, and the record names no cluster.
    const grant = fields(await c.call('WORKER.ACQUIRE', 'orders', 'host-a'));
    expect(grant.has('cluster')).toBe(false);
  });

  it('the right cluster (in any case) is served, and every lease record names the cluster last', async () => {
    const { c } = await leaderOf(OURS);
    const reply = (await c.call(
      'WORKER.ACQUIRE',
      'orders',
      'host-a',
      'CLUSTER',
      OURS.toUpperCase(),
    )) as string[];
    expect(reply.slice(-2)).toEqual(['cluster', OURS]);
    const grant = fields(reply);
    const renewed = fields(
      await c.call('WORKER.RENEW', 'orders', grant.get('worker_id')!, grant.get('token')!, 'CLUSTER', OURS),
    );
    expect(renewed.get('cluster')).toBe(OURS);
    const listed = (await c.call('WORKER.LIST', 'orders', 'CLUSTER', OURS)) as unknown[];
    expect(fields(listed[0]).get('cluster')).toBe(OURS);
    expect(
      await c.call('WORKER.RELEASE', 'orders', grant.get('worker_id')!, grant.get('token')!, 'CLUSTER', OURS),
    ).toBe('OK');
  });

  it('SEQ.ALLOC and SNOWFLAKE.NEXT naming another cluster are refused', async () => {
    const { c } = await leaderOf(THEIRS);
    expect(message(await c.call('SEQ.ALLOC', 'orders', '10', 'CLUSTER', OURS))).toMatch(
      /^ERR cluster_mismatch: /,
    );
    expect(message(await c.call('SNOWFLAKE.NEXT', 'orders', 'COUNT', '5', 'CLUSTER', OURS))).toMatch(
      /^ERR cluster_mismatch: /,
    );
    expect(message(await c.call('SNOWFLAKE.NEXT', 'orders', 'CLUSTER', OURS, 'COUNT', '5'))).toMatch(
      /^ERR cluster_mismatch: /,
    );
  });

  it('bad CLUSTER arguments get clear errors', async () => {
    const { c } = await leaderOf(OURS);
    expect(message(await c.call('WORKER.ACQUIRE', 'orders', 'host-a', 'CLUSTER', ''))).toMatch(
      /^ERR invalid CLUSTER "": must be the cluster's UUID/,
    );
    expect(message(await c.call('WORKER.ACQUIRE', 'orders', 'host-a', 'CLUSTER', 'x'.repeat(65)))).toMatch(
      /^ERR invalid CLUSTER/,
    );
    expect(message(await c.call('WORKER.ACQUIRE', 'orders', 'host-a', 'CLUSTER'))).toBe('ERR syntax error');
    expect(message(await c.call('SEQ.ALLOC', 'orders', '10', 'CLUSTER'))).toBe('ERR syntax error');
    expect(message(await c.call('SEQ.ALLOC', 'orders', '10', 'FOO', OURS))).toBe('ERR syntax error');
    expect(message(await c.call('SNOWFLAKE.NEXT', 'orders', 'COUNT'))).toBe('ERR syntax error');
  });

  it('INFO names the cluster (floe_cluster_uid), empty while unknown', async () => {
    const { c, cluster } = await leaderOf(undefined);
    expect(String(await c.call('INFO', 'server'))).toMatch(/floe_cluster_uid:\r\n/);
    cluster.clusterUid = OURS;
    expect(String(await c.call('INFO', 'server'))).toContain(`floe_cluster_uid:${OURS}\r\n`);
  });
});
