import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { etcd3SecurityOptions, parseEtcdSecurity } from './etcd-security.js';

const dir = mkdtempSync(join(tmpdir(), 'floe-etcd-sec-'));
const pem = join(dir, 'x.pem');
writeFileSync(pem, '-----BEGIN CERTIFICATE-----\nnot really\n-----END CERTIFICATE-----\n');
const https = ['https://127.0.0.1:2379'];
const parse = (o: Record<string, string>, endpoints = https, env: NodeJS.ProcessEnv = {}) =>
  parseEtcdSecurity((k) => o[k], endpoints, env);

describe('--etcd-ca/-cert/-key/-user/-password', () => {
  it('accepts a full set, and the password from FLOE_ETCD_PASSWORD', () => {
    const r = parse({ etcdCa: pem, etcdCert: pem, etcdKey: pem, etcdUser: 'floe' }, https, {
      FLOE_ETCD_PASSWORD: 's3cret',
    });
    expect(r).toEqual({ ok: { caFile: pem, certFile: pem, keyFile: pem, user: 'floe', password: 's3cret' } });
    if (!('ok' in r)) throw new Error('unreachable');
    const o = etcd3SecurityOptions(r.ok);
    expect(o.credentials?.rootCertificate.toString()).toContain('BEGIN CERTIFICATE');
    expect(o.credentials?.certChain).toBeDefined();
    expect(o.auth).toMatchObject({ username: 'floe', password: 's3cret' });
    expect(parse({})).toEqual({ ok: {} });
    expect(etcd3SecurityOptions({})).toEqual({});
  });

  it('refuses incomplete or inconsistent settings, naming the flag', () => {
    const err = (r: ReturnType<typeof parse>) => ('error' in r ? r.error : 'accepted');
    expect(err(parse({ etcdCert: pem }))).toContain('--etcd-cert and --etcd-key go together');
    expect(err(parse({ etcdCa: pem }, ['http://127.0.0.1:2379']))).toContain('need https://');
    expect(err(parse({}, ['https://a:1', 'http://b:2']))).toContain('all http:// or all https://');
    expect(err(parse({ etcdUser: 'floe' }))).toContain('--etcd-user needs --etcd-password');
    expect(err(parse({ etcdPassword: 'x' }))).toContain('needs --etcd-user');
    expect(err(parse({ etcdUser: 'a b', etcdPassword: 'x' }))).toContain('--etcd-user must be');
    expect(err(parse({ etcdCa: join(dir, 'missing.pem') }))).toMatch(/--etcd-ca: cannot read .*ENOENT/);
  });
});
