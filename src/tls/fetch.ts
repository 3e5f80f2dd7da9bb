import { request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

/** Trust and identity of an HTTPS client: CA(s) to verify the server with, and a client certificate if asked. */
export interface TlsClientOptions {
  /** CA certificates trusted for the server's certificate; default: the system's roots. */
  ca?: string | Buffer | (string | Buffer)[];
  /** A client certificate and key, for servers that ask for one (`--tls-client-auth request|require`). */
  cert?: string | Buffer;
  key?: string | Buffer;
}

export interface SimpleFetchInit {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  signal?: AbortSignal;
  /** Redirects are never followed (as with `redirect: 'manual'`). */
  redirect?: 'manual';
}

export interface SimpleResponse {
  status: number;
  ok: boolean;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
  json(): Promise<unknown>;
}

export type SimpleFetch = (url: string, init?: SimpleFetchInit) => Promise<SimpleResponse>;

/** Response bodies larger than this are refused (every Floe answer is far smaller). */
const MAX_BODY_BYTES = 16 * 1024 * 1024;

/**
 * A small `fetch` for `http://` and `https://` URLs over node:http/https, with the CA and client
 * certificate given (Node 20's global fetch cannot take them without the undici package). It is
 * what the SDK (`FloeClient({ tls })`), the CLI and a node's calls to other members use.
 * `options` may be a function: it is read for every request, and a new object (after a
 * certificate reload) starts a new connection pool.
 */
export function tlsFetch(options: TlsClientOptions | (() => TlsClientOptions) = {}): SimpleFetch {
  const read = typeof options === 'function' ? options : () => options;
  let agentFor: TlsClientOptions | undefined;
  let agent: HttpsAgent | undefined;
  const currentAgent = (): HttpsAgent => {
    const o = read();
    if (agent === undefined || agentFor !== o) {
      agent?.destroy();
      agent = new HttpsAgent({ keepAlive: true, ca: o.ca, cert: o.cert, key: o.key });
      agentFor = o;
    }
    return agent;
  };
  return (url, init = {}) =>
    new Promise<SimpleResponse>((resolve, reject) => {
      const u = new URL(url);
      const https = u.protocol === 'https:';
      if (!https && u.protocol !== 'http:') {
        reject(new TypeError(`only http:// and https:// URLs are supported (got ${url})`));
        return;
      }
      const headers: Record<string, string> = { ...init.headers };
      if (init.body !== undefined) headers['content-length'] = String(Buffer.byteLength(init.body));
      const req = (https ? httpsRequest : httpRequest)(
        u,
        {
          method: init.method ?? 'GET',
          headers,
          signal: init.signal,
          ...(https ? { agent: currentAgent() } : {}),
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size > MAX_BODY_BYTES) {
              res.destroy(new Error(`response from ${u.host} exceeds ${MAX_BODY_BYTES} bytes`));
              return;
            }
            chunks.push(c);
          });
          res.on('error', reject);
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            const status = res.statusCode ?? 0;
            resolve({
              status,
              ok: status >= 200 && status < 300,
              headers: {
                get: (name) => {
                  const v = res.headers[name.toLowerCase()];
                  return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
                },
              },
              text: async () => text,
              json: async () => JSON.parse(text) as unknown,
            });
          });
        },
      );
      req.on('error', reject);
      req.end(init.body);
    });
}
