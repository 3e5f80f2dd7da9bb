// Second review of FS-21 (commit 5d4f465: only a failed connect or name lookup skips the backoff wait). Scenarios where
// a down node, whose request certainly reached no server, still costs the client a backoff wait per attempt.
import { createServer } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { tlsFetch } from '../tls/fetch.js';
import type { FetchLike, FetchResponseLike } from './http-transport.js';
import { loggingTransport } from './test-doubles.js';

function reply(status: number, body: unknown): FetchResponseLike {
  const text = JSON.stringify(body);
  return { status, headers: { get: () => null }, text: async () => text };
}
const granted = reply(200, { ok: true });

/** A loopback port nothing listens on (bound, then closed): a connect there is refused at once. */
let closedPort = 0;
beforeAll(async () => {
  closedPort = await new Promise<number>((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a !== null ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
});

describe('FS-21 review 2: the SDK with TLS (FloeClient({ tls }) uses tlsFetch) and a down node', () => {
  // tlsFetch (src/tls/fetch.ts) is node:http/https, not undici: a refused connect rejects with the socket error itself,
  // `Error { code: 'ECONNREFUSED', syscall: 'connect' }` with no `cause` (measured on Node 20.20: https and http to
  // 127.0.0.1 with nothing listening; a name with two addresses gives an AggregateError of two such errors, no cause
  // either; an unknown name `ENOTFOUND` `getaddrinfo`, no cause). notSent() reads only `cause`, so every refused endpoint
  // costs a backoff wait: the FS-21 scenario (n1..n3 down, the balancer up) is back for every TLS client.
  it('a TLS client whose first endpoint refuses the connection (real tlsFetch, loopback, nothing listening) tries the next endpoint without a backoff wait', async () => {
    const real = tlsFetch({}) as unknown as FetchLike;
    const { t, log } = loggingTransport(['https://n1:8443', 'https://floe-lb:8443'], (host, url) => {
      if (host === 'n1:8443') {
        const path = new URL(url).pathname;
        return real(`https://127.0.0.1:${closedPort}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{}',
          redirect: 'manual',
          signal: AbortSignal.timeout(5000),
        });
      }
      return Promise.resolve(granted);
    });
    await t.post('/v1/x', {}, { budgetMs: 5000 });
    expect(log).toEqual(['n1:8443', 'floe-lb:8443']);
  });

  it('a TLS client whose endpoints n1..n3 all refuse reaches the balancer in its first round, without waits', async () => {
    const real = tlsFetch({}) as unknown as FetchLike;
    const { t, log } = loggingTransport(
      ['https://n1:8443', 'https://n2:8443', 'https://n3:8443', 'https://floe-lb:8443'],
      (host, url) => {
        if (host !== 'floe-lb:8443')
          return real(`https://127.0.0.1:${closedPort}${new URL(url).pathname}`, {
            method: 'POST',
            headers: {},
            body: '{}',
            redirect: 'manual',
            signal: AbortSignal.timeout(5000),
          });
        return Promise.resolve(granted);
      },
    );
    await t.post('/v1/x', {}, { budgetMs: 5000 });
    expect(log).toEqual(['n1:8443', 'n2:8443', 'n3:8443', 'floe-lb:8443']);
  });
});

describe('FS-21 review 2: happy eyeballs (autoSelectFamily, the default since Node 20) and a down node', () => {
  // Measured on Node 20.20 (undici 6.24) with global fetch: a name resolving to an IPv6 address that drops the SYN and
  // to 127.0.0.1 where nothing listens. net tries the IPv6 address for autoSelectFamilyAttemptTimeout (250 ms), closes
  // that attempt unconnected, then gets the refusal: fetch fails after ~250-300 ms with
  // TypeError('fetch failed', { cause: AggregateError { code: 'ETIMEDOUT', errors: [
  //   { code: 'ETIMEDOUT', syscall: 'connect', address: '2001:db8::1' },
  //   { code: 'ECONNREFUSED', syscall: 'connect', address: '127.0.0.1' } ] } }).
  // Neither attempt connected (net writes nothing before 'connect'): the request reached no server, yet it waits.
  // (A name with two refusing addresses, ::1 and 127.0.0.1, gives two ECONNREFUSED/connect errors: that case skips.)
  it('a name whose IPv6 address timed out in happy eyeballs and whose IPv4 address refused costs no backoff wait', async () => {
    const err = (code: string, address: string) =>
      Object.assign(new Error(`connect ${code} ${address}:8080`), {
        code,
        syscall: 'connect',
        address,
        port: 8080,
      });
    const cause = Object.assign(
      new AggregateError([err('ETIMEDOUT', '2001:db8::1'), err('ECONNREFUSED', '127.0.0.1')]),
      { code: 'ETIMEDOUT' },
    );
    const { t, log } = loggingTransport(['n1:8080', 'floe-lb:8080'], (host) =>
      host === 'n1:8080'
        ? Promise.reject(new TypeError('fetch failed', { cause }))
        : Promise.resolve(granted),
    );
    await t.post('/v1/x', {}, { budgetMs: 5000 });
    expect(log).toEqual(['n1:8080', 'floe-lb:8080']);
  });
});

describe('FS-21 review 2: a Floe node whose HTTP server is closing (a stopping node, a rolling restart)', () => {
  // A node's close() stops the Raft node, then closes its fastify app (src/node/start.ts). Fastify 5 (no
  // `return503OnClosing` set, so on) answers every request that reaches the router while it closes, before any hook or
  // handler runs, with 503 and the body below (and `Connection: close`). Measured with global fetch on Node 20.20 and
  // fastify 5.12.8: a request held in flight, app.close(), then the next requests from the same client: the one sent
  // on the kept-alive connection got exactly this answer. Nothing ran: the next endpoint is as safe as after `stopped`
  // (503, retried), or after a balancer's bare 503, which 5d4f465 now retries. The SDK reads `error` as Floe's code,
  // 'Service Unavailable', not a retryable one: the call fails at once (an acquire or a sequence alloc throws
  // FloeRequestError to the application) although every other node is up.
  it('the 503 a closing node answers (fastify: error "Service Unavailable") is retried on the next endpoint', async () => {
    const closingNode: FetchResponseLike = {
      status: 503,
      headers: { get: (n) => (n.toLowerCase() === 'connection' ? 'close' : null) },
      text: async () => '{"error":"Service Unavailable","message":"Service Unavailable","statusCode":503}',
    };
    const { t, log } = loggingTransport(['n1:8080', 'n2:8080'], (host) =>
      Promise.resolve(host === 'n1:8080' ? closingNode : granted),
    );
    const r = await t.post('/v1/x', {}, { budgetMs: 5000 });
    expect(r.endpoint).toBe('http://n2:8080');
    expect(log).toEqual(['n1:8080', 'wait 25', 'n2:8080']);
  });
});

describe('FS-21 review 2: the common case, measured (passes: a guard, not a hole)', () => {
  // Node 20's global fetch to 127.0.0.1 with nothing listening: TypeError('fetch failed', { cause: Error { code:
  // 'ECONNREFUSED', syscall: 'connect' } }). A name with two addresses (::1, 127.0.0.1; autoSelectFamily on) gives
  // cause AggregateError { code: 'ECONNREFUSED', errors: [two ECONNREFUSED/connect errors] }: both skip the wait.
  it('global fetch, a refused connect on loopback: the next endpoint at once', async () => {
    const { t, log } = loggingTransport(['n1:8080', 'floe-lb:8080'], (host, url) =>
      host === 'n1:8080'
        ? (globalThis.fetch as unknown as FetchLike)(
            `http://127.0.0.1:${closedPort}${new URL(url).pathname}`,
            {
              method: 'POST',
              headers: {},
              body: '{}',
              redirect: 'manual',
              signal: AbortSignal.timeout(5000),
            },
          )
        : Promise.resolve(granted),
    );
    await t.post('/v1/x', {}, { budgetMs: 5000 });
    expect(log).toEqual(['n1:8080', 'floe-lb:8080']);
  });
});
