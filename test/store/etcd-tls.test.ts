import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueCert, makeCa } from '../../src/tls/dev-ca.js';
import { EtcdCluster } from './etcd-cluster.js';
import { FloeNodes } from './floe-nodes.js';

// `floe serve --store etcd` against an etcd that requires TLS with client certificates (--client-cert-auth) and user
// authentication (auth enabled; user `floe` may read and write /floe/ only): --etcd-ca, --etcd-cert, --etcd-key,
// --etcd-user, --etcd-password. A real etcd 3.4 member started by the test (needs `npm run build`).

let dir: string;
let etcd: EtcdCluster;
let floe: FloeNodes | undefined;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'floe-etcd-tls-'));
  const ca = makeCa(dir);
  const server = issueCert(dir, 'etcd', ca, { hosts: ['127.0.0.1', 'localhost'] });
  // With --client-cert-auth and auth enabled, a client that sends no token is the user its certificate's CN names.
  const admin = issueCert(dir, 'root', ca, { hosts: ['127.0.0.1'], commonName: 'root' });
  etcd = await EtcdCluster.start(1, {
    tls: {
      caFile: ca.cert,
      certFile: server.cert,
      keyFile: server.key,
      adminCertFile: admin.cert,
      adminKeyFile: admin.key,
    },
  });
  etcd.ctl('user', 'add', 'root:root-secret');
  etcd.ctl('user', 'grant-role', 'root', 'root');
  etcd.ctl('user', 'add', 'floe:floe-secret');
  etcd.ctl('role', 'add', 'floe');
  etcd.ctl('role', 'grant-permission', 'floe', '--prefix=true', 'readwrite', '/floe');
  etcd.ctl('user', 'grant-role', 'floe', 'floe');
  etcd.ctl('auth', 'enable');
}, 60_000);

afterAll(async () => {
  try {
    await floe?.stop();
    floe?.cleanup();
  } finally {
    etcd?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

describe('etcd store over TLS with client certificates and user authentication', () => {
  it('serves leases with the right credentials; wrong ones give a clear 503, never a grant', async () => {
    const client = issueCert(
      dir,
      'floe-client',
      { cert: join(dir, 'ca.pem'), key: join(dir, 'ca-key.pem') },
      {
        hosts: ['127.0.0.1'],
        commonName: 'floe',
      },
    );
    const common = [
      '--store',
      'etcd',
      '--etcd-endpoints',
      etcd.endpoints.join(','),
      '--etcd-ca',
      join(dir, 'ca.pem'),
      '--etcd-cert',
      client.cert,
      '--etcd-key',
      client.key,
      '--etcd-user',
      'floe',
    ];
    floe = await FloeNodes.create(1, [...common, '--etcd-password', 'floe-secret']);
    const good = floe.nodes[0]!;
    good.start();
    await floe.waitActive(30_000);
    const res = await fetch(`http://${good.http}/v1/apps/tls-app/workers/acquire`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ nodeId: 'h1', requestId: 'r1', incarnation: 'i1' }),
    });
    const g = (await res.json()) as { workerId: number; token: number };
    expect(res.status).toBe(200);
    expect(g.workerId).toBe(0);
    // The record is in etcd under /floe (read back as root).
    expect(etcd.ctl('get', '--prefix', '--keys-only', '/floe/apps/tls-app/')).toContain(
      '/floe/apps/tls-app/w/0',
    );

    // A node with a wrong password never serves: it says etcd refused it.
    const bad = await FloeNodes.create(1, [...common, '--etcd-password', 'wrong']);
    try {
      const n = bad.nodes[0]!;
      n.start();
      await bad.waitListening(n);
      const until = Date.now() + 20_000;
      let last = '';
      for (;;) {
        const r = await fetch(`http://${n.http}/v1/apps/tls-app/workers/acquire`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ nodeId: 'h2' }),
          redirect: 'manual',
        });
        const body = (await r.json()) as { error: string; message: string };
        expect(r.status).not.toBe(200);
        last = `${r.status} ${body.error}: ${body.message}`;
        if (r.status === 503 && body.error === 'store_unavailable' && /authenticat/i.test(body.message))
          break;
        if (Date.now() > until) throw new Error(`no clear authentication error: ${last}`);
        await new Promise((r) => setTimeout(r, 200));
      }
      console.log(`wrong etcd password: ${last}`);
    } finally {
      await bad.stop();
      bad.cleanup();
    }
  }, 90_000);
});
