// Review of FS-21 (a refused connection costs no backoff wait): scenarios where the SDK skips the wait although the
// request may have reached a node, or tries an endpoint twice in one round without a wait.
import { describe, expect, it } from 'vitest';
import { type FetchResponseLike, LEARNED_ENDPOINT_TTL_MS } from './http-transport.js';
import { loggingTransport } from './test-doubles.js';

function reply(status: number, body: unknown): FetchResponseLike {
  const text = JSON.stringify(body);
  return { status, headers: { get: () => null }, text: async () => text };
}
const granted = reply(200, { ok: true });

/** A socket error as Node reports it (`code`, `syscall`), as the `cause` of undici's TypeError. */
const sysError = (code: string, syscall: string, host: string) =>
  Object.assign(new Error(`${syscall} ${code} ${host}`), { code, syscall });

describe('FS-21 review: an error code that can also end a connection whose request was delivered', () => {
  // Measured on Linux with Node 20.20 (undici 6.24): a keep-alive connection to a server on 10.9.0.1:8080; the server
  // got and handled the request, then the route to it went (`ip rule ... unreachable`); after TCP's retransmissions
  // fetch failed with TypeError('fetch failed', { cause: read ENETUNREACH }) (code ENETUNREACH, syscall 'read').
  // The kernel reports the ICMP or routing error of an established connection (sk_err_soft) when its retransmissions
  // time out: ECONNREFUSED, EHOSTUNREACH and ENETUNREACH all arise there, after the request reached the node.
  // Only the syscall tells the connect (nothing sent) from a read or write on a connection (maybe delivered).
  for (const code of ['ENETUNREACH', 'EHOSTUNREACH', 'ECONNREFUSED']) {
    it(`a connection that failed with read ${code} after the node got the request still costs a backoff wait`, async () => {
      const { t, log } = loggingTransport(['n1:8080', 'floe-lb:8080'], (host) => {
        if (host === 'n1:8080')
          throw new TypeError('fetch failed', { cause: sysError(code, 'read', '10.9.0.1:8080') });
        return granted;
      });
      await t.post('/v1/x', {}, { budgetMs: 5000 });
      expect(log).toEqual(['n1:8080', 'wait 25', 'floe-lb:8080']);
    });
  }

  it('an answer whose body fails mid-read with read EHOSTUNREACH (the node got the request and answered) still costs a backoff wait', async () => {
    // What undici's body stream rejects with when the socket fails mid-body: TypeError('terminated', { cause }).
    const cutMidBody = (): FetchResponseLike => ({
      status: 200,
      headers: { get: () => null },
      text: async () => {
        throw new Error('not used: body given');
      },
      body: {
        getReader: () =>
          ({
            read: async () => {
              throw new TypeError('terminated', { cause: sysError('EHOSTUNREACH', 'read', '10.9.0.1:8080') });
            },
            cancel: async () => {},
          }) as unknown as ReadableStreamDefaultReader<Uint8Array>,
      },
    });
    const { t, log } = loggingTransport(['n1:8080', 'floe-lb:8080'], (host) =>
      host === 'n1:8080' ? cutMidBody() : granted,
    );
    await t.post('/v1/x', {}, { budgetMs: 5000 });
    expect(log).toEqual(['n1:8080', 'wait 25', 'floe-lb:8080']);
  });
});

describe('FS-21 review: the endpoint checked for the round is the one tried next', () => {
  it('a learned endpoint expiring between the round check and the next pick does not get a refusing endpoint tried twice without a wait', async () => {
    // The only configured endpoint refuses; a learned endpoint (from an earlier call's redirect) reaches its TTL while
    // the call goes on. With a clock that moves at every read, at some moment the round check sees it still learned
    // (not tried since the wait: go on at once) and the pick, one read later, sees it expired: the configured endpoint,
    // already tried in this round, is tried again at once.
    const twiceInARow: Array<{ offset: number; log: string[] }> = [];
    for (let offset = 0; offset < 40; offset++) {
      let phase: 'learn' | 'run' = 'learn';
      const clock = { now: 0, tick: 1 };
      const { t, log } = loggingTransport(
        ['n1:8080'],
        (host) => {
          if (phase === 'learn')
            return host === 'n1:8080'
              ? reply(307, { error: 'not_leader', leader: { httpAddr: 'n9:8080' } })
              : granted;
          throw new TypeError('fetch failed', { cause: sysError('ECONNREFUSED', 'connect', host) });
        },
        clock,
      );
      await t.post('/v1/x', {}, { budgetMs: 5000 });
      expect(t.learnedEndpoints).toEqual(['http://n9:8080']);
      phase = 'run';
      log.length = 0;
      clock.now = LEARNED_ENDPOINT_TTL_MS - offset;
      await t.post('/v1/x', {}, { budgetMs: 3000 }).catch(() => {});
      for (let i = 0; i + 1 < log.length; i++)
        if (!log[i]?.startsWith('wait') && log[i] === log[i + 1])
          twiceInARow.push({ offset, log: log.slice(0, 6) });
    }
    expect(twiceInARow).toEqual([]);
  });
});
