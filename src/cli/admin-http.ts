import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { parseHostPort } from '../node/config.js';
import { type SimpleFetch, tlsFetch } from '../tls/fetch.js';
import type { CliIO } from './io.js';
import { CommandFailedError, UsageError } from './io.js';

/** `HOST:PORT`, `http://HOST:PORT` or `https://HOST:PORT` → its base URL; a UsageError naming `flag` otherwise. */
export function endpointUrl(flag: string, endpoint: string): string {
  const m = /^(https?):\/\/([^/]*)\/*$/.exec(endpoint);
  const addr = m ? m[2]! : endpoint;
  try {
    parseHostPort(flag, addr);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  return `${m ? m[1] : 'http'}://${addr}`;
}

/** A member's bare `httpAddr` as a URL in the scheme of `like` (members share one scheme). */
export function sameScheme(like: string, addr: string): string {
  return `${like.startsWith('https://') ? 'https' : 'http'}://${addr}`;
}

/**
 * The admin commands' fetch. For `https://` endpoints it trusts the system roots plus the PEM file
 * in `FLOE_TLS_CA` (e.g. the CA `floe dev --tls` made), and shows `FLOE_TLS_CERT`/`FLOE_TLS_KEY`
 * when the node asks for a client certificate (docs/tls.md).
 */
export function adminFetch(env: Readonly<Record<string, string | undefined>>): SimpleFetch {
  const file = (name: string): Buffer | undefined => {
    const path = env[name];
    if (!path) return undefined;
    try {
      return readFileSync(path);
    } catch (err) {
      throw new UsageError(
        `${name}=${path}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? err})`,
      );
    }
  };
  const ca = file('FLOE_TLS_CA');
  const cert = file('FLOE_TLS_CERT');
  const key = file('FLOE_TLS_KEY');
  return tlsFetch({
    ...(ca ? { ca: [...rootCertificates, ca] } : {}),
    ...(cert && key ? { cert, key } : {}),
  });
}

/** Connection options of the admin commands (`--endpoint`, `--user`, `--password`). */
export interface Conn {
  endpoint: string;
  user?: string;
  password?: string;
}

/** JSON content type when there is a body; Basic auth from `--user`/`--password`, else $FLOE_USER/$FLOE_PASSWORD. */
export function requestHeaders(
  io: CliIO,
  c: { user?: string; password?: string },
  body: unknown,
): Record<string, string> {
  const user = c.user ?? io.env.FLOE_USER;
  const password = c.password ?? io.env.FLOE_PASSWORD;
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (user && password)
    headers.authorization = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  return headers;
}

/** One admin call; follows the leader by hand (fetch would drop credentials on a cross-origin 307). */
export async function call(
  io: CliIO,
  c: Conn,
  method: string,
  path: string,
  body?: unknown,
): Promise<unknown> {
  let endpoint = endpointUrl('--endpoint', c.endpoint);
  const fetch = adminFetch(io.env);
  const headers = requestHeaders(io, c, body);
  for (let hop = 0; hop < 3; hop++) {
    let res: Awaited<ReturnType<SimpleFetch>>;
    try {
      res = await fetch(`${endpoint}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        redirect: 'manual',
        signal: AbortSignal.timeout(15_000),
      });
    } catch (err) {
      throw new CommandFailedError(`cannot reach Floe at ${endpoint}: ${(err as Error).message}`);
    }
    const text = await res.text();
    const parsed = text ? (JSON.parse(text) as { message?: string; leader?: { httpAddr?: string } }) : {};
    if (res.status === 307 && parsed.leader?.httpAddr) {
      endpoint = sameScheme(endpoint, parsed.leader.httpAddr);
      continue;
    }
    if (!res.ok)
      throw new CommandFailedError(`${method} ${path} failed (${res.status}): ${parsed.message ?? text}`);
    return parsed;
  }
  throw new CommandFailedError('the leader kept moving; try again');
}
