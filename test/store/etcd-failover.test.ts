import { afterEach, describe, expect, it } from 'vitest';
import { EtcdCluster } from './etcd-cluster.js';
import { FloeNodes } from './floe-nodes.js';
import { checkGrants, runHolders, type WorkloadResult } from './lease-workload.js';

// Faults under load with the etcd store: three `floe serve --store etcd` processes on a real
// 3-member etcd 3.4. Holders renew like the SDK and every grant is recorded; the checker then
// requires: no two holders of one worker ID at once, tokens increasing per worker ID, and every
// floor at or above every earlier holder's acknowledged bound. Needs `npm run build`.

let etcd: EtcdCluster | undefined;
let floe: FloeNodes | undefined;

afterEach(async () => {
  try {
    await floe?.stop();
    floe?.cleanup();
  } finally {
    etcd?.stop();
    floe = undefined;
    etcd = undefined;
  }
});

async function setup(): Promise<{ etcd: EtcdCluster; floe: FloeNodes }> {
  etcd = await EtcdCluster.start(3);
  floe = await FloeNodes.create(3, ['--store', 'etcd', '--etcd-endpoints', etcd.endpoints.join(',')]);
  for (const n of floe.nodes) n.start();
  await floe.waitActive();
  for (const n of floe.nodes) await floe.waitServingLeases(n);
  return { etcd, floe };
}

function report(name: string, r: WorkloadResult): void {
  const errs = [...r.errors].map(([k, v]) => `${k}: ${v}`).join('; ');
  console.log(`${name}: ${r.grants.length} grants, ${r.ops} ops; ${errs || 'no errors'}`);
}

const endpoints = (f: FloeNodes) => () => f.nodes.filter((n) => n.running).map((n) => n.http);

describe('etcd store under faults', () => {
  it('kill -9 of the active Floe node under load: a standby takes over, no double holder', async () => {
    const { floe } = await setup();
    const work = runHolders({
      endpoints: endpoints(floe),
      app: 'kill-active',
      holders: 8,
      durationMs: 20_000,
      ttlMs: 10_000,
    });
    await new Promise((r) => setTimeout(r, 4000));
    const old = (await floe.active())!;
    const killedAt = performance.now();
    await old.kill9();
    const next = await floe.waitActive(30_000, old);
    const failoverMs = performance.now() - killedAt;
    console.log(
      `standby node ${next.spec.id} active ${failoverMs.toFixed(0)} ms after kill -9 of node ${old.spec.id}`,
    );
    expect(next).not.toBe(old);
    const r = await work;
    report('kill active', r);
    expect(checkGrants(r.grants)).toEqual([]);
    // Holders kept their leases across the failover (TTL 10 s > etcd session TTL 6 s): few re-grants.
    expect(r.grants.length).toBeGreaterThan(0);
  });

  it('SIGSTOP of the active Floe node past its etcd lease: another takes over, the paused one stops serving', async () => {
    const { floe } = await setup();
    const work = runHolders({
      endpoints: endpoints(floe),
      app: 'stop-active',
      holders: 6,
      durationMs: 22_000,
      ttlMs: 3_000,
    });
    await new Promise((r) => setTimeout(r, 3000));
    const old = (await floe.active())!;
    old.signal('SIGSTOP');
    const next = await floe.waitActive(30_000, old);
    // Past the paused node's etcd lease (6 s) and its holders' TTL.
    await new Promise((r) => setTimeout(r, 3000));
    old.signal('SIGCONT');
    // The resumed node never serves again on its lapsed session: 503 (no active known yet), then 307 to the new one.
    const until = Date.now() + 10_000;
    for (;;) {
      const res = await fetch(`http://${old.http}/v1/apps/stop-active/workers`, { redirect: 'manual' });
      await res.text();
      expect(res.status).not.toBe(200);
      if (res.status === 307) {
        expect(res.headers.get('location')).toContain(next.http);
        break;
      }
      if (Date.now() > until) throw new Error(`resumed node still answers ${res.status}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const r = await work;
    report('sigstop active', r);
    expect(checkGrants(r.grants)).toEqual([]);
  });

  it('kill -9 of an etcd follower, then of the etcd leader, under load', async () => {
    const { etcd, floe } = await setup();
    const work = runHolders({
      endpoints: endpoints(floe),
      app: 'kill-etcd',
      holders: 8,
      durationMs: 20_000,
      ttlMs: 10_000,
    });
    await new Promise((r) => setTimeout(r, 3000));
    const leader = etcd.leaderIndex();
    expect(leader).toBeGreaterThanOrEqual(0);
    const follower = [0, 1, 2].find((i) => i !== leader)!;
    etcd.kill(follower);
    await new Promise((r) => setTimeout(r, 4000));
    etcd.startMember(follower);
    await etcd.waitHealthy();
    const leader2 = etcd.leaderIndex();
    etcd.kill(leader2);
    console.log(`killed etcd follower e${follower + 1}, then leader e${leader2 + 1}`);
    const r = await work;
    report('kill etcd', r);
    expect(checkGrants(r.grants)).toEqual([]);
    // Still serving after the etcd leader's death (two members left).
    const after = await runHolders({
      endpoints: endpoints(floe),
      app: 'kill-etcd-after',
      holders: 2,
      durationMs: 2000,
      ttlMs: 10_000,
    });
    expect(after.grants.length).toBeGreaterThan(0);
  });

  it('unreachable etcd: a clear 503 naming etcd, never a grant', async () => {
    const { etcd, floe } = await setup();
    const active = (await floe.active())!;
    for (let i = 0; i < 3; i++) etcd.kill(i);
    const bodies: string[] = [];
    for (const n of floe.nodes) {
      const res = await fetch(`http://${n.http}/v1/apps/down/workers/acquire`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ nodeId: 'x' }),
        redirect: 'manual',
        signal: AbortSignal.timeout(10_000),
      });
      const body = (await res.json()) as { error: string; message: string };
      bodies.push(`${n.spec.id}${n === active ? '*' : ''}: ${res.status} ${body.error}: ${body.message}`);
      expect(res.status).not.toBe(200);
      expect([503, 307]).toContain(res.status);
    }
    console.log(bodies.join('\n'));
    // Once the session could not be kept alive, every node says etcd is unreachable.
    const until = Date.now() + 15_000;
    for (;;) {
      const res = await fetch(`http://${active.http}/v1/apps/down/workers/acquire`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ nodeId: 'x' }),
        redirect: 'manual',
      });
      const body = (await res.json()) as { error: string; message: string };
      if (res.status === 503 && body.error === 'store_unavailable') {
        expect(body.message).toContain('etcd unreachable at http://127.0.0.1:');
        break;
      }
      expect(res.status).not.toBe(200);
      if (Date.now() > until) throw new Error(`still ${res.status} ${body.error}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  });
});
