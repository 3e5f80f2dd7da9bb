import { describe, expect, it } from 'vitest';
import { formatHostPort, HostPortError, parseHostPort, tryParseHostPort } from './host-port.js';

describe('parseHostPort: one set of rules for every address', () => {
  it('accepts names, IPv4 and bracketed IPv6 (with a zone)', () => {
    expect(parseHostPort('127.0.0.1:7390', 'x')).toEqual({ host: '127.0.0.1', port: 7390 });
    expect(parseHostPort('node-2.floe.internal:80', 'x')).toEqual({ host: 'node-2.floe.internal', port: 80 });
    expect(parseHostPort('localhost:65535', 'x')).toEqual({ host: 'localhost', port: 65535 });
    expect(parseHostPort('[::1]:7001', 'x')).toEqual({ host: '::1', port: 7001 });
    expect(parseHostPort('[::]:7001', 'x')).toEqual({ host: '::', port: 7001 });
    expect(parseHostPort('[2001:db8::7]:1', 'x')).toEqual({ host: '2001:db8::7', port: 1 });
    expect(parseHostPort('[fe80::1%eth0]:7001', 'x')).toEqual({ host: 'fe80::1%eth0', port: 7001 });
    expect(parseHostPort('0.0.0.0:0', 'x', { allowPortZero: true })).toEqual({ host: '0.0.0.0', port: 0 });
  });

  it.each([
    ['', /empty/],
    ['127.0.0.1', /the port is missing \(":PORT"\)/],
    ['127.0.0.1:', /the port is missing/],
    [':7001', /the host is missing/],
    ['[::1]', /the port is missing \(":PORT" after "\]"\)/],
    ['[::1]:', /the port is missing/],
    ['[::1]7001', /expected ":PORT" after "\]"/],
    ['[::1:7001', /"\[" without "\]"/],
    ['[node1]:7001', /"\[node1\]" does not hold an IPv6 address/],
    ['::1:7001', /an IPv6 address needs brackets: \[::1\]:7001/],
    ['2001:db8::7:80', /needs brackets/],
    ['host:port', /the port "port" is not a number/],
    ['host:-1', /the port "-1" is not a number/],
    ['host:+80', /is not a number/],
    ['host:0x50', /is not a number/],
    ['host:123456', /is not a number/],
    ['host:65536', /the port 65536 is not in 1\.\.65535/],
    ['host:0', /the port 0 is not in 1\.\.65535/],
    [' host:80', /whitespace/],
    ['host:80\n', /whitespace/],
    ['user@host:80', /"user@host" is not a host name or IPv4 address/],
    ['http://host:80', /a URL, not an address \(drop "http:\/\/"\)/],
  ])('refuses %j naming the reason', (value, reason) => {
    let err: unknown;
    try {
      parseHostPort(value, '--peer-addr');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(HostPortError);
    expect((err as Error).message).toMatch(/^--peer-addr must be HOST:PORT \(IPv6 as \[ADDR\]:PORT\), got /);
    expect((err as Error).message).toMatch(reason);
  });

  it('refuses what is not a string; the try form and the formatter', () => {
    expect(() => parseHostPort(7001, 'port')).toThrow(/not a string/);
    expect(tryParseHostPort(undefined)).toBeUndefined();
    expect(tryParseHostPort('nope')).toBeUndefined();
    expect(tryParseHostPort('[::1]:6379')).toEqual({ host: '::1', port: 6379 });
    expect(formatHostPort({ host: '::1', port: 6379 })).toBe('[::1]:6379');
    expect(formatHostPort({ host: '10.0.0.1', port: 6379 })).toBe('10.0.0.1:6379');
    for (const s of ['[::1]:1', 'a:2', '1.2.3.4:3']) expect(formatHostPort(parseHostPort(s, 'x'))).toBe(s);
  });
});
