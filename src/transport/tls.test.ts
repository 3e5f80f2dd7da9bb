import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SnapshotMessage } from '../raft/types.js';
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
