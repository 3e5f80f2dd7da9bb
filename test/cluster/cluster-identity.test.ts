// The cluster identity with real processes (review of FS-19): two Floe clusters on one machine, as when a client's
// endpoint list, DNS name or balancer pool reaches the wrong one. The UUID is minted once, the same on every member,
// kept across kill -9; `floe cluster uid` prints it; a client pinned to cluster A never holds a lease of cluster B,
// and its requests change nothing on B.
import { execFile } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { FloeClient } from '../../src/client/floe-client.js';
import { Cluster, floeBin, http, until, waitForLeader } from './harness.js';
import { cliRecord, redisCli } from './lease-cluster.js';

const clusters: Cluster[] = [];
afterEach(async () => {
  for (const c of clusters.splice(0)) {
    await c.stopAll();
    c.cleanup();
  }
});

function floe(...args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(process.execPath, [floeBin, ...args], { timeout: 15_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
    ),
  );
}

async function uidOf(c: Cluster, id: number): Promise<string | null | undefined> {
  const r = await http<{ cluster?: string | null }>(c.node(id).http, 'GET', '/v1/cluster', undefined, 1000);
  return r.status === 200 ? r.body.cluster : undefined;
}

async function started(size: number): Promise<Cluster> {
  const c = await Cluster.create({ size });
  clusters.push(c);
  c.startAll();
  await waitForLeader(c);
  return c;
}

describe('cluster identity (real processes)', () => {
  it('one UUID on every member, kept across kill -9 of the leader; a client pinned to A gets no lease of B', async () => {
    const [a, b] = await Promise.all([started(3), started(1)]);
    const uid = (
      await until(
        'A to mint its UUID',
        async () =>
          (await floe('cluster', 'uid', '--endpoint', a.node(1).http).catch(() => '')).trim() || undefined,
      )
    ).trim();
    expect(uid).toMatch(/^[0-9a-f-]{36}$/);
    for (const n of a.nodes)
      expect(
        await until(`node ${n.spec.id} to learn it`, async () => (await uidOf(a, n.spec.id)) ?? undefined),
      ).toBe(uid);
    const bUid = await until('B to mint its UUID', async () => (await uidOf(b, 1)) ?? undefined);
    expect(bUid).not.toBe(uid);

    const leader = await waitForLeader(a);
    await a.node(leader).kill9();
    a.node(leader).start();
    await waitForLeader(a);
    expect(
      await until('the restarted node to answer', async () => (await uidOf(a, leader)) ?? undefined),
    ).toBe(uid);

    // B first in the list: the request names A, so B refuses it (421) before acting, and its answer names B.
    const client = new FloeClient({
      endpoints: [b.node(1).http, ...a.nodes.map((n) => n.http)],
      clusterUid: uid,
    });
    const lease = await client.leaseWorker({ app: 'svc', nodeId: 'host-1' });
    try {
      // Any member answers (redirected to the leader); under load one may answer 503 while a leader settles.
      const onA = await until('A to list its leases', async () => {
        for (const n of a.nodes) {
          const r = await http<{ leases?: { token: number; nodeId: string }[] }>(
            n.http,
            'GET',
            '/v1/apps/svc/workers',
          );
          if (r.status === 200 && r.body.leases) return r.body.leases;
        }
        return undefined;
      });
      expect(onA.map((l) => l.token)).toContain(lease.token);
      expect(client.transport.cluster.refused).toBeGreaterThanOrEqual(1);
      // Before the SDK named its cluster in the request, B granted a lease here that sat unused for a TTL.
      const onB = await http<{ leases?: unknown[] }>(b.node(1).http, 'GET', '/v1/apps/svc/workers');
      expect(onB.status).toBe(200);
      expect(onB.body.leases).toEqual([]);
      // Renewals go on against A only.
      await lease.renewNow();
    } finally {
      await lease.release();
    }

    // The same over RESP with redis-cli: a WORKER.ACQUIRE naming A (`CLUSTER uuid`) is refused by B before it acts.
    const onBResp = await redisCli([
      '-p',
      String(b.node(1).spec.respPort),
      'WORKER.ACQUIRE',
      'svc',
      'host-resp',
      'CLUSTER',
      uid,
    ]);
    expect(onBResp.stdout.trim()).toBe(
      `ERR cluster_mismatch: this node belongs to cluster ${bUid}; the request is meant for ${uid}`,
    );
    const bList = await redisCli(['-p', String(b.node(1).spec.respPort), 'WORKER.LIST', 'svc']);
    expect(bList.stdout).not.toContain('host-resp');
    // On A it is granted (redis-cli -c follows MOVED to the leader), and the record names A.
    const onAResp = await until('A to grant over RESP', async () => {
      const r = await redisCli([
        '-c',
        '-p',
        String(a.node(1).spec.respPort),
        'WORKER.ACQUIRE',
        'svc',
        'host-resp',
        'CLUSTER',
        uid,
      ]);
      return /^worker_id/.test(r.stdout) ? cliRecord(r.stdout) : undefined;
    });
    expect(onAResp.node_id).toBe('host-resp');
    expect(onAResp.cluster).toBe(uid);
    expect((await redisCli(['-p', String(b.node(1).spec.respPort), 'INFO', 'server'])).stdout).toContain(
      `floe_cluster_uid:${bUid}`,
    );
  }, 120_000);
});
