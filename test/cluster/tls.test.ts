// TLS end to end on real `floe serve` processes: redis-cli --tls, ioredis and the SDK over TLS, members
// over mutual TLS (and HTTPS between themselves), client certificates required, SIGHUP reload, and the
// errors for bad or expired certificates at start. Certificates are made per run with openssl.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FloeClient } from '../../src/client/floe-client.js';
import { type CertFiles, hasOpenssl, issueCert, issueCertWithDates, makeCa } from '../../src/tls/dev-ca.js';
import { type TlsClientOptions, tlsFetch } from '../../src/tls/fetch.js';
import { Cluster, type ClusterView, floeBin, freePorts, until } from './harness.js';

function redisCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('redis-cli', args, { timeout: 15_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

async function httpsJson<T>(
  url: string,
  tls: TlsClientOptions,
): Promise<{ status: number; body: T } | undefined> {
  try {
    const res = await tlsFetch(tls)(url, { signal: AbortSignal.timeout(2000) });
    return { status: res.status, body: JSON.parse(await res.text()) as T };
  } catch {
    return undefined;
  }
}

/** The serial number of the certificate a TLS server presents to a new connection. */
function servedSerial(port: number, ca: string, client?: CertFiles): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect(
      {
        host: '127.0.0.1',
        port,
        ca: readPem(ca),
        ...(client ? { cert: readPem(client.cert), key: readPem(client.key) } : {}),
      },
      () => {
        const serial = s.getPeerCertificate().serialNumber;
        s.destroy();
        resolve(serial);
      },
    );
    s.on('error', reject);
  });
}

import { readFileSync } from 'node:fs';

const readPem = (p: string) => readFileSync(p);

describe.skipIf(!hasOpenssl())('TLS on a real 3-node cluster: clients and peers', () => {
  let dir = '';
  let ca: CertFiles;
  let node: CertFiles;
  let cluster: Cluster;
  let leader = 0;
  const tlsOpts = () => ({ ca: readPem(ca.cert) });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'floe-tls-cluster-'));
    ca = makeCa(dir);
    node = issueCert(dir, 'node', ca, { hosts: ['127.0.0.1', 'localhost'] });
    cluster = await Cluster.create({
      size: 3,
      extraArgs: [
        '--tls-cert',
        node.cert,
        '--tls-key',
        node.key,
        '--tls-ca',
        ca.cert,
        '--peer-tls-cert',
        node.cert,
        '--peer-tls-key',
        node.key,
        '--peer-tls-ca',
        ca.cert,
        '--seq-auto-create',
      ],
    });
    cluster.startAll();
    // Every member lists every member's client addresses: address publication went over HTTPS.
    leader = await until(
      'a leader seen over HTTPS, all addresses published',
      async () => {
        const views = await Promise.all(
          cluster.nodes.map((n) => httpsJson<ClusterView>(`https://${n.http}/v1/cluster`, tlsOpts())),
        );
        const v = views.find((x) => x?.status === 200 && x.body.role === 'leader');
        if (!v || v.body.members.some((m) => m.httpAddr === null)) return undefined;
        return v.body.id;
      },
      30_000,
    );
  }, 60_000);

  afterAll(async () => {
    await cluster?.stopAll();
    cluster?.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  const resp = (id: number) => String(cluster.node(id).spec.respPort);
  const follower = () => cluster.nodes.find((n) => n.spec.id !== leader)!.spec.id;

  it('redis-cli --tls works (and follows MOVED with -c); plaintext on the TLS port gets nothing', async () => {
    const ping = await redisCli(['--tls', '--cacert', ca.cert, '-p', resp(leader), 'PING']);
    expect(ping.stdout.trim()).toBe('PONG');
    const incr = await redisCli([
      '-c',
      '--tls',
      '--cacert',
      ca.cert,
      '-p',
      resp(follower()),
      'INCR',
      'tls-seq',
    ]);
    expect(incr.stdout.trim()).toMatch(/^\d+$/);
    const plain = await redisCli(['-p', resp(leader), 'PING']);
    expect(plain.stdout.trim()).not.toBe('PONG');
    // Without the CA the server's certificate is not trusted.
    const untrusted = await redisCli(['--tls', '-p', resp(leader), 'PING']);
    expect(untrusted.stdout.trim()).not.toBe('PONG');
    expect(untrusted.stderr + untrusted.stdout).toMatch(/certificate/i);
  });

  it('ioredis with tls options', async () => {
    const r = new Redis({
      host: '127.0.0.1',
      port: Number(resp(leader)),
      tls: { ca: readPem(ca.cert) },
      lazyConnect: true,
      maxRetriesPerRequest: 1,
    });
    try {
      await r.connect();
      expect(await r.ping()).toBe('PONG');
      const a = await r.incr('tls-io');
      expect(await r.incr('tls-io')).toBe(a + 1);
    } finally {
      r.disconnect();
    }
  });

  it('the SDK over https: a follower redirects to the https leader; a member leases its Snowflake worker over https', async () => {
    const f = cluster.node(follower());
    const client = new FloeClient({
      endpoints: [`https://${f.http}`],
      tls: tlsOpts(),
      requestTimeoutMs: 2000,
    });
    const lease = await client.leaseWorker({ app: 'tls-app', nodeId: 'svc-1', ttlMs: 6000 });
    expect(lease.workerId).toBeGreaterThanOrEqual(0);
    await lease.release();
    // SNOWFLAKE.NEXT on a follower: the member acquires its worker ID through its own HTTPS API.
    const created = await redisCli([
      '-c',
      '--tls',
      '--cacert',
      ca.cert,
      '-p',
      resp(leader),
      'SNOWFLAKE.CREATE',
      'tls-ids',
    ]);
    expect(created.stdout).toMatch(/tls-ids/);
    const id = await redisCli([
      '--tls',
      '--cacert',
      ca.cert,
      '-p',
      resp(f.spec.id),
      'SNOWFLAKE.NEXT',
      'tls-ids',
    ]);
    expect(id.stdout.trim()).toMatch(/^\d+$/);
    // A node-mode sequence: a follower allocates its segments from the leader over HTTPS.
    await redisCli([
      '-c',
      '--tls',
      '--cacert',
      ca.cert,
      '-p',
      resp(leader),
      'SEQ.CREATE',
      'tls-node',
      'MODE',
      'node',
      'STEP',
      '10',
    ]);
    const fromFollower = await redisCli([
      '--tls',
      '--cacert',
      ca.cert,
      '-p',
      resp(f.spec.id),
      'INCR',
      'tls-node',
    ]);
    expect(fromFollower.stdout.trim()).toMatch(/^\d+$/);
  }, 30_000);

  it('peers: the peer port speaks only mutual TLS', async () => {
    const peerPort = cluster.node(leader).spec.peerPort;
    // Plain TCP: the bytes are not TLS, the server closes.
    const plain = netConnect({ host: '127.0.0.1', port: peerPort });
    plain.on('error', () => {});
    plain.write(randomBytes(64));
    await once(plain, 'close');
    // TLS without a client certificate: refused during the handshake.
    const noCert = tlsConnect({ host: '127.0.0.1', port: peerPort, ca: readPem(ca.cert) });
    const err = await new Promise<Error | undefined>((resolve) => {
      noCert.on('error', resolve);
      noCert.on('close', () => resolve(undefined));
      noCert.on('secureConnect', () => noCert.write('x'));
    });
    expect(String(err)).toMatch(/certificate|alert|ECONNRESET/i);
  });
});

describe.skipIf(!hasOpenssl())('TLS with client certificates required on a 3-node cluster', () => {
  it("members show their own certificate on each other's HTTPS ports (address publication, Snowflake leases)", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'floe-tls-require-'));
    const ca = makeCa(dir);
    const node = issueCert(dir, 'node', ca, { hosts: ['127.0.0.1'] });
    const client = issueCert(dir, 'client', ca, { hosts: [], commonName: 'ops' });
    const cluster = await Cluster.create({
      size: 3,
      extraArgs: [
        '--tls-cert',
        node.cert,
        '--tls-key',
        node.key,
        '--tls-ca',
        ca.cert,
        '--tls-client-auth',
        'require',
      ],
    });
    const tls = { ca: readPem(ca.cert), cert: readPem(client.cert), key: readPem(client.key) };
    try {
      cluster.startAll();
      const leader = await until(
        'a leader over HTTPS with every address published',
        async () => {
          const views = await Promise.all(
            cluster.nodes.map((n) => httpsJson<ClusterView>(`https://${n.http}/v1/cluster`, tls)),
          );
          const v = views.find((x) => x?.status === 200 && x.body.role === 'leader');
          return v?.body.members.every((m) => m.httpAddr !== null) ? v.body.id : undefined;
        },
        30_000,
      );
      const follower = cluster.nodes.find((n) => n.spec.id !== leader)!;
      const cli = (port: number, ...cmd: string[]) =>
        redisCli([
          '-c',
          '--tls',
          '--cacert',
          ca.cert,
          '--cert',
          client.cert,
          '--key',
          client.key,
          '-p',
          String(port),
          ...cmd,
        ]);
      await cli(cluster.node(leader).spec.respPort, 'SNOWFLAKE.CREATE', 'req-ids');
      const id = await cli(follower.spec.respPort, 'SNOWFLAKE.NEXT', 'req-ids');
      expect(id.stdout.trim()).toMatch(/^\d+$/);
    } finally {
      await cluster.stopAll();
      cluster.cleanup();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

/** One `floe serve` child with its stderr collected, waited on by the lines it prints. */
class ServeProcess {
  readonly proc: ChildProcess;
  output = '';
  private waiters: { re: RegExp; from: number; resolve: () => void }[] = [];
  constructor(args: string[]) {
    this.proc = spawn(process.execPath, [floeBin, 'serve', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, FLOE_LOG_LEVEL: 'info' },
    });
    const onData = (b: Buffer) => {
      this.output += b.toString();
      this.waiters = this.waiters.filter((w) => {
        if (!w.re.test(this.output.slice(w.from))) return true;
        w.resolve();
        return false;
      });
    };
    this.proc.stdout!.on('data', onData);
    this.proc.stderr!.on('data', onData);
  }
  /** Resolves when `re` appears in the output after position `from` (default: anywhere). */
  waitFor(re: RegExp, from = 0): Promise<void> {
    if (re.test(this.output.slice(from))) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const w = { re, from, resolve };
      this.waiters.push(w);
      this.proc.once('exit', (code) =>
        reject(new Error(`floe serve exited (${code}) before ${re}: ${this.output}`)),
      );
    });
  }
  /** Waits for the exit and the end of its output ('close': stdio drained). */
  async exit(): Promise<number | null> {
    if (this.proc.exitCode === null || this.proc.stdout!.readable || this.proc.stderr!.readable)
      await once(this.proc, 'close');
    return this.proc.exitCode;
  }
  async stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = once(this.proc, 'exit');
    this.proc.kill('SIGKILL');
    await exited;
  }
}

describe.skipIf(!hasOpenssl())(
  'TLS on one node: client certificates, SIGHUP reload, bad certificates',
  () => {
    let dir = '';
    let ca: CertFiles;
    let a: CertFiles;
    let b: CertFiles;
    let client: CertFiles;
    let serve: ServeProcess | undefined;
    let ports: number[] = [];
    const live = () => ({ cert: join(dir, 'live.pem'), key: join(dir, 'live-key.pem') });
    const args = (extra: string[]) => [
      '--data-dir',
      join(dir, `data-${randomBytes(4).toString('hex')}`),
      '--peer-addr',
      `127.0.0.1:${ports[0]}`,
      '--http-addr',
      `127.0.0.1:${ports[1]}`,
      '--resp-addr',
      `127.0.0.1:${ports[2]}`,
      ...extra,
    ];

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'floe-tls-node-'));
      ca = makeCa(dir);
      a = issueCert(dir, 'a', ca, { hosts: ['127.0.0.1'] });
      b = issueCert(dir, 'b', ca, { hosts: ['127.0.0.1'] });
      client = issueCert(dir, 'client', ca, { hosts: [], commonName: 'app-1' });
      ports = await freePorts(3);
    }, 30_000);

    afterAll(async () => {
      await serve?.stop();
      rmSync(dir, { recursive: true, force: true });
    });

    it('--tls-client-auth require: no client certificate, no connection; reload on SIGHUP keeps a bad file out', async () => {
      copyFileSync(a.cert, live().cert);
      copyFileSync(a.key, live().key);
      serve = new ServeProcess(
        args([
          '--tls-cert',
          live().cert,
          '--tls-key',
          live().key,
          '--tls-ca',
          ca.cert,
          '--tls-client-auth',
          'require',
          '--peer-tls-cert',
          live().cert,
          '--peer-tls-key',
          live().key,
          '--peer-tls-ca',
          ca.cert,
        ]),
      );
      await serve.waitFor(/serving .*client tls/);
      const [peerPort, httpPort, respPort] = ports as [number, number, number];

      const withCert = await redisCli([
        '--tls',
        '--cacert',
        ca.cert,
        '--cert',
        client.cert,
        '--key',
        client.key,
        '-p',
        String(respPort),
        'PING',
      ]);
      expect(withCert.stdout.trim()).toBe('PONG');
      const without = await redisCli(['--tls', '--cacert', ca.cert, '-p', String(respPort), 'PING']);
      expect(without.stdout.trim()).not.toBe('PONG');
      const https = tlsFetch({ ca: readPem(ca.cert), cert: readPem(client.cert), key: readPem(client.key) });
      expect((await https(`https://127.0.0.1:${httpPort}/healthz`)).status).toBe(200);
      await expect(
        tlsFetch({ ca: readPem(ca.cert) })(`https://127.0.0.1:${httpPort}/healthz`),
      ).rejects.toThrow();

      const serialA = new (await import('node:crypto')).X509Certificate(readPem(a.cert)).serialNumber;
      const serialB = new (await import('node:crypto')).X509Certificate(readPem(b.cert)).serialNumber;
      expect(await servedSerial(respPort, ca.cert, client)).toBe(serialA);
      expect(await servedSerial(peerPort, ca.cert, client)).toBe(serialA);

      // New files, SIGHUP: new connections (RESP and HTTPS) get the new certificate.
      copyFileSync(b.cert, live().cert);
      copyFileSync(b.key, live().key);
      let mark = serve.output.length;
      serve.proc.kill('SIGHUP');
      await serve.waitFor(/SIGHUP: client TLS: reloaded \(serial/, mark);
      expect(await servedSerial(respPort, ca.cert, client)).toBe(serialB);
      expect(await servedSerial(httpPort, ca.cert, client)).toBe(serialB);
      await serve.waitFor(/SIGHUP: peer TLS: reloaded \(serial/, mark);
      expect(await servedSerial(peerPort, ca.cert, client)).toBe(serialB);

      // A key that does not match: the reload fails naming the file, the old certificate stays.
      copyFileSync(a.key, live().key);
      mark = serve.output.length;
      serve.proc.kill('SIGHUP');
      await serve.waitFor(
        /SIGHUP: client TLS: reload failed, old certificates kept: --tls-key .*live-key\.pem: the key does not belong/,
        mark,
      );
      await serve.waitFor(
        /"level":50.*client TLS reload failed, keeping the certificates in use: --tls-key/,
        mark,
      );
      expect(await servedSerial(respPort, ca.cert, client)).toBe(serialB);
      expect(serve.proc.exitCode).toBeNull();
      await serve.stop();
    }, 60_000);

    it('--tls-client-auth request: without a certificate is fine, with one the CA did not sign is refused', async () => {
      const other = makeCa(join(dir, 'other'), 'other', '/CN=not our CA');
      const stranger = issueCert(join(dir, 'other'), 'stranger', other, {
        hosts: [],
        commonName: 'stranger',
      });
      const p = new ServeProcess(
        args(['--tls-cert', a.cert, '--tls-key', a.key, '--tls-ca', ca.cert, '--tls-client-auth', 'request']),
      );
      try {
        await p.waitFor(/serving .*client tls/);
        const [, httpPort, respPort] = ports as [number, number, number];
        const cli = (extra: string[]) =>
          redisCli(['--tls', '--cacert', ca.cert, ...extra, '-p', String(respPort), 'PING']).then((r) =>
            r.stdout.trim(),
          );
        expect(await cli([])).toBe('PONG');
        expect(await cli(['--cert', client.cert, '--key', client.key])).toBe('PONG');
        expect(await cli(['--cert', stranger.cert, '--key', stranger.key])).not.toBe('PONG');
        const url = `https://127.0.0.1:${httpPort}/healthz`;
        expect((await tlsFetch({ ca: readPem(ca.cert) })(url)).status).toBe(200);
        expect(
          (
            await tlsFetch({ ca: readPem(ca.cert), cert: readPem(client.cert), key: readPem(client.key) })(
              url,
            )
          ).status,
        ).toBe(200);
        await expect(
          tlsFetch({ ca: readPem(ca.cert), cert: readPem(stranger.cert), key: readPem(stranger.key) })(url),
        ).rejects.toThrow();
      } finally {
        await p.stop();
      }
    }, 30_000);

    it('an expired certificate, a key of another certificate or a bad flag stop the start with the file named', async () => {
      const old = issueCertWithDates(dir, 'old', ca, {
        commonName: 'old-node',
        start: '20200101000000Z',
        end: '20200201000000Z',
      });
      let p = new ServeProcess(args(['--tls-cert', old.cert, '--tls-key', old.key]));
      expect(await p.exit()).toBe(1);
      expect(p.output).toContain(
        `--tls-cert ${old.cert}: the certificate "CN=old-node" expired on 2020-02-01T00:00:00.000Z`,
      );

      p = new ServeProcess(
        args(['--peer-tls-cert', a.cert, '--peer-tls-key', b.key, '--peer-tls-ca', ca.cert]),
      );
      expect(await p.exit()).toBe(1);
      expect(p.output).toContain(
        `--peer-tls-key ${b.key}: the key does not belong to the certificate in --peer-tls-cert ${a.cert}`,
      );

      p = new ServeProcess(args(['--tls-cert', a.cert, '--tls-key', a.key, '--tls-client-auth', 'require']));
      expect(await p.exit()).toBe(2);
      expect(p.output).toContain('--tls-client-auth require needs --tls-ca');
    }, 30_000);
  },
);

describe.skipIf(!hasOpenssl())('floe dev --tls: a local CA and a TLS cluster in one command', () => {
  it('makes the CA and node certificates, and redis-cli, curl-like HTTPS and floe cluster status work with the CA', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'floe-dev-tls-'));
    const [base] = await freePorts(1);
    const dev = spawn(
      process.execPath,
      [floeBin, 'dev', '--tls', '--nodes', '1', '--data-dir', dir, '--base-port', String(base)],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    dev.stdout!.on('data', (b: Buffer) => (out += b));
    dev.stderr!.on('data', (b: Buffer) => (out += b));
    try {
      const ca = join(dir, 'tls', 'ca.pem');
      await until(
        'the dev node to elect itself over TLS',
        async () => {
          if (!/over TLS; try:/.test(out)) return undefined;
          const v = await httpsJson<ClusterView>(`https://127.0.0.1:${base}/v1/cluster`, { ca: readPem(ca) });
          return v?.status === 200 && v.body.role === 'leader' ? true : undefined;
        },
        30_000,
      );
      expect(out).toContain(`made a local CA and node certificates in ${join(dir, 'tls')}`);
      const ping = await redisCli(['--tls', '--cacert', ca, '-p', String(base! + 10), 'PING']);
      expect(ping.stdout.trim()).toBe('PONG');
      const status = await new Promise<string>((resolve) =>
        execFile(
          process.execPath,
          [floeBin, 'cluster', 'status', '--endpoint', `https://127.0.0.1:${base}`],
          { env: { ...process.env, FLOE_TLS_CA: ca } },
          (_e, stdout, stderr) => resolve(stdout + stderr),
        ),
      );
      expect(status).toMatch(/^leader 1 /);
      // Without the CA the node's certificate is not trusted, and the CLI says so.
      const untrusted = await new Promise<string>((resolve) =>
        execFile(
          process.execPath,
          [floeBin, 'cluster', 'status', '--endpoint', `https://127.0.0.1:${base}`],
          (_e, stdout, stderr) => resolve(stdout + stderr),
        ),
      );
      expect(untrusted).toMatch(/cannot reach Floe at https:\/\/127\.0\.0\.1:\d+: .*certificate/);
    } finally {
      const exited = once(dev, 'exit');
      dev.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
