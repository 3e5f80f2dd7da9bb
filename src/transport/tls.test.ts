import { execFileSync } from 'node:child_process';
import { randomBytes, X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SnapshotMessage } from '../raft/types.js';
import { issueCert, makeCa } from '../tls/dev-ca.js';
import { startNode, type TestNode, waitFor } from './test-support.js';
import { tlsSocketFactory } from './tls.js';

// A throwaway self-signed certificate, made per run (nothing secret is kept in the repository).
function hasOpenssl(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe.skipIf(!hasOpenssl())('PeerTransport over mutual TLS', () => {
  let dir = '';
  let cert = '';
  let key = '';
  const nodes: TestNode[] = [];

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'floe-tls-'));
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:P-256',
        '-nodes',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
        '-days',
        '1',
        '-subj',
        '/CN=floe-test-peer',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
    cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
    key = readFileSync(join(dir, 'key.pem'), 'utf8');
  });

  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.t.close()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs the same protocol inside TLS and refuses a plain-TCP client', async () => {
    const socketFactory = tlsSocketFactory({ ca: cert, cert, key });
    const a = await startNode(1, new Map(), { socketFactory });
    const b = await startNode(2, new Map(), { socketFactory });
    const plain = await startNode(3, new Map([[2, b.addr]])); // right secret, no TLS
    nodes.push(a, b, plain);
    a.t.addPeer(2, b.addr);
    b.t.addPeer(1, a.addr);
    b.t.addPeer(3, plain.addr);
    const all = [...a.emitters, ...b.emitters, ...plain.emitters];
    await waitFor(all, () => a.t.stats().peers[2]!.connected && b.t.stats().peers[1]!.connected, 'TLS links');
    const data = randomBytes(3 * 1024 * 1024);
    const snap: SnapshotMessage = {
      type: 'snap',
      from: 1,
      to: 2,
      term: 1,
      snapshot: { metadata: { index: 5, term: 1, conf: { voters: [1, 2], learners: [] } }, data },
    };
    a.t.send([{ type: 'heartbeat', from: 1, to: 2, term: 1, commit: 0, context: new Uint8Array(0) }, snap]);
    await waitFor(all, () => b.inbox.length === 2 && a.snapshotStatus.length === 1, 'delivery over TLS');
    expect(a.snapshotStatus).toEqual([{ peer: 2, ok: true }]);
    const got = b.inbox.find((m): m is SnapshotMessage => m.type === 'snap')!;
    expect(Buffer.from(got.snapshot.data).equals(data)).toBe(true);

    // The plain-TCP node knows the secret but not TLS: it never gets a connection either way.
    await waitFor(all, () => plain.t.stats().peers[2]!.dialFailures >= 1, 'the plain dial to fail');
    plain.t.send([{ type: 'heartbeat', from: 3, to: 2, term: 1, commit: 0, context: new Uint8Array(0) }]);
    expect(plain.t.stats().peers[2]!.connected).toBe(false);
    expect(b.inbox.every((m) => m.from === 1)).toBe(true);
  });
});

describe.skipIf(!hasOpenssl())('peer TLS: certificate rotation and a foreign CA', () => {
  let dir = '';
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'floe-tls-rotate-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('update() gives later connections the new certificate; a peer of another CA is refused', async () => {
    const ca = makeCa(dir);
    const one = issueCert(dir, 'one', ca, { hosts: ['127.0.0.1'] });
    const two = issueCert(dir, 'two', ca, { hosts: ['127.0.0.1'] });
    const other = makeCa(dir, 'other', '/CN=another CA');
    const stranger = issueCert(dir, 'stranger', other, { hosts: ['127.0.0.1'] });
    const pem = (p: string) => readFileSync(p);
    const factory = tlsSocketFactory({ ca: pem(ca.cert), cert: pem(one.cert), key: pem(one.key) });
    const accepted: string[] = [];
    let onAccept: ((serial: string) => void) | undefined;
    const server = factory.createServer((s) => {
      const serial = String((s as TLSSocket).getPeerCertificate().serialNumber);
      accepted.push(serial);
      onAccept?.(serial);
      s.end();
    });
    const nextAccept = () => new Promise<string>((r) => (onAccept = r));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    const serialOf = (f: { cert: string }) => new X509Certificate(pem(f.cert)).serialNumber;
    // Resolves with the server's serial once the server has accepted and closed (it ends every connection).
    const dial = (f: typeof factory) =>
      new Promise<string>((resolve, reject) => {
        let serial = '';
        const s = f.connect({ host: '127.0.0.1', port }, () => {
          serial = (s as TLSSocket).getPeerCertificate().serialNumber;
        }) as TLSSocket;
        s.resume();
        s.on('error', reject);
        s.on('close', () => (serial ? resolve(serial) : reject(new Error('closed before the handshake'))));
      });
    try {
      expect(await dial(factory)).toBe(serialOf(one));
      factory.update({ ca: pem(ca.cert), cert: pem(two.cert), key: pem(two.key) });
      const seen = nextAccept();
      expect(await dial(factory)).toBe(serialOf(two)); // the server's new certificate
      expect(await seen).toBe(serialOf(two)); // and the dialler's
      // A member whose certificate another CA signed: its dial fails (it does not trust ours) and
      // ours does not trust it either.
      const foreign = tlsSocketFactory({
        ca: pem(other.cert),
        cert: pem(stranger.cert),
        key: pem(stranger.key),
      });
      await expect(dial(foreign)).rejects.toThrow(/certificate/);
      const mixed = tlsSocketFactory({ ca: pem(ca.cert), cert: pem(stranger.cert), key: pem(stranger.key) });
      const before = accepted.length;
      await dial(mixed).then(
        () => undefined,
        () => undefined,
      );
      expect(accepted.length).toBe(before); // the server refused its certificate in the handshake
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
