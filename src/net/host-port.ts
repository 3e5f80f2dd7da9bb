import { isIP } from 'node:net';

/** A network address split into its parts; `host` has no brackets (`::1`, not `[::1]`). */
export interface HostPort {
  host: string;
  port: number;
}

/** An address that is not `host:port`; the message names what was being parsed and what is wrong. */
export class HostPortError extends Error {
  constructor(
    readonly what: string,
    readonly value: unknown,
    readonly reason: string,
  ) {
    super(`${what} must be HOST:PORT (IPv6 as [ADDR]:PORT), got ${JSON.stringify(value)}: ${reason}`);
    this.name = 'HostPortError';
  }
}

export interface HostPortRules {
  /** Port 0 ("any free port") is allowed: right for addresses to listen on, wrong for ones to dial. Default false. */
  allowPortZero?: boolean;
}

const HOST_NAME = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/;

/**
 * The one `host:port` parser of the code base (flags, config files, member addresses, peer
 * addresses, RESP announce, the fault proxy). Accepted: `name:port`, `1.2.3.4:port`,
 * `[v6]:port` (with an optional zone, `[fe80::1%eth0]:port`). Refused, with the reason: empty,
 * whitespace, a missing or empty host, a missing port, an IPv6 address without brackets (its last
 * group would be taken for the port), a bracket that does not hold an IPv6 address, a port that is
 * not 1..65535 (0..65535 with `allowPortZero`) in plain decimal.
 */
export function parseHostPort(value: unknown, what: string, rules: HostPortRules = {}): HostPort {
  const fail = (reason: string): never => {
    throw new HostPortError(what, value, reason);
  };
  if (typeof value !== 'string') return fail('not a string');
  if (value.length === 0) return fail('empty');
  if (/\s/.test(value)) return fail('it contains whitespace');
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(value);
  if (scheme) return fail(`a URL, not an address (drop "${scheme[0]}")`);
  let host: string;
  let rest: string;
  if (value.startsWith('[')) {
    const close = value.indexOf(']');
    if (close < 0) return fail('"[" without "]"');
    host = value.slice(1, close);
    if (isIP(host) !== 6) return fail(`"[${host}]" does not hold an IPv6 address`);
    rest = value.slice(close + 1);
    if (rest === '') return fail('the port is missing (":PORT" after "]")');
    if (!rest.startsWith(':')) return fail('expected ":PORT" after "]"');
    rest = rest.slice(1);
  } else {
    const colon = value.lastIndexOf(':');
    if (colon < 0) return fail('the port is missing (":PORT")');
    host = value.slice(0, colon);
    rest = value.slice(colon + 1);
    if (host.includes(':')) return fail(`an IPv6 address needs brackets: [${host}]:${rest}`);
    if (host === '') return fail('the host is missing');
    if (isIP(host) !== 4 && !HOST_NAME.test(host))
      return fail(`"${host}" is not a host name or IPv4 address`);
  }
  if (rest === '') return fail('the port is missing');
  if (!/^[0-9]{1,5}$/.test(rest)) return fail(`the port "${rest}" is not a number`);
  const port = Number(rest);
  const min = rules.allowPortZero ? 0 : 1;
  if (port < min || port > 65535) return fail(`the port ${port} is not in ${min}..65535`);
  return { host, port };
}

/** Like parseHostPort, but undefined instead of an error (and for undefined). */
export function tryParseHostPort(value: string | undefined, rules?: HostPortRules): HostPort | undefined {
  if (value === undefined) return undefined;
  try {
    return parseHostPort(value, 'address', rules);
  } catch {
    return undefined;
  }
}

/** The inverse: `host:port`, with brackets around an IPv6 host. */
export function formatHostPort(a: HostPort): string {
  return a.host.includes(':') ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`;
}

/** For request validation: the error message when `value` is not a `host:port` (port 1..65535), else undefined. */
export function hostPortProblem(value: unknown, what: string): string | undefined {
  try {
    parseHostPort(value, what);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}
