import { X509Certificate } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CertFiles, hasOpenssl, issueCert, makeCa } from './dev-ca.js';
import { loadTlsMaterial, PEER_TLS_LABELS, TlsConfigError } from './material.js';
import { ReloadableTls } from './reloadable.js';

describe.skipIf(!hasOpenssl())('TLS material: checks with clear errors, reload', () => {
  let dir = '';
  let ca: CertFiles;
  let a: CertFiles;
  let b: CertFiles;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'floe-tls-material-'));
    ca = makeCa(dir);
    a = issueCert(dir, 'a', ca, { hosts: ['127.0.0.1', 'localhost'] });
    b = issueCert(dir, 'b', ca, { hosts: ['127.0.0.1'] });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('loads a certificate, its key and a CA, and describes the certificate', () => {
    const m = loadTlsMaterial({ ...a, ca: ca.cert });
    const x = new X509Certificate(readFileSync(a.cert));
    expect(m.info.serialNumber).toBe(x.serialNumber);
    expect(m.info.fingerprint256).toBe(x.fingerprint256);
    expect(m.info.subjectAltName).toContain('IP Address:127.0.0.1');
    expect(m.ca?.length).toBeGreaterThan(0);
  });

  const fails = (f: () => unknown, re: RegExp) => {
    let err: unknown;
    try {
      f();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TlsConfigError);
    expect((err as Error).message).toMatch(re);
  };

  it('names the flag and the file of what is wrong', () => {
    const year = 365 * 86_400_000;
    fails(
      () => loadTlsMaterial(a, undefined, Date.now() + 2 * year),
      /^--tls-cert .*a\.pem: the certificate "CN=127\.0\.0\.1" expired on 20/,
    );
    fails(
      () => loadTlsMaterial(a, undefined, Date.now() - year),
      /^--tls-cert .*a\.pem: .* is not valid before /,
    );
    fails(() => loadTlsMaterial({ ...a, ca: ca.cert }, undefined, Date.now() + 2 * year), /expired/);
    fails(
      () => loadTlsMaterial({ cert: a.cert, key: b.key }),
      /^--tls-key .*b-key\.pem: the key does not belong to the certificate in --tls-cert .*a\.pem/,
    );
    fails(
      () => loadTlsMaterial({ cert: join(dir, 'nope.pem'), key: a.key }),
      /^--tls-cert .*nope\.pem: cannot read the file \(ENOENT\)/,
    );
    const junk = join(dir, 'junk.pem');
    writeFileSync(junk, 'not a certificate\n');
    fails(() => loadTlsMaterial({ cert: junk, key: a.key }), /^--tls-cert .*junk\.pem: no PEM certificate/);
    fails(
      () => loadTlsMaterial({ cert: a.cert, key: junk }),
      /^--tls-key .*junk\.pem: not a usable PEM private key/,
    );
    fails(() => loadTlsMaterial({ ...a, ca: junk }), /^--tls-ca .*junk\.pem: no PEM certificate/);
    const broken = join(dir, 'broken.pem');
    writeFileSync(broken, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
    fails(
      () => loadTlsMaterial({ cert: broken, key: a.key }, PEER_TLS_LABELS),
      /^--peer-tls-cert .*broken\.pem: certificate 1 in the file cannot be parsed/,
    );
  });

  it('reloads new files, and keeps the old material when the new files are bad', () => {
    const live = { cert: join(dir, 'live.pem'), key: join(dir, 'live-key.pem') };
    copyFileSync(a.cert, live.cert);
    copyFileSync(a.key, live.key);
    const t = ReloadableTls.load(live);
    const seen: string[] = [];
    t.onReload((m) => seen.push(m.info.serialNumber));
    const first = t.current.info.serialNumber;
    expect(t.reload()).toMatchObject({ ok: true, changed: false });

    copyFileSync(b.cert, live.cert); // cert replaced, key not yet: a mismatch
    const bad = t.reload();
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.error).toMatch(/^--tls-key .*live-key\.pem: the key does not belong/);
    expect(t.current.info.serialNumber).toBe(first);

    copyFileSync(b.key, live.key);
    const good = t.reload();
    expect(good).toMatchObject({ ok: true, changed: true });
    expect(t.current.info.serialNumber).not.toBe(first);
    expect(seen).toEqual([first, t.current.info.serialNumber]);
  });
});
