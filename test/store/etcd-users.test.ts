import { afterAll, expect, it } from 'vitest';
import { EtcdCluster } from './etcd-cluster.js';
import { FloeNodes } from './floe-nodes.js';

// Users and permissions on the etcd store: added through a standby (307 to the active node), written to
// etcd, and enforced by every node, which watches them. They survive a kill -9 of the active node.
// Needs `npm run build`.

let etcd: EtcdCluster | undefined;
let floe: FloeNodes | undefined;
afterAll(async () => {
  try {
    await floe?.stop();
    floe?.cleanup();
  } finally {
    etcd?.stop();
  }
});

const basic = (u: string, p: string) => `Basic ${Buffer.from(`${u}:${p}`).toString('base64')}`;

async function acquire(http: string, auth?: string): Promise<number> {
  const res = await fetch(`http://${http}/v1/apps/users-app/workers/acquire`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) },
    body: JSON.stringify({ nodeId: `n-${Math.random()}` }),
    redirect: 'manual',
  });
  await res.text();
  return res.status;
}

async function until(what: string, probe: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

it('users on the etcd store: added through a standby, enforced by every node, kept across failover', async () => {
  etcd = await EtcdCluster.start(3);
  floe = await FloeNodes.create(3, ['--store', 'etcd', '--etcd-endpoints', etcd.endpoints.join(',')]);
  for (const n of floe.nodes) n.start();
  const active = await floe.waitActive();
  for (const n of floe.nodes) await floe.waitServingLeases(n);
  const standby = floe.nodes.find((n) => n !== active)!;
  const res = await fetch(`http://${standby.http}/v1/users`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ user: 'root', password: 'correct horse battery', grants: { '*': ['admin'] } }),
  });
  expect(res.status).toBeLessThan(300);
  await res.text();
  // Every node, active or not, now requires credentials (they watch the users in etcd).
  for (const n of floe.nodes)
    await until(`node ${n.spec.id} enforces auth`, async () => (await acquire(n.http)) === 401);
  // With credentials: the active node grants; a standby redirects.
  expect(await acquire(active.http, basic('root', 'correct horse battery'))).toBe(200);
  expect(await acquire(standby.http, basic('root', 'correct horse battery'))).toBe(307);
  expect(await acquire(active.http, basic('root', 'wrong'))).toBe(401);
  await active.kill9();
  let newActive: string | undefined;
  await until(
    'a new active node grants with credentials',
    async () => {
      for (const n of floe!.nodes.filter((x) => x.running)) {
        if ((await acquire(n.http, basic('root', 'correct horse battery'))) === 200) {
          newActive = n.http;
          return true;
        }
      }
      return false;
    },
    30_000,
  );
  expect(newActive).not.toBe(active.http);
  expect(await acquire(newActive!)).toBe(401);
});
