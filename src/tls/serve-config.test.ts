import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveServeConfig } from '../node/config.js';

describe('floe serve TLS settings (flags and config file)', () => {
  it('no TLS flags: plaintext', () => {
    const c = resolveServeConfig({}, {});
    expect(c.tls).toBeUndefined();
    expect(c.peerTls).toBeUndefined();
  });

  it('client TLS: absolute paths, client auth none by default', () => {
    const c = resolveServeConfig({ tlsCert: 'c.pem', tlsKey: 'k.pem' } as never, {});
    expect(c.tls).toEqual({ cert: resolve('c.pem'), key: resolve('k.pem'), clientAuth: 'none' });
    const r = resolveServeConfig(
      { tlsCert: 'c.pem', tlsKey: 'k.pem', tlsCa: 'ca.pem', tlsClientAuth: 'require' } as never,
      {},
    );
    expect(r.tls).toEqual({
      cert: resolve('c.pem'),
      key: resolve('k.pem'),
      ca: resolve('ca.pem'),
      clientAuth: 'require',
    });
  });

  it('peer TLS needs all three files', () => {
    const c = resolveServeConfig(
      { peerTlsCert: 'p.pem', peerTlsKey: 'pk.pem', peerTlsCa: 'ca.pem' } as never,
      {},
    );
    expect(c.peerTls).toEqual({ cert: resolve('p.pem'), key: resolve('pk.pem'), ca: resolve('ca.pem') });
  });

  it.each([
    [{ tlsCert: 'c.pem' }, '--tls-cert and --tls-key go together: give both or neither'],
    [{ tlsKey: 'k.pem' }, '--tls-cert and --tls-key go together'],
    [{ tlsCa: 'ca.pem' }, '--tls-ca needs --tls-cert and --tls-key'],
    [{ tlsClientAuth: 'require' }, '--tls-client-auth needs --tls-cert and --tls-key'],
    [
      { tlsCert: 'c', tlsKey: 'k', tlsClientAuth: 'sometimes' },
      '--tls-client-auth must be none, request or require (got "sometimes")',
    ],
    [{ tlsCert: 'c', tlsKey: 'k', tlsClientAuth: 'request' }, '--tls-client-auth request needs --tls-ca'],
    [{ peerTlsCert: 'p', peerTlsKey: 'k' }, '--peer-tls-cert, --peer-tls-key and --peer-tls-ca go together'],
  ])('refuses %j', (flags, message) => {
    expect(() => resolveServeConfig(flags as never, {})).toThrow(message);
  });

  it('reads the same settings from --config, with flags winning', () => {
    const dir = mkdtempSync(join(tmpdir(), 'floe-tls-config-'));
    try {
      const file = join(dir, 'floe.json');
      writeFileSync(
        file,
        JSON.stringify({
          tlsCert: '/etc/floe/node.pem',
          tlsKey: '/etc/floe/node-key.pem',
          tlsClientAuth: 'none',
        }),
      );
      expect(resolveServeConfig({ config: file }, {}).tls).toEqual({
        cert: '/etc/floe/node.pem',
        key: '/etc/floe/node-key.pem',
        clientAuth: 'none',
      });
      expect(resolveServeConfig({ config: file, tlsCert: '/x.pem' } as never, {}).tls?.cert).toBe('/x.pem');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
